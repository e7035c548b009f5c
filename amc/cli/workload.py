"""What `amc demo` submits, and what the protocol says must become of each task.

The workload is small and realistic: app flows on four simulated phones (three on host h1,
one on host h2), plus the three situations amc exists for:

- `queued_cancel`: a task cancelled while it waits in the queue;
- `inflight_cancel`: a task cancelled while a long shell command runs on its device;
- `lease_loss`: a task whose host dies mid-run (h2 is SIGKILLed), so its lease lapses, the
  task is requeued and host h1 runs it again.

`check(job, task, events)` reads only the server's task resource and history and returns
the ways they differ from PROTOCOL.md's expectations for that kind of job (an empty list
when the task ended as it must). It restates the expected outcomes, it decides nothing:
the server and the Host Agents made every decision before it looks.
"""

from __future__ import annotations

import attrs

PLAIN, QUEUED_CANCEL, INFLIGHT_CANCEL, LEASE_LOSS = "plain", "queued_cancel", "inflight_cancel", "lease_loss"

# The host that is killed, and the one that finishes its work.
DOOMED_HOST, SURVIVOR_HOST = "h2", "h1"


@attrs.frozen
class Job:
    name: str
    kind: str
    story: str  # one line for people: what this task shows
    body: dict  # the submission, as POST /v1/tasks takes it

    def submission(self) -> dict:
        return {**self.body, "labels": {"demo": self.name}}


def _step(step_id: str, action: str, **args) -> dict:
    return {"id": step_id, "action": action, "args": args}


def jobs() -> list[Job]:
    """The demo's tasks, in the order they are submitted."""
    return [
        Job("checkout", LEASE_LOSS, "its host h2 is killed mid-run; the lease lapses and h1 runs it again", {
            "requirements": {"attributes": {"model": "Pixel 7"}},
            "plan": {"steps": [
                _step("open-shop", "launch", package="com.example.app"),
                _step("load-cart", "shell", command="sleep 2"),
                _step("pay", "tap", x=540, y=2000),
                _step("receipt", "screenshot"),
            ]}}),
        Job("settings-smoke", PLAIN, "open Settings and take a screenshot", {
            "plan": {"steps": [
                _step("open", "launch", package="com.android.settings"),
                _step("settle", "wait", seconds=0.5),
                _step("capture", "screenshot"),
            ]}}),
        Job("login-flow", PLAIN, "log in to the example app", {
            "plan": {"steps": [
                _step("open", "launch", package="com.example.app"),
                _step("focus-email", "tap", x=540, y=900),
                _step("type-email", "text", text="demo@example.com"),
                _step("submit", "keyevent", key="ENTER"),
                _step("settle", "wait", seconds=1),
                _step("capture", "screenshot"),
            ]}}),
        Job("browser-search", PLAIN, "search in Chrome, on the Samsung only", {
            "requirements": {"attributes": {"model": "SM-G991B"}},
            "plan": {"steps": [
                _step("open", "launch", package="com.android.chrome"),
                _step("focus", "tap", x=540, y=200),
                _step("type", "text", text="android automation"),
                _step("search", "keyevent", key="ENTER"),
                _step("settle", "wait", seconds=1),
            ]}}),
        Job("battery-report", PLAIN, "read the battery state of amc-sim-03", {
            "requirements": {"serial": "amc-sim-03"},
            "plan": {"steps": [
                _step("battery", "shell", command="dumpsys battery"),
                _step("sdk", "shell", command="getprop ro.build.version.sdk"),
            ]}}),
        Job("onboarding", PLAIN, "a three-stage workflow with checkpoints", {
            "plan": {"stages": [
                {"id": "setup", "steps": [_step("open", "launch", package="com.example.app")]},
                {"id": "act", "steps": [_step("swipe-intro", "swipe", x1=900, y1=1200, x2=100, y2=1200),
                                        _step("accept", "tap", x=540, y=2100)]},
                {"id": "verify", "steps": [_step("capture", "screenshot")]},
            ]}}),
        Job("home-check", PLAIN, "go home and read the screen size", {
            "plan": {"steps": [
                _step("home", "keyevent", key="HOME"),
                _step("size", "shell", command="wm size"),
                _step("settle", "wait", seconds=1),
            ]}}),
        Job("long-sync", INFLIGHT_CANCEL, "cancelled while a long command runs on the device", {
            "priority": 5,  # first off the queue, so its cancellation comes early
            "plan": {"steps": [
                _step("open", "launch", package="com.android.settings"),
                _step("sync", "shell", command="sleep 8"),
                _step("confirm", "tap", x=540, y=1200),
                _step("capture", "screenshot"),
            ]}}),
        Job("nightly-report", QUEUED_CANCEL, "cancelled while it waits in the queue", {
            "priority": -5,  # last off the queue: it is still waiting when it is cancelled
            "plan": {"steps": [_step("report", "shell", command="echo report")]}}),
    ]


# -- the verdict ------------------------------------------------------------------------------


def planned_step_ids(plan: dict) -> list[str]:
    if "stages" in plan:
        return [step["id"] for stage in plan["stages"] for step in stage["steps"]]
    return [step["id"] for step in plan["steps"]]


def check(job: Job, task: dict, events: list[dict]) -> list[str]:
    """How `task` (and its history `events`) differ from what the protocol requires of `job`."""
    problems: list[str] = []

    def expect(condition: bool, text: str) -> None:
        if not condition:
            problems.append(text)

    result = task.get("result") or {}
    attempts = task.get("attempts") or []
    cancellation = task.get("cancellation")
    steps = result.get("steps")
    expect(task["status"] in ("done", "failed", "cancelled"), f"still {task['status']}")
    if problems:
        return problems
    expect(all(a["outcome"] is not None for a in attempts), "an attempt of an ended task has no outcome")
    ended = [e for e in events if e["type"] == "ended"]
    expect(len(ended) == 1 and ended[0]["data"].get("status") == task["status"],
           "the history does not end once, with the task's status")
    if steps is not None:
        expect([s["id"] for s in steps] == planned_step_ids(task["plan"]),
               "the reported steps are not one per planned step, in plan order")

    if job.kind == PLAIN:
        expect(task["status"] == "done", f"ended {task['status']}, expected done")
        expect(result.get("reason") == "reported", f"result reason {result.get('reason')}, expected reported")
        expect([a["outcome"] for a in attempts] == ["done"], "expected exactly one attempt, done")
        expect(cancellation is None, "has a cancellation nobody asked for")
        expect(steps is not None and all(s["status"] == "completed" for s in steps), "not every step completed")

    elif job.kind == QUEUED_CANCEL:
        expect(task["status"] == "cancelled", f"ended {task['status']}, expected cancelled")
        expect(result.get("reason") == "cancelled_while_queued",
               f"result reason {result.get('reason')}, expected cancelled_while_queued")
        expect(attempts == [] and task.get("attempt") is None, "an attempt was created for a queued cancel")
        expect(bool(cancellation) and cancellation["state"] == "completed" and cancellation["attempt"] is None,
               "the cancellation is not completed with attempt null")

    elif job.kind == INFLIGHT_CANCEL:
        expect(task["status"] == "cancelled", f"ended {task['status']}, expected cancelled")
        expect(result.get("reason") == "reported", f"result reason {result.get('reason')}, expected reported")
        expect(bool(attempts) and attempts[-1]["outcome"] == "cancelled", "the last attempt's outcome is not cancelled")
        expect(bool(cancellation) and cancellation["state"] == "completed", "the cancellation is not completed")
        expect(bool(cancellation) and cancellation.get("delivered_at") is not None, "the cancellation was never delivered")
        outcomes = [s["status"] for s in steps or []]
        expect(any(s["status"] == "not_started" and s.get("reason") == "cancelled" for s in steps or []),
               "no step is not_started for reason cancelled")
        first_unstarted = outcomes.index("not_started") if "not_started" in outcomes else len(outcomes)
        expect(all(o == "not_started" for o in outcomes[first_unstarted:]), "a step ran after the stop")
        expect("cancelled" not in outcomes, "a step is called cancelled (a step is interrupted or not_started)")

    elif job.kind == LEASE_LOSS:
        expect(task["status"] == "done", f"ended {task['status']}, expected done")
        expect([a["outcome"] for a in attempts] == ["expired", "done"],
               f"attempt outcomes {[a['outcome'] for a in attempts]}, expected ['expired', 'done']")
        if len(attempts) == 2:
            expect(attempts[0]["host_id"] == DOOMED_HOST and attempts[1]["host_id"] == SURVIVOR_HOST,
                   f"expected attempt 1 on {DOOMED_HOST} and attempt 2 on {SURVIVOR_HOST}")
            expect(attempts[0]["ended_at"] == attempts[0]["lease_expires_at"],
                   "the expired attempt did not end at its lease's expiry")
        kinds = [e["type"] for e in events]
        expect("lease_expired" in kinds and "requeued" in kinds
               and kinds.index("lease_expired") < kinds.index("requeued"),
               "the history lacks lease_expired followed by requeued")
        expect(cancellation is None, "has a cancellation nobody asked for")
    return problems
