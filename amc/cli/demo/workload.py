"""What `amc demo` submits, and what the protocol says must become of each task.

The workload is small and realistic: app flows on four simulated phones (three on host h1,
one on host h2), plus the situations amc exists for:

- `queued_cancel`: a task cancelled while it waits in the queue;
- `inflight_cancel`: a task cancelled while a long shell command runs on its device;
- `lease_loss`: a task whose host dies mid-run (h2 is SIGKILLed), so its lease lapses, the
  task is requeued and host h1 runs it again;
- `host_drain`: a task whose host is stopped gracefully mid-run (h3 gets SIGTERM and a short
  drain time): the step under way ends, the attempt is released, and host h1 finishes it;
- `steered`: a task whose plan is corrected while a step runs (`Job.steers`): one steer
  skips a later step, another inserts one;
- `paused`: a task paused while a step runs, held paused over several lease renewals, then
  resumed; while paused it is sent a follow-up (`Job.follow_up`);
- `successor`: the task that follow-up becomes when its task ends done (`Job.successor_of`),
  not submitted by the demo but created by the server;
- `app`: the app under test: an APK the demo builds (`App`) and uploads as an input, which
  the task installs, launches, photographs and uninstalls, recorded on video throughout
  (`"record": true`).

`check(job, task, events, messages, seen)` reads only the server's task resource, history
and messages (and, for a pause, what the demo saw while it lasted) and returns the ways they
differ from specs/protocol.md's expectations for that kind of job (an empty list when the task
ended as it must). It restates the expected outcomes, it decides nothing: the server and
the Host Agents made every decision before it looks.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from amc.cli.client import JsonObject

from amc.core.lifecycle import TERMINAL_STATUSES, AttemptState, CancellationState, MessageState, StepStatus, TaskStatus

PLAIN, QUEUED_CANCEL, INFLIGHT_CANCEL, LEASE_LOSS = "plain", "queued_cancel", "inflight_cancel", "lease_loss"
STEERED, PAUSED, SUCCESSOR = "steered", "paused", "successor"
HOST_DRAIN, APP = "host_drain", "app"
APPLIED = (MessageState.admitted, MessageState.completed)  # the message states of a message its host applied

# The host that is killed, the one that is stopped gracefully, and the one that finishes their work.
DOOMED_HOST, RETIRING_HOST, SURVIVOR_HOST = "h2", "h3", "h1"


@attrs.frozen
class Job:
    name: str
    kind: str
    story: str  # one line for people: what this task shows
    body: JsonObject | None  # the submission, as POST /v1/tasks takes it; None: the server creates the task
    steers: tuple[JsonObject, ...] = ()  # `steered`: the edits (a steer's data) sent while a step runs
    follow_up: JsonObject | None = None  # `paused`: the follow-up (`text`, `data`) sent while it is paused
    successor_of: str | None = None  # `successor`: the job whose follow-up this task is

    def submission(self) -> JsonObject:
        assert self.body is not None, f"the server creates the task of {self.name}"
        return {**self.body, "labels": {"demo": self.name}}


@attrs.frozen
class App:
    """The app under test: an APK built by the demo, and the package and version code its
    manifest holds, read back as the phone's package manager reads them."""

    data: bytes
    package: str
    version_code: int

    @property
    def ref(self) -> str:
        """The input's reference: its sha256, known before the upload (Part F)."""
        return "sha256:" + hashlib.sha256(self.data).hexdigest()


def build_app() -> App:
    from amc.sim import apk, apk_build

    data = apk_build.build_apk("com.example.shop", version_code=7, version_name="1.7")
    package, version_code = apk.read(data)
    return App(data, package, version_code)


def _step(step_id: str, action: str, **args: Any) -> JsonObject:
    return {"id": step_id, "action": action, "args": args}


def jobs(app: App) -> list[Job]:
    """The demo's tasks, in the order they are submitted; `app-install` installs `app`."""
    return [
        Job(
            "checkout",
            LEASE_LOSS,
            "its host h2 is killed mid-run; the lease lapses and h1 runs it again",
            {
                "requirements": {"attributes": {"model": "Pixel 7"}},
                "plan": {
                    "steps": [
                        _step("open-shop", "launch", package="com.example.app"),
                        _step("load-cart", "shell", command="sleep 2"),
                        _step("pay", "tap", x=540, y=2000),
                        _step("receipt", "screenshot"),
                    ]
                },
            },
        ),
        Job(
            "app-update",
            HOST_DRAIN,
            "its host h3 is stopped gracefully mid-run; the attempt is released and h1 finishes it",
            {
                "requirements": {"attributes": {"model": "SM-G991B"}},
                "plan": {
                    "steps": [
                        _step("open-store", "launch", package="com.android.settings"),
                        _step("download", "shell", command="sleep 2"),
                        _step("install", "tap", x=540, y=1600),
                        _step("verify", "screenshot"),
                    ]
                },
            },
        ),
        Job(
            "settings-smoke",
            PLAIN,
            "open Settings, take a screenshot and a UI dump (stored with the task)",
            {
                "plan": {
                    "steps": [
                        _step("open", "launch", package="com.android.settings"),
                        _step("settle", "wait", seconds=0.5),
                        _step("capture", "screenshot"),
                        _step("layout", "ui_dump"),
                    ]
                }
            },
        ),
        Job(
            "app-install",
            APP,
            "install a built APK (uploaded once as an input), launch it, screenshot, uninstall; recorded on video",
            {
                "plan": {
                    "steps": [
                        _step("install", "install", input={"input": app.ref}),
                        _step("open", "launch", package=app.package),
                        _step("capture", "screenshot"),
                        _step("uninstall", "uninstall", package=app.package),
                    ],
                    "record": True,
                }
            },
        ),
        Job(
            "login-flow",
            PLAIN,
            "log in to the example app",
            {
                "plan": {
                    "steps": [
                        _step("open", "launch", package="com.example.app"),
                        _step("focus-email", "tap", x=540, y=900),
                        _step("type-email", "text", text="demo@example.com"),
                        _step("submit", "keyevent", key="ENTER"),
                        _step("settle", "wait", seconds=1),
                        _step("capture", "screenshot"),
                    ]
                }
            },
        ),
        Job(
            "browser-search",
            PLAIN,
            "search in Chrome, on the Samsung only",
            {
                "requirements": {"attributes": {"model": "SM-G991B"}},
                "plan": {
                    "steps": [
                        _step("open", "launch", package="com.android.chrome"),
                        _step("focus", "tap", x=540, y=200),
                        _step("type", "text", text="android automation"),
                        _step("search", "keyevent", key="ENTER"),
                        _step("settle", "wait", seconds=1),
                    ]
                },
            },
        ),
        Job(
            "battery-report",
            PLAIN,
            "read the battery state of amc-sim-03",
            {
                "requirements": {"serial": "amc-sim-03"},
                "plan": {
                    "steps": [
                        _step("battery", "shell", command="dumpsys battery"),
                        _step("sdk", "shell", command="getprop ro.build.version.sdk"),
                    ]
                },
            },
        ),
        Job(
            "onboarding",
            PLAIN,
            "a three-stage workflow with checkpoints",
            {
                "plan": {
                    "stages": [
                        {"id": "setup", "steps": [_step("open", "launch", package="com.example.app")]},
                        {
                            "id": "act",
                            "steps": [
                                _step("swipe-intro", "swipe", x1=900, y1=1200, x2=100, y2=1200),
                                _step("accept", "tap", x=540, y=2100),
                            ],
                        },
                        {"id": "verify", "steps": [_step("capture", "screenshot")]},
                    ]
                }
            },
        ),
        Job(
            "home-check",
            PLAIN,
            "go home and read the screen size",
            {
                "plan": {
                    "steps": [
                        _step("home", "keyevent", key="HOME"),
                        _step("size", "shell", command="wm size"),
                        _step("settle", "wait", seconds=1),
                    ]
                }
            },
        ),
        Job(
            "long-sync",
            INFLIGHT_CANCEL,
            "cancelled while a long command runs on the device",
            {
                "priority": 5,  # first off the queue, so its cancellation comes early
                "plan": {
                    "steps": [
                        _step("open", "launch", package="com.android.settings"),
                        _step("sync", "shell", command="sleep 8"),
                        _step("confirm", "tap", x=540, y=1200),
                        _step("capture", "screenshot"),
                    ]
                },
            },
        ),
        Job(
            "nightly-report",
            QUEUED_CANCEL,
            "cancelled while it waits in the queue",
            {
                "priority": -5,  # last off the queue: it is still waiting when it is cancelled
                "plan": {"steps": [_step("report", "shell", command="echo report")]},
            },
        ),
        Job(
            "photo-share",
            STEERED,
            "steered while it loads: `upload` skipped, `crop` inserted after `capture`",
            {
                "priority": 3,
                "plan": {
                    "steps": [
                        _step("open", "launch", package="com.example.app"),
                        _step("load", "shell", command="sleep 2"),
                        _step("capture", "screenshot"),
                        _step("share", "tap", x=540, y=1800),
                        _step("upload", "shell", command="echo upload"),
                    ]
                },
            },
            steers=(
                {"skip": ["upload"]},
                {"insert_after": "capture", "steps": [_step("crop", "swipe", x1=100, y1=400, x2=900, y2=1400)]},
            ),
        ),
        Job(
            "inventory-scan",
            PAUSED,
            "paused mid-plan over several lease renewals, resumed, then done",
            {
                "priority": 4,
                "plan": {
                    "steps": [
                        _step("open", "launch", package="com.example.app"),
                        _step("scan", "shell", command="sleep 2"),
                        _step("review", "tap", x=540, y=1500),
                        _step("export", "screenshot"),
                    ]
                },
            },
            follow_up={
                "text": "then send the scan to the warehouse",
                "data": {
                    "steps": [
                        _step("share", "launch", package="com.example.app", activity=".DetailActivity"),
                        _step("send", "tap", x=980, y=150),
                    ]
                },
            },
        ),
        Job(
            "scan-send",
            SUCCESSOR,
            "inventory-scan's follow-up, collected into a successor task when it ended done",
            None,
            successor_of="inventory-scan",
        ),
    ]


# -- the verdict ------------------------------------------------------------------------------


# The actions whose evidence (a screenshot's PNG, a UI dump's XML) the Host Agent stores with
# the task (specs/protocol.md Part C): each such step that completed lists its artifact.
OBSERVATIONS = ("screenshot", "ui_dump")


def observation_step_ids(job: Job, plan: JsonObject) -> set[str]:
    """The steps of `plan`, and those the job's steers insert, that take a screenshot or a UI dump."""
    steps = [step for stage in plan["stages"] for step in stage["steps"]] if "stages" in plan else list(plan["steps"])
    steps += [step for edit in job.steers for step in edit.get("steps", ())]
    return {step["id"] for step in steps if step["action"] in OBSERVATIONS}


def planned_step_ids(plan: JsonObject) -> list[str]:
    if "stages" in plan:
        return [step["id"] for stage in plan["stages"] for step in stage["steps"]]
    return [step["id"] for step in plan["steps"]]


def reported_step_ids(job: Job, plan: JsonObject) -> list[str]:
    """The steps a result must name, in order: the plan's, with the job's insertions where
    they were inserted (skipped steps stay, reported not_started)."""
    ids = planned_step_ids(plan)
    for edit in job.steers:
        if "insert_after" in edit:
            at = ids.index(edit["insert_after"]) + 1
            ids[at:at] = [step["id"] for step in edit["steps"]]
    return ids


def skipped_step_ids(job: Job) -> set[str]:
    return {step_id for edit in job.steers for step_id in edit.get("skip", ())}


def _time(text: str) -> float:
    return _dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def check(
    job: Job,
    task: JsonObject,
    events: list[JsonObject],
    messages: Sequence[JsonObject] = (),
    seen: JsonObject | None = None,
) -> list[str]:
    """How `task` (with its history `events` and its `messages`) differs from what the
    protocol requires of `job`; `seen` is what the demo saw while the task ran (for a pause:
    `paused_renewals`, the attempt's renewal count at each look while the task read paused)."""
    problems: list[str] = []

    def expect(condition: bool, text: str) -> None:
        if not condition:
            problems.append(text)

    result = task.get("result") or {}
    attempts = task.get("attempts") or []
    cancellation: Any = task.get("cancellation")  # JSON: an object or null
    steps = result.get("steps")
    expect(task["status"] in TERMINAL_STATUSES, f"still {task['status']}")
    if problems:
        return problems
    expect(all(a["outcome"] is not None for a in attempts), "an attempt of an ended task has no outcome")
    ended = [e for e in events if e["type"] == "ended"]
    expect(
        len(ended) == 1 and ended[0]["data"].get("status") == task["status"],
        "the history does not end once, with the task's status",
    )
    if steps is not None:
        expect(
            [s["id"] for s in steps] == reported_step_ids(job, task["plan"]),
            "the reported steps are not one per planned step, in plan order",
        )
        observed = observation_step_ids(job, task["plan"])
        bare = [
            s["id"]
            for s in steps
            if s["id"] in observed and s["status"] == StepStatus.completed and len(s.get("artifacts") or ()) != 1
        ]
        expect(not bare, f"the observation steps {', '.join(bare)} completed without listing their artifact")

    if job.kind in (PLAIN, STEERED, PAUSED, SUCCESSOR, APP):
        skipped = skipped_step_ids(job)
        expect(task["status"] == TaskStatus.done, f"ended {task['status']}, expected done")
        expect(result.get("reason") == "reported", f"result reason {result.get('reason')}, expected reported")
        expect([a["outcome"] for a in attempts] == [AttemptState.done], "expected exactly one attempt, done")
        expect(cancellation is None, "has a cancellation nobody asked for")
        expect(
            steps is not None and all(s["status"] == StepStatus.completed for s in steps if s["id"] not in skipped),
            "not every step completed",
        )
        if job.kind == STEERED:
            problems += _check_steered(job, steps or [], messages)
        elif job.kind == PAUSED:
            problems += _check_paused(steps or [], messages, seen or {})
        elif job.kind == SUCCESSOR:
            problems += _check_successor(task)
        elif job.kind == APP:
            problems += _check_app(task, steps or [], seen or {})

    elif job.kind == QUEUED_CANCEL:
        expect(task["status"] == TaskStatus.cancelled, f"ended {task['status']}, expected cancelled")
        expect(
            result.get("reason") == "cancelled_while_queued",
            f"result reason {result.get('reason')}, expected cancelled_while_queued",
        )
        expect(attempts == [] and task.get("attempt") is None, "an attempt was created for a queued cancel")
        expect(
            bool(cancellation)
            and cancellation["state"] == CancellationState.completed
            and cancellation["attempt"] is None,
            "the cancellation is not completed with attempt null",
        )

    elif job.kind == INFLIGHT_CANCEL:
        expect(task["status"] == TaskStatus.cancelled, f"ended {task['status']}, expected cancelled")
        expect(result.get("reason") == "reported", f"result reason {result.get('reason')}, expected reported")
        expect(
            bool(attempts) and attempts[-1]["outcome"] == AttemptState.cancelled,
            "the last attempt's outcome is not cancelled",
        )
        expect(
            bool(cancellation) and cancellation["state"] == CancellationState.completed,
            "the cancellation is not completed",
        )
        expect(
            bool(cancellation) and cancellation.get("delivered_at") is not None, "the cancellation was never delivered"
        )
        outcomes = [s["status"] for s in steps or []]
        expect(
            any(s["status"] == StepStatus.not_started and s.get("reason") == "cancelled" for s in steps or []),
            "no step is not_started for reason cancelled",
        )
        unstarted = StepStatus.not_started
        first_unstarted = outcomes.index(unstarted) if unstarted in outcomes else len(outcomes)
        expect(all(o == unstarted for o in outcomes[first_unstarted:]), "a step ran after the stop")
        expect(
            TaskStatus.cancelled not in outcomes, "a step is called cancelled (a step is interrupted or not_started)"
        )

    elif job.kind == LEASE_LOSS:
        expect(task["status"] == TaskStatus.done, f"ended {task['status']}, expected done")
        expect(
            [a["outcome"] for a in attempts] == [AttemptState.expired, AttemptState.done],
            f"attempt outcomes {[a['outcome'] for a in attempts]}, expected [expired, done]",
        )
        if len(attempts) == 2:
            expect(
                attempts[0]["host_id"] == DOOMED_HOST and attempts[1]["host_id"] == SURVIVOR_HOST,
                f"expected attempt 1 on {DOOMED_HOST} and attempt 2 on {SURVIVOR_HOST}",
            )
            expect(
                attempts[0]["ended_at"] == attempts[0]["lease_expires_at"],
                "the expired attempt did not end at its lease's expiry",
            )
        kinds = [e["type"] for e in events]
        expect(
            "lease_expired" in kinds and "requeued" in kinds and kinds.index("lease_expired") < kinds.index("requeued"),
            "the history lacks lease_expired followed by requeued",
        )
        expect(cancellation is None, "has a cancellation nobody asked for")

    elif job.kind == HOST_DRAIN:
        problems += _check_released(task, events, seen or {})
    return problems


def _check_released(task: JsonObject, events: list[JsonObject], seen: JsonObject) -> list[str]:
    """Released by the host that stopped (and exited 0), with truthful steps, and finished by
    another host: never `failed` because its host stopped."""
    problems = []
    if seen.get("host_exit") != 0:
        problems.append(f"the stopped host's agent exited {seen.get('host_exit')}, expected 0")
    attempts = task.get("attempts") or []
    if task["status"] != TaskStatus.done:
        problems.append(f"ended {task['status']}, expected done")
    outcomes = [a["outcome"] for a in attempts]
    if outcomes != [AttemptState.released, AttemptState.done]:
        return [*problems, f"attempt outcomes {outcomes}, expected [released, done]"]
    first, second = attempts
    if first["host_id"] != RETIRING_HOST or second["host_id"] != SURVIVOR_HOST:
        problems.append(f"expected attempt 1 on {RETIRING_HOST} and attempt 2 on {SURVIVOR_HOST}")
    given_back = first.get("steps") or []
    if [s["id"] for s in given_back] != planned_step_ids(task["plan"]):
        problems.append("the released attempt's steps are not one per planned step, in plan order")
    statuses = [s["status"] for s in given_back]
    if not set(statuses) <= {StepStatus.completed, StepStatus.interrupted, StepStatus.not_started}:
        problems.append(f"the released attempt reports {statuses}: a host stop is no verdict on a step")
    unstarted = StepStatus.not_started
    first_unstarted = statuses.index(unstarted) if unstarted in statuses else len(statuses)
    if first_unstarted == len(statuses) or any(s != unstarted for s in statuses[first_unstarted:]):
        problems.append("the released attempt has no step left for another host, or one ran after the stop")
    if any(s.get("reason") != "host_stopping" for s in given_back if s["status"] == unstarted):
        problems.append("a step the stopping host never started does not say host_stopping")
    released = [e for e in events if e["type"] == "released"]
    if len(released) != 1 or released[0]["data"].get("reason") != "host_stopping":
        problems.append("the history lacks one released event with reason host_stopping")
    return problems


def _check_steered(job: Job, steps: list[JsonObject], messages: Sequence[JsonObject]) -> list[str]:
    """Each steer applied at a boundary; skipped steps not_started (steered), inserted ones run."""
    problems = []
    steers = [m for m in messages if m["intent"] == "steer"]
    if [m["data"] for m in steers] != list(job.steers):
        problems.append(f"expected the steers {list(job.steers)}, found {[m['data'] for m in steers]}")
    for message in steers:
        if message["state"] not in APPLIED or message["boundary"] is None:
            problems.append(
                f"steer {message['id']} is {message['state']} ({message.get('detail')}), not applied at a boundary"
            )
    for step in steps:
        steered_away = (step["status"], step.get("reason")) == (StepStatus.not_started, "steered")
        if step["id"] in skipped_step_ids(job) and not steered_away:
            problems.append(
                f"skipped step {step['id']} is {step['status']} ({step.get('reason')}), expected not_started (steered)"
            )
    return problems


def _check_paused(steps: list[JsonObject], messages: Sequence[JsonObject], seen: JsonObject) -> list[str]:
    """The pause held at a boundary while the lease was renewed; the step after it started
    only once the resume reached the host; the follow-up was collected into a successor."""
    problems = []
    by_intent = {m["intent"]: m for m in messages}
    pause, resume, follow_up = by_intent.get("pause"), by_intent.get("resume"), by_intent.get("follow_up")
    if pause is None or resume is None:
        return ["expected a pause and a resume message"]
    for message in (pause, resume):
        if message["state"] not in APPLIED or message["boundary"] is None:
            problems.append(f"{message['intent']} {message['id']} is {message['state']}, not applied at a boundary")
    if problems:
        return problems
    held_before = pause["boundary"]["before_step"]
    started: dict[str, Any] = {s["id"]: s.get("started_at") for s in steps}
    if held_before not in started:
        problems.append(f"the pause held before {held_before!r}, which is not a step of the plan")
    elif not started[held_before] or _time(started[held_before]) < _time(resume["delivered_at"]):
        # Host and server share this machine's clock; the host cannot have had the resume
        # before the server recorded handing it over.
        problems.append(f"{held_before} has no start time, or started before the resume reached its host")
    renewals = seen.get("paused_renewals") or []
    if len(set(renewals)) < 2:
        problems.append(f"the lease was not seen renewed while the task read paused (renewals seen: {renewals})")
    if follow_up is None or follow_up["state"] != MessageState.admitted or not follow_up.get("successor"):
        problems.append("the follow-up was not collected into a successor task")
    return problems


def _check_app(task: JsonObject, steps: list[JsonObject], seen: JsonObject) -> list[str]:
    """The install read the APK's package and version and installed it; the recording of the
    whole plan is a video/mp4 artifact of its last step (`seen["artifacts"]`: the task's)."""
    problems = []
    install = task["plan"]["steps"][0]["args"]["input"]
    launched = task["plan"]["steps"][1]["args"]["package"]
    outputs = {s["id"]: s.get("output") or "" for s in steps}
    try:
        installed = json.loads(outputs.get("install") or "null")
    except ValueError:
        installed = None
    if (
        not isinstance(installed, dict)
        or installed.get("package") != launched
        or installed.get("installed") is not True
    ):
        problems.append(f"the install of {install['input']} reported {installed}, not {launched} newly installed")
    last = steps[-1] if steps else {}
    videos = [a for a in seen.get("artifacts") or () if a["content_type"] == "video/mp4"]
    if not videos or any(v["step"] != last.get("id") or v["id"] not in (last.get("artifacts") or ()) for v in videos):
        problems.append(f"no video/mp4 recording is listed by the last step ({[v['name'] for v in videos]})")
    return problems


def _check_successor(task: JsonObject) -> list[str]:
    """A successor names the task it follows, the one message it collected, and runs its steps under
    that message's id."""
    collected = task.get("collected") or []
    if not task.get("follow_up_of") or len(collected) != 1:
        return [
            f"expected a successor of one follow-up, found follow_up_of {task.get('follow_up_of')}, "
            f"collected {collected}"
        ]
    if not all(s["id"].startswith(f"{collected[0]}.") for s in task["plan"]["steps"]) or not task["plan"]["steps"]:
        return ["the successor's steps are not named after the follow-up that asked for them"]
    return []
