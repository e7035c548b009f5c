"""specs/requirements/cancellation.md over HTTP: CANCEL-* scenarios against a real server."""

from __future__ import annotations

import pytest

from tests.support.http import problem
from tests.support.plans import STEPS_ABC


@pytest.fixture
def amc(amc_any_store):
    """The cancellation scenarios run against the in-memory and the LMDB store alike."""
    return amc_any_store


@pytest.mark.req("CANCEL-QUEUED/s1")
def test_cancel_a_queued_task_ends_it_at_once(amc):
    task = amc.acme.submit()
    amc.h1.register("h1", ["emulator-5554"])
    amc.admin.advance(2)

    cancelled = amc.acme.cancel(task["id"], "no longer needed", expect=200)

    assert cancelled["status"] == "cancelled"
    assert cancelled["result"]["reason"] == "cancelled_while_queued"
    assert cancelled["result"]["attempt"] is None
    assert cancelled["cancellation"] == {
        "state": "completed",
        "requested_at": amc.at(2000),
        "attempt": None,
        "delivered_at": None,
        "reason": "no longer needed",
    }
    history = amc.acme.history(task["id"])
    assert [e["type"] for e in history] == ["submitted", "cancellation_requested", "ended"]
    assert history[-1]["data"]["status"] == "cancelled"
    assert history[-1]["data"]["reason"] == "cancelled_while_queued"
    assert amc.h1.claim("h1", expect=204) is None
    assert amc.acme.task(task["id"])["attempts"] == []


@pytest.mark.req("CANCEL-INFLIGHT/s1")
@pytest.mark.parametrize("started", [True, False], ids=["dispatched", "assigned"])
def test_cancel_an_inflight_task_records_it_pending(amc, started):
    task_id, lease = amc.claimed(start=started)
    status = "dispatched" if started else "assigned"

    task = amc.acme.cancel(task_id, "wrong build", expect=202)

    assert task["status"] == status
    assert task["attempts"][0]["outcome"] is None
    assert task["cancellation"] == {
        "state": "pending",
        "requested_at": amc.at(),
        "attempt": 1,
        "delivered_at": None,
        "reason": "wrong build",
    }
    device = amc.h1.host("h1")["devices"][0]
    assert device["reservation"] == {"task_id": task_id, "attempt": 1}
    assert amc.acme.types(task_id).count("cancellation_requested") == 1
    # The restart half of this scenario is tests/adapters/http/test_serve.py.
    grant = (amc.h1.renew if started else amc.h1.start)(task_id, 1, lease["lease_id"])
    assert grant["cancel_requested"] is True


@pytest.mark.req("CANCEL-INFLIGHT/s2")
def test_the_owning_host_sees_the_cancellation_at_its_next_renewal(amc):
    task_id, lease = amc.claimed(start=True)
    amc.h1.renew(task_id, 1, lease["lease_id"])
    amc.acme.cancel(task_id, expect=202)
    amc.admin.advance(5)

    grant = amc.h1.renew(task_id, 1, lease["lease_id"])

    assert grant["cancel_requested"] is True
    assert grant["lease_expires_at"] == amc.at(35_000)
    task = amc.acme.task(task_id)
    assert task["cancellation"]["delivered_at"] == amc.at(5000)
    amc.admin.advance(5)
    assert amc.h1.renew(task_id, 1, lease["lease_id"])["cancel_requested"] is True
    task = amc.acme.task(task_id)
    assert task["cancellation"]["delivered_at"] == amc.at(5000)
    assert amc.acme.types(task_id).count("cancellation_delivered") == 1


@pytest.mark.req("CANCEL-INFLIGHT/s3")
def test_cancellation_is_not_instantaneous(amc):
    task_id, _lease = amc.claimed(start=True)
    amc.acme.cancel(task_id, expect=202)
    for _ in range(3):
        amc.admin.advance(9.999)
        task = amc.acme.task(task_id)
        assert task["status"] == "dispatched"
        assert task["attempts"][0]["outcome"] is None
        assert amc.h1.host("h1")["devices"][0]["reservation"] is not None
    amc.admin.advance(0.003)  # now exactly T+30 s = lease_expires_at
    assert amc.acme.task(task_id)["status"] == "cancelled"


@pytest.mark.req("CANCEL-OUTCOME/s1")
def test_a_cancelled_report_ends_the_task_cancelled_and_frees_the_device(amc):
    task_id, lease = amc.claimed(start=True, plan=STEPS_ABC)
    amc.acme.cancel(task_id, expect=202)
    assert amc.h1.renew(task_id, 1, lease["lease_id"])["cancel_requested"] is True
    amc.admin.advance(3)
    steps = [
        {"id": "a", "status": "completed"},
        {"id": "b", "status": "not_started", "reason": "cancelled"},
        {"id": "c", "status": "not_started", "reason": "cancelled"},
    ]

    task = amc.h1.report(task_id, 1, lease["lease_id"], "cancelled", steps=steps)

    assert task["status"] == "cancelled"
    assert task["attempts"][0]["outcome"] == "cancelled"
    assert task["attempts"][0]["ended_at"] == amc.at(3000)
    assert task["result"]["status"] == "cancelled" and task["result"]["reason"] == "reported"
    assert task["result"]["attempt"] == 1 and task["result"]["steps"] == steps
    assert task["cancellation"]["state"] == "completed"
    assert amc.h1.host("h1")["devices"][0]["reservation"] is None
    other = amc.acme.submit()
    assert amc.h1.claim("h1")["task_id"] == other["id"]


@pytest.mark.req("CANCEL-OUTCOME/s2")
def test_lease_loss_ends_failed_not_cancelled(amc):
    task_id, lease = amc.claimed(start=True, max_attempts=1)
    amc.admin.advance(31)

    amc.h1.renew(task_id, 1, lease["lease_id"], expect=409)
    assert problem(amc.h1) == (409, "lease_expired")

    task = amc.acme.task(task_id)
    assert task["status"] == "failed"
    assert task["result"]["reason"] == "attempts_exhausted"
    assert task["attempts"][0]["outcome"] == "expired"
    assert task["cancellation"] is None
    amc.h1.report(task_id, 1, lease["lease_id"], "failed", expect=409)
    assert problem(amc.h1) == (409, "lease_expired")
    assert amc.acme.task(task_id) == task


@pytest.mark.req("CANCEL-IDEMPOTENT/s1")
def test_cancel_twice_while_pending(amc):
    task_id, _ = amc.claimed(start=True)
    first = amc.acme.cancel(task_id, "a", expect=202)
    amc.admin.advance(4)

    again = amc.acme.cancel(task_id, "b", expect=202)

    assert again == first
    assert again["status"] == "dispatched"
    assert again["cancellation"]["requested_at"] == amc.at(0) and again["cancellation"]["reason"] == "a"
    assert amc.acme.types(task_id).count("cancellation_requested") == 1


@pytest.mark.req("CANCEL-IDEMPOTENT/s2")
@pytest.mark.parametrize("how", ["queued", "reported"])
def test_cancel_an_already_cancelled_task(amc, how):
    if how == "queued":
        task_id = amc.acme.submit()["id"]
        amc.acme.cancel(task_id, expect=200)
    else:
        task_id, lease = amc.claimed(start=True)
        amc.acme.cancel(task_id, expect=202)
        amc.h1.report(task_id, 1, lease["lease_id"], "cancelled")
    before, history = amc.acme.task(task_id), amc.acme.history(task_id)
    amc.admin.advance(1)

    assert amc.acme.cancel(task_id, "again", expect=200) == before
    assert amc.acme.history(task_id) == history


@pytest.mark.req("CANCEL-TERMINAL/s1")
def test_cancel_a_completed_task_is_a_conflict(amc):
    task_id, lease = amc.claimed(start=True)
    amc.h1.report(task_id, 1, lease["lease_id"], "done", metadata={"screens": 3})
    before, history = amc.acme.task(task_id), amc.acme.history(task_id)

    amc.acme.cancel(task_id, expect=409)

    assert problem(amc.acme) == (409, "task_terminal")
    assert amc.acme.last.json()["type"] == "urn:amc:problem:task_terminal"
    assert amc.acme.task(task_id) == before
    assert before["status"] == "done" and before["cancellation"] is None
    assert amc.acme.history(task_id) == history


@pytest.mark.req("CANCEL-EXPIRY/s1")
def test_expiry_with_a_pending_cancellation_cancels(amc):
    task_id, _lease = amc.claimed(start=True, max_attempts=3)
    amc.acme.cancel(task_id, expect=202)

    amc.admin.advance(30)

    task = amc.acme.task(task_id)
    assert task["attempts"][0]["outcome"] == "expired"
    assert task["attempts"][0]["ended_at"] == amc.at(30_000)
    assert task["status"] == "cancelled"
    assert {k: task["result"][k] for k in ("status", "attempt", "reason")} == {
        "status": "cancelled",
        "attempt": 1,
        "reason": "lease_expired_with_cancellation",
    }
    assert task["cancellation"]["state"] == "completed"
    assert amc.h1.host("h1")["devices"][0]["reservation"] is None
    assert amc.acme.types(task_id)[-2:] == ["lease_expired", "ended"]
    assert "requeued" not in amc.acme.types(task_id)
    assert amc.h1.claim("h1", expect=204) is None
    assert len(amc.acme.task(task_id)["attempts"]) == 1
