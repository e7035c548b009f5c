"""specs/requirements/host-agent.md, the control plane's side: renewals and terminal reports."""

from __future__ import annotations

import pytest

from tests.support.http import problem
from tests.support.plans import STEPS_ABC


@pytest.mark.req("LEASE-RENEW/s1")
def test_a_renewal_extends_the_lease_and_changes_nothing_else(amc):
    task_id, lease = amc.claimed(start=True)
    before = amc.acme.task(task_id)
    history = amc.acme.history(task_id)
    amc.admin.advance(10)

    grant = amc.h1.renew(task_id, 1, lease["lease_id"])

    assert grant == {
        "task_id": task_id,
        "status": "dispatched",
        "attempt": 1,
        "lease_expires_at": amc.at(40_000),
        "cancel_requested": False,
        "messages": [],
    }
    after = amc.acme.task(task_id)
    assert after["attempts"][0] == before["attempts"][0] | {"renewals": 1, "lease_expires_at": amc.at(40_000)}
    assert after["status"] == before["status"]
    assert amc.h1.host("h1")["devices"][0]["reservation"] == {"task_id": task_id, "attempt": 1}
    assert amc.acme.history(task_id) == history


@pytest.mark.req("LEASE-RENEW/s2")
def test_a_stale_or_foreign_lease_is_refused_and_nothing_changes(amc):
    task_id, first = amc.claimed(start=True, lease_seconds=5)
    amc.admin.advance(5)
    amc.h1.renew(task_id, 1, first["lease_id"], expect=409)  # before attempt 2 exists
    assert problem(amc.h1) == (409, "lease_expired")
    amc.h1.register("h1", [])
    amc.h2.register("h2", ["e1"])
    second = amc.h2.claim("h2")
    amc.h2.start(task_id, 2, second["lease_id"])
    before = amc.acme.task(task_id)

    amc.h1.renew(task_id, 1, first["lease_id"], expect=409)
    assert problem(amc.h1) == (409, "lease_replaced")
    for caller, lease_id in ((amc.h1, second["lease_id"]), (amc.h1, first["lease_id"]), (amc.h3, "l_any")):
        caller.renew(task_id, 2, lease_id, expect=409)
        assert problem(caller) == (409, "lease_foreign")

    assert amc.acme.task(task_id) == before
    assert before["attempts"][0]["outcome"] == "expired"


@pytest.mark.req("RESULT-IDEMPOTENT/s1")
def test_report_done(amc):
    task_id, lease = amc.claimed(start=True, plan=STEPS_ABC)
    amc.admin.advance(2)
    steps = [{"id": s, "status": "completed"} for s in "abc"]

    task = amc.h1.report(task_id, 1, lease["lease_id"], "done", metadata={"screens": 3}, steps=steps)

    assert task["status"] == "done"
    assert task["attempts"][0]["outcome"] == "done" and task["attempts"][0]["ended_at"] == amc.at(2000)
    assert task["result"] == {
        "status": "done",
        "attempt": 1,
        "reason": "reported",
        "metadata": {"screens": 3},
        "steps": steps,
        "recorded_at": amc.at(2000),
    }
    assert amc.h1.host("h1")["devices"][0]["reservation"] is None
    last = amc.acme.history(task_id)[-1]
    assert (last["type"], last["data"]["status"], last["data"]["reason"]) == ("ended", "done", "reported")


@pytest.mark.req("RESULT-IDEMPOTENT/s2")
def test_report_cancelled(amc):
    task_id, lease = amc.claimed(start=True)
    amc.acme.cancel(task_id, expect=202)

    task = amc.h1.report(task_id, 1, lease["lease_id"], "cancelled", metadata={"stopped_before": "b"})

    assert task["status"] == "cancelled" and task["attempts"][0]["outcome"] == "cancelled"
    assert task["result"]["metadata"] == {"stopped_before": "b"} and task["result"]["reason"] == "reported"
    assert task["cancellation"]["state"] == "completed"
    assert amc.h1.host("h1")["devices"][0]["reservation"] is None


@pytest.mark.req("RESULT-IDEMPOTENT/s3")
@pytest.mark.req("AGENT-RETRY/s1")
def test_a_repeated_report_whose_response_was_lost(amc):
    task_id, lease = amc.claimed(start=True, plan=STEPS_ABC)
    steps = [{"id": s, "status": "completed", "ended_at": amc.at(0)} for s in "abc"]
    body = {"lease_id": lease["lease_id"], "status": "done", "metadata": {"m": [1, 2]}, "steps": steps}
    path = f"/v1/tasks/{task_id}/attempts/1/result"
    first = amc.h1.call("POST", path, body)
    history = amc.acme.history(task_id)
    amc.admin.advance(20)  # past the lease's old lease_expires_at

    again = amc.h1.call("POST", path, body)

    assert again == first
    assert again["result"]["recorded_at"] == again["attempts"][0]["ended_at"] == amc.at(0)
    assert len(again["attempts"]) == 1 and amc.acme.history(task_id) == history
    restamped = body | {"steps": steps[:2] + [steps[2] | {"ended_at": amc.at(20_000)}]}
    amc.h1.call("POST", path, restamped, expect=409)
    assert problem(amc.h1) == (409, "result_conflict")


@pytest.mark.req("RESULT-IDEMPOTENT/s4")
def test_a_stale_attempt_reports_after_requeue(amc):
    task_id, first = amc.claimed(start=True)
    amc.admin.advance(30)
    amc.h1.register("h1", [])
    amc.h2.register("h2", ["e1"])
    second = amc.h2.claim("h2")
    amc.h2.start(task_id, 2, second["lease_id"])
    before = amc.acme.task(task_id)

    amc.h1.report(task_id, 1, first["lease_id"], "done", expect=409)

    assert problem(amc.h1) == (409, "lease_replaced")
    after = amc.acme.task(task_id)
    assert after == before
    assert after["status"] == "dispatched" and after["result"] is None
    assert after["attempts"][0]["outcome"] == "expired" and after["attempts"][1]["outcome"] is None


# -- the control plane's half of the agent's duties (the agent's half is tests/agent) ---------


@pytest.mark.req("LEASE-RENEW/s3")
@pytest.mark.req("AGENT-STOP-REASON/s1")
@pytest.mark.req("AGENT-STEPS/s2")
def test_a_stop_by_cancellation_keeps_the_lease_until_the_truthful_report(amc):
    task_id, lease = amc.claimed(start=True, plan=STEPS_ABC)
    amc.acme.cancel(task_id, expect=202)
    assert amc.h1.renew(task_id, 1, lease["lease_id"])["cancel_requested"] is True
    for _ in range(3):  # the agent keeps renewing until its report is answered
        amc.admin.advance(10)
        assert amc.h1.renew(task_id, 1, lease["lease_id"])["cancel_requested"] is True
    steps = [
        {"id": "a", "status": "interrupted", "reason": "stop requested", "started_at": amc.at(1000)},
        {"id": "b", "status": "not_started", "reason": "cancelled"},
        {"id": "c", "status": "not_started", "reason": "cancelled"},
    ]

    task = amc.h1.report(task_id, 1, lease["lease_id"], "cancelled", steps=steps)

    assert task["status"] == "cancelled" and task["result"]["steps"] == steps


@pytest.mark.req("AGENT-STOP-REASON/s2")
@pytest.mark.req("AGENT-STEPS/s1")
def test_a_stop_by_lease_loss_is_reported_failed_and_refused_once_replaced(amc):
    task_id, first = amc.claimed(start=True, plan=STEPS_ABC)
    amc.admin.advance(30)
    amc.h1.register("h1", [])
    amc.h2.register("h2", ["e1"])
    second = amc.h2.claim("h2")
    amc.h1.renew(task_id, 1, first["lease_id"], expect=409)
    assert problem(amc.h1) == (409, "lease_replaced")
    steps = [
        {"id": "a", "status": "completed"},
        {"id": "b", "status": "interrupted", "reason": "lease lost"},
        {"id": "c", "status": "not_started", "reason": "lease_lost"},
    ]

    amc.h1.report(task_id, 1, first["lease_id"], "failed", steps=steps, expect=409)

    assert problem(amc.h1) == (409, "lease_replaced")
    task = amc.acme.task(task_id)
    assert task["status"] == "assigned" and task["attempts"][1]["host_id"] == "h2" and task["result"] is None
    amc.h2.report(task_id, 2, second["lease_id"], "failed", steps=steps)
    assert amc.acme.task(task_id)["result"]["steps"] == steps
