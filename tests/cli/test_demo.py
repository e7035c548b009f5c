"""`amc demo` end to end (it must exit 0), and its verdict, which must catch what is wrong."""

from __future__ import annotations

import copy
import os
import re
import subprocess
import sys

import pytest

from amc.cli import workload


@pytest.mark.slow
@pytest.mark.req("CANCEL-QUEUED/s1", "CANCEL-OUTCOME/s1", "ATTEMPTS/s1")
def test_demo_runs_its_workload_and_exits_0(tmp_path):
    env = {key: value for key, value in os.environ.items() if not key.startswith("AMC_")}
    result = subprocess.run([sys.executable, "-m", "amc", "demo"], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=90)
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert "OK: all 9 tasks ended as the protocol says they must" in out
    assert "Tasks by status: done 7, cancelled 2" in out
    assert re.search(r"nightly-report\s+│ queued\s+│ n/a\s+│ n/a\s+│ \d+ ms", out), out
    assert re.search(r"long-sync\s+│ running\s+│ \d+ ms\s+│ \d+ ms\s+│ \d+ ms", out), out
    assert "Lease loss: checkout's attempt 1 on h2/amc-sim-04 lost its host" in out
    assert "The store and the logs of this run are in" not in out  # a passing run leaves nothing behind
    assert list(tmp_path.iterdir()) == []  # nor anything in the directory it ran in


# -- the verdict itself -------------------------------------------------------------------------

JOBS = {job.name: job for job in workload.jobs()}


def attempt(number, host, outcome, ended="2026-01-01T00:00:05.000Z", expires="2026-01-01T00:00:05.000Z"):
    return {"number": number, "host_id": host, "device": "amc-sim-01", "assigned_at": "2026-01-01T00:00:00.000Z",
            "dispatched_at": "2026-01-01T00:00:00.100Z", "lease_expires_at": expires, "renewals": 1,
            "ended_at": ended, "outcome": outcome}


def steps(plan, *statuses):
    ids = workload.planned_step_ids(plan)
    return [{"id": i, "status": s, **({"reason": "cancelled"} if s == "not_started" else {})}
            for i, s in zip(ids, statuses)]


def ended(status, reason):
    return {"seq": 9, "at": "2026-01-01T00:00:05.000Z", "type": "ended", "data": {"status": status, "reason": reason}}


def good(name):
    job = JOBS[name]
    plan = job.body["plan"]
    task = {"id": "t_1", "status": "done", "plan": plan, "attempt": 1, "attempts": [], "cancellation": None,
            "result": None}
    events = []
    if job.kind == workload.PLAIN:
        n = len(workload.planned_step_ids(plan))
        task.update(attempts=[attempt(1, "h1", "done")],
                    result={"status": "done", "reason": "reported", "steps": steps(plan, *["completed"] * n)})
        events = [ended("done", "reported")]
    elif job.kind == workload.QUEUED_CANCEL:
        task.update(status="cancelled", attempt=None,
                    cancellation={"state": "completed", "attempt": None, "delivered_at": None},
                    result={"status": "cancelled", "reason": "cancelled_while_queued", "attempt": None, "steps": None})
        events = [ended("cancelled", "cancelled_while_queued")]
    elif job.kind == workload.INFLIGHT_CANCEL:
        task.update(status="cancelled", attempts=[attempt(1, "h1", "cancelled")],
                    cancellation={"state": "completed", "attempt": 1, "delivered_at": "2026-01-01T00:00:01.000Z"},
                    result={"status": "cancelled", "reason": "reported",
                            "steps": steps(plan, "completed", "interrupted", "not_started", "not_started")})
        events = [ended("cancelled", "reported")]
    elif job.kind == workload.LEASE_LOSS:
        n = len(workload.planned_step_ids(plan))
        task.update(attempt=2, attempts=[attempt(1, "h2", "expired"), attempt(2, "h1", "done")],
                    result={"status": "done", "reason": "reported", "steps": steps(plan, *["completed"] * n)})
        events = [{"type": "lease_expired"}, {"type": "requeued"}, ended("done", "reported")]
    return JOBS[name], task, events


@pytest.mark.parametrize("name", sorted(JOBS))
def test_the_verdict_accepts_what_the_protocol_requires(name):
    assert workload.check(*good(name)) == []


def broken(name, change):
    job, task, events = good(name)
    task = copy.deepcopy(task)
    change(task, events)
    return workload.check(job, task, events)


def test_the_verdict_catches_a_queued_cancel_that_ran():
    assert broken("nightly-report", lambda t, e: t.update(attempts=[attempt(1, "h1", "cancelled")]))


def test_the_verdict_catches_a_running_cancel_reported_as_failed_or_a_step_called_cancelled():
    assert broken("long-sync", lambda t, e: t.update(status="failed"))
    assert broken("long-sync", lambda t, e: t["result"]["steps"][1].update(status="cancelled"))
    assert broken("long-sync", lambda t, e: t["result"]["steps"][3].update(status="completed"))


def test_the_verdict_catches_a_lost_lease_that_was_not_requeued():
    assert broken("checkout", lambda t, e: t.update(attempts=[attempt(1, "h2", "failed"), attempt(2, "h1", "done")]))
    assert broken("checkout", lambda t, e: e.remove(e[1]))  # no requeued event


def test_the_verdict_catches_an_unfinished_task_and_missing_steps():
    assert broken("login-flow", lambda t, e: t.update(status="dispatched")) == ["still dispatched"]
    assert broken("login-flow", lambda t, e: t["result"]["steps"].pop())
