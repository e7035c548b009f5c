"""`amc demo` end to end (it must exit 0), and its verdict, which must catch what is wrong."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
import time

import pytest

from amc.cli.demo import workload


@pytest.mark.slow
@pytest.mark.req(
    "CANCEL-QUEUED/s1",
    "CANCEL-OUTCOME/s1",
    "ATTEMPTS/s1",
    "STEER/s1",
    "PAUSE/s1",
    "FOLLOWUP/s1",
    "AGENT-DRAIN/s2",
    "AGENT-EVIDENCE/s1",
    "APPS/s7",
    "RECORD/s4",
)
def test_demo_runs_its_workload_and_exits_0(tmp_path):
    env = {key: value for key, value in os.environ.items() if not key.startswith("AMC_")}
    began = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "amc", "demo", "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    took = time.monotonic() - began
    out = result.stderr  # with --json, the narration and the tables
    assert result.returncode == 0, out + result.stdout
    # About ten seconds alone; the bound leaves room for a loaded machine and still catches
    # a demo that sits out a timeout somewhere.
    assert took < 30, f"the demo took {took:.1f} s"
    assert "OK: all 14 tasks ended as the protocol says they must" in out
    assert "Tasks by status: done 12, cancelled 2" in out
    assert "host h3 stopped (SIGTERM) while app-update runs on it" in out
    assert re.search(r"nightly-report\s+│ queued\s+│ n/a\s+│ n/a\s+│ \d+ ms", out), out
    assert re.search(r"long-sync\s+│ running\s+│ \d+ ms\s+│ \d+ ms\s+│ \d+ ms", out), out
    assert "Lease loss: checkout's attempt 1 on h2/amc-sim-04 lost its host" in out
    assert "dispatched (paused)" in out  # the narration showed the pause while it lasted
    smoke = next(job for job in json.loads(result.stdout)["jobs"] if job["name"] == "settings-smoke")
    assert f"amc task artifacts {smoke['task']['id']}" in out  # where to look at the evidence
    assert re.search(r"Evidence: the Host Agents stored \d+ screenshots, UI dumps and recordings", out), out
    assert re.search(r"console http://127\.0\.0\.1:\d+/ui", out), out  # where to watch it in a browser
    assert "The store and the logs of this run are in" not in out  # a passing run leaves nothing behind
    assert list(tmp_path.iterdir()) == []  # nor anything in the directory it ran in

    document = json.loads(result.stdout)
    jobs = {job["name"]: job for job in document["jobs"]}
    assert document["passed"] is True and all(job["problems"] == [] for job in jobs.values())
    check_steered(jobs["photo-share"])
    check_paused(jobs["inventory-scan"], jobs["scan-send"])
    check_released(jobs["app-update"])
    check_app(jobs["app-install"], out)


def check_app(job: dict, out: str) -> None:
    """The built APK was uploaded, installed, launched and uninstalled; the task was recorded,
    and the summary says so, naming the mp4 and how to fetch it."""
    out = " ".join(out.split())  # the console wraps long lines at its width
    app = workload.build_app()
    assert re.search(rf"built {app.package}\.apk \(\d+ bytes: package {app.package}, version code 7\)", out), out
    task = job["task"]
    assert task["plan"]["record"] is True
    assert [s["status"] for s in task["result"]["steps"]] == ["completed"] * 4
    installed = json.loads(task["result"]["steps"][0]["output"])
    assert installed == {"package": app.package, "version_code": app.version_code, "installed": True}
    attempt = task["attempts"][-1]
    assert f"App under test: app-install installed {app.package} (version code 7, as its host read them" in out
    assert f"on {attempt['host_id']}/{attempt['device']}, launched it, took a screenshot and uninstalled it" in out
    (video,) = [a for a in job["seen"]["artifacts"] if a["content_type"] == "video/mp4"]
    assert video["name"] == "uninstall-record-end.mp4" and video["size"] > 0
    assert re.search(
        r'Recording: app-install ran with "record": true; its screen recording is '
        r"uninstall-record-end\.mp4 \([^)]+, video/mp4\), an artifact of its uninstall step",
        out,
    ), out
    assert f"amc task artifacts {task['id']} --download DIR" in out


def check_released(job: dict) -> None:
    """Released by h3 after its drain, with the step under way completed; finished by h1."""
    first, second = job["task"]["attempts"]
    assert (first["host_id"], first["outcome"], second["host_id"], second["outcome"]) == (
        "h3",
        "released",
        "h1",
        "done",
    )
    statuses = [(step["id"], step["status"], step.get("reason")) for step in first["steps"]]
    assert statuses == [
        ("open-store", "completed", None),
        ("download", "completed", None),  # the drain let the running step end
        ("install", "not_started", "host_stopping"),
        ("verify", "not_started", "host_stopping"),
    ]
    assert job["seen"] == {"host_exit": 0}


def check_steered(job: dict) -> None:
    """The skipped step never ran (not_started, steered), the inserted one ran where it was put."""
    outcomes = {step["id"]: step for step in job["task"]["result"]["steps"]}
    assert list(outcomes) == ["open", "load", "capture", "crop", "share", "upload"]
    assert (outcomes["upload"]["status"], outcomes["upload"]["reason"]) == ("not_started", "steered")
    assert "started_at" not in outcomes["upload"] or outcomes["upload"]["started_at"] is None
    assert all(outcomes[i]["status"] == "completed" for i in ("open", "load", "capture", "crop", "share"))
    steers = job["messages"]
    assert [m["intent"] for m in steers] == ["steer", "steer"]
    assert all(m["state"] in ("admitted", "completed") and m["boundary"] is not None for m in steers)
    # Both were posted while `load` ran: applied at a boundary after it, so `load` was not recalled.
    assert all(m["boundary"]["before_step"] in ("capture", "crop", "share") for m in steers)


def check_paused(job: dict, successor: dict) -> None:
    """Paused before a step while the lease was renewed, resumed, done; its follow-up became a task."""
    task = job["task"]
    assert task["status"] == "done" and task["paused"] is False
    messages = {m["intent"]: m for m in job["messages"]}
    assert set(messages) == {"pause", "resume", "follow_up"}
    before = messages["pause"]["boundary"]["before_step"]
    assert before in ("review", "export")
    renewals = job["seen"]["paused_renewals"]
    assert renewals[-1] - renewals[0] >= 2  # the lease was renewed while the task read paused
    started = {step["id"]: step["started_at"] for step in task["result"]["steps"]}
    assert started[before] >= messages["resume"]["delivered_at"]  # nothing started before the resume came
    assert messages["follow_up"]["successor"] == successor["task"]["id"]
    assert successor["task"]["follow_up_of"] == task["id"] and successor["task"]["status"] == "done"
    assert successor["task"]["collected"] == [messages["follow_up"]["id"]]


# -- the verdict itself -------------------------------------------------------------------------

JOBS = {job.name: job for job in workload.jobs(workload.build_app())}


def attempt(number, host, outcome, ended="2026-01-01T00:00:05.000Z", expires="2026-01-01T00:00:05.000Z"):
    return {
        "number": number,
        "host_id": host,
        "device": "amc-sim-01",
        "assigned_at": "2026-01-01T00:00:00.000Z",
        "dispatched_at": "2026-01-01T00:00:00.100Z",
        "lease_expires_at": expires,
        "renewals": 1,
        "ended_at": ended,
        "outcome": outcome,
    }


def steps(plan, *statuses):
    ids = workload.planned_step_ids(plan)
    return [
        {"id": i, "status": s, **({"reason": "cancelled"} if s == "not_started" else {})} for i, s in zip(ids, statuses)
    ]


def ended(status, reason):
    return {"seq": 9, "at": "2026-01-01T00:00:05.000Z", "type": "ended", "data": {"status": status, "reason": reason}}


def message(intent, state="completed", before_step=None, **more):
    return {
        "id": f"m_{intent}",
        "intent": intent,
        "text": None,
        "data": None,
        "state": state,
        "created_at": "2026-01-01T00:00:01.000Z",
        "attempt": 1,
        "delivered_at": "2026-01-01T00:00:01.500Z",
        "admitted_at": "2026-01-01T00:00:02.000Z",
        "completed_at": None,
        "boundary": None if before_step is None else {"before_step": before_step},
        "detail": None,
        "successor": None,
        **more,
    }


def at(second):
    return f"2026-01-01T00:00:{second:06.3f}Z"


def good(name):
    """A job, and the task, history, messages and sightings the protocol allows for it."""
    job = JOBS[name]
    plan = job.body["plan"] if job.body else {"steps": [{"id": "m_f.share", "action": "launch", "args": {}}]}
    task = {
        "id": "t_1",
        "status": "done",
        "plan": plan,
        "attempt": 1,
        "attempts": [],
        "cancellation": None,
        "result": None,
    }
    events, messages, seen = [], [], None
    if job.kind in (workload.PLAIN, workload.STEERED, workload.PAUSED, workload.SUCCESSOR, workload.APP):
        ids = workload.reported_step_ids(job, plan)
        outcomes = [{"id": i, "status": "completed", "started_at": at(3 + n)} for n, i in enumerate(ids)]
        task.update(
            attempts=[attempt(1, "h1", "done")], result={"status": "done", "reason": "reported", "steps": outcomes}
        )
        events = [ended("done", "reported")]
    if job.kind == workload.STEERED:
        for outcome in task["result"]["steps"]:
            if outcome["id"] in workload.skipped_step_ids(job):
                outcome.update(status="not_started", reason="steered", started_at=None)
        messages = [
            message("steer", before_step="capture", data=edit, id=f"m_{n}") for n, edit in enumerate(job.steers)
        ]
    elif job.kind == workload.PAUSED:
        messages = [
            message("pause", "admitted", "review"),
            message("resume", "completed", "review"),
            message("follow_up", "admitted", attempt=None, successor="t_1.1"),
        ]
        seen = {"paused_renewals": [2, 3, 4]}
    elif job.kind == workload.SUCCESSOR:
        task.update(follow_up_of="t_0", collected=["m_f"])
    elif job.kind == workload.APP:
        outcomes = task["result"]["steps"]
        outcomes[0]["output"] = json.dumps({"package": "com.example.shop", "version_code": 7, "installed": True})
        outcomes[-1]["artifacts"] = ["a_video"]
        video = {"id": "a_video", "step": "uninstall", "name": "uninstall-record-end.mp4", "content_type": "video/mp4"}
        seen = {"artifacts": [video]}
    elif job.kind == workload.QUEUED_CANCEL:
        task.update(
            status="cancelled",
            attempt=None,
            cancellation={"state": "completed", "attempt": None, "delivered_at": None},
            result={"status": "cancelled", "reason": "cancelled_while_queued", "attempt": None, "steps": None},
        )
        events = [ended("cancelled", "cancelled_while_queued")]
    elif job.kind == workload.INFLIGHT_CANCEL:
        task.update(
            status="cancelled",
            attempts=[attempt(1, "h1", "cancelled")],
            cancellation={"state": "completed", "attempt": 1, "delivered_at": "2026-01-01T00:00:01.000Z"},
            result={
                "status": "cancelled",
                "reason": "reported",
                "steps": steps(plan, "completed", "interrupted", "not_started", "not_started"),
            },
        )
        events = [ended("cancelled", "reported")]
    elif job.kind == workload.LEASE_LOSS:
        n = len(workload.planned_step_ids(plan))
        task.update(
            attempt=2,
            attempts=[attempt(1, "h2", "expired"), attempt(2, "h1", "done")],
            result={"status": "done", "reason": "reported", "steps": steps(plan, *["completed"] * n)},
        )
        events = [{"type": "lease_expired"}, {"type": "requeued"}, ended("done", "reported")]
    elif job.kind == workload.HOST_DRAIN:
        n = len(workload.planned_step_ids(plan))
        released = attempt(1, "h3", "released")
        released["steps"] = [
            {"id": i, "status": s, **({"reason": "host_stopping"} if s == "not_started" else {})}
            for i, s in zip(workload.planned_step_ids(plan), ("completed", "completed", "not_started", "not_started"))
        ]
        task.update(
            attempt=2,
            attempts=[released, attempt(2, "h1", "done")],
            result={"status": "done", "reason": "reported", "steps": steps(plan, *["completed"] * n)},
        )
        events = [
            {"type": "released", "data": {"attempt": 1, "reason": "host_stopping"}},
            {"type": "requeued"},
            ended("done", "reported"),
        ]
        seen = {"host_exit": 0}
    observed = workload.observation_step_ids(job, plan)
    for n, outcome in enumerate((task["result"] or {}).get("steps") or ()):
        if outcome["id"] in observed and outcome["status"] == "completed":
            outcome["artifacts"] = [f"a_{n}"]
    return job, task, events, messages, seen


@pytest.mark.parametrize("name", sorted(JOBS))
def test_the_verdict_accepts_what_the_protocol_requires(name):
    assert workload.check(*good(name)) == []


def broken(name, change):
    job, task, events, messages, seen = copy.deepcopy(good(name))
    change(task, events)
    return workload.check(job, task, events, messages, seen)


def broken_messages(name, change):
    job, task, events, messages, seen = copy.deepcopy(good(name))
    change(task, messages, seen)
    return workload.check(job, task, events, messages, seen)


def test_the_verdict_catches_a_queued_cancel_that_ran():
    assert broken("nightly-report", lambda t, e: t.update(attempts=[attempt(1, "h1", "cancelled")]))


def test_the_verdict_catches_a_running_cancel_reported_as_failed_or_a_step_called_cancelled():
    assert broken("long-sync", lambda t, e: t.update(status="failed"))
    assert broken("long-sync", lambda t, e: t["result"]["steps"][1].update(status="cancelled"))
    assert broken("long-sync", lambda t, e: t["result"]["steps"][3].update(status="completed"))


def test_the_verdict_catches_a_lost_lease_that_was_not_requeued():
    assert broken("checkout", lambda t, e: t.update(attempts=[attempt(1, "h2", "failed"), attempt(2, "h1", "done")]))
    assert broken("checkout", lambda t, e: e.remove(e[1]))  # no requeued event


def test_the_verdict_catches_a_stopped_host_that_failed_its_task_or_misreported_its_steps():
    def failed(task, events):
        task.update(status="failed")
        task["attempts"][0]["outcome"] = "failed"

    assert broken("app-update", failed)
    assert broken("app-update", lambda t, e: t["attempts"][0]["steps"][1].update(status="failed"))
    assert broken("app-update", lambda t, e: t["attempts"][0]["steps"][2].update(reason="cancelled"))
    assert broken("app-update", lambda t, e: t["attempts"][0]["steps"][3].update(status="completed"))
    assert broken("app-update", lambda t, e: t["attempts"][1].update(host_id="h3"))
    assert broken("app-update", lambda t, e: e.pop(0))  # no released event
    job, task, events, messages, _ = copy.deepcopy(good("app-update"))
    assert workload.check(job, task, events, messages, {"host_exit": 1})  # the stopped agent did not exit 0


def test_the_verdict_catches_a_screenshot_or_ui_dump_without_its_artifact():
    assert broken("settings-smoke", lambda t, e: t["result"]["steps"][2].pop("artifacts")) == [
        "the observation steps capture completed without listing their artifact"
    ]
    assert broken("settings-smoke", lambda t, e: t["result"]["steps"][3].update(artifacts=[]))
    assert broken("onboarding", lambda t, e: t["result"]["steps"][-1].update(artifacts=["a_1", "a_2"]))


def test_the_verdict_catches_an_app_not_installed_or_not_recorded():
    def not_installed(task, messages, seen):
        task["result"]["steps"][0]["output"] = json.dumps({"package": "com.example.shop", "installed": False})

    assert broken_messages("app-install", not_installed) == [
        "the install of sha256:"
        + workload.build_app().ref.removeprefix("sha256:")
        + " reported {'package': 'com.example.shop', 'installed': False}, not com.example.shop newly installed"
    ]
    assert broken_messages("app-install", lambda t, m, seen: seen.update(artifacts=[])) == [
        "no video/mp4 recording is listed by the last step ([])"
    ]
    assert broken_messages("app-install", lambda t, m, seen: t["result"]["steps"][-1].pop("artifacts"))


def test_the_verdict_catches_an_unfinished_task_and_missing_steps():
    assert broken("login-flow", lambda t, e: t.update(status="dispatched")) == ["still dispatched"]
    assert broken("login-flow", lambda t, e: t["result"]["steps"].pop())


def test_the_verdict_catches_a_skipped_step_that_ran_or_a_steer_never_applied():
    def ran(task, messages, seen):
        task["result"]["steps"][-1].update(status="completed", reason=None)

    assert broken_messages("photo-share", ran)
    assert broken_messages("photo-share", lambda t, m, s: m[0].update(state="delivered", boundary=None))
    assert broken_messages("photo-share", lambda t, m, s: m.pop())  # only one of the two steers was sent
    assert broken_messages("photo-share", lambda t, m, s: t["result"]["steps"].pop(3))  # no `crop`


def test_the_verdict_catches_a_pause_that_did_not_hold_or_lost_its_lease_renewals():
    def early(task, messages, seen):  # `review` started before the resume reached the host
        next(s for s in task["result"]["steps"] if s["id"] == "review")["started_at"] = at(1)

    assert broken_messages("inventory-scan", early)
    assert broken_messages("inventory-scan", lambda t, m, s: s.update(paused_renewals=[3, 3]))
    assert broken_messages("inventory-scan", lambda t, m, s: m[0].update(state="rejected", boundary=None))
    assert broken_messages("inventory-scan", lambda t, m, s: m[2].update(state="not_admitted", successor=None))


def test_the_verdict_catches_a_successor_that_does_not_say_whose_it_is():
    assert broken("scan-send", lambda t, e: t.update(collected=[]))

    def unnamed(task, events):
        task["plan"]["steps"][0]["id"] = task["result"]["steps"][0]["id"] = "share"

    assert broken("scan-send", unnamed) == [
        "the successor's steps are not named after the follow-up that asked for them"
    ]
