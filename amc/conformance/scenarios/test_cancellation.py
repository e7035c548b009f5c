"""Seed 000, task cancellation: CANCEL-* (specs/requirements/cancellation.md)."""

from __future__ import annotations

import pytest

from amc.conformance.client import PLAN_ABC, ms, wire


def reservation(host, serial: str):
    device = next(d for d in host.read()["devices"] if d["serial"] == serial)
    return device["reservation"]


@pytest.mark.req("CANCEL-QUEUED/s1")
def test_cancel_a_task_that_was_never_assigned(scene):
    """A queued task is cancelled within the cancel request and never gets an attempt."""
    acme, h1, clock = scene.acme, scene.h1, scene.clock
    # Given a queued task of acme, and h1 registered with a device that matches it
    h1.register(scene.device("emulator-5554"))
    task = scene.submit()
    assert (task["status"], task["attempt"]) == ("queued", None)
    clock.advance(1)

    # When acme cancels it
    cancelled = acme.cancel(task["id"], "no longer needed", expect=200)

    # Then it is cancelled at once, without an attempt
    assert cancelled["status"] == "cancelled"
    assert cancelled["result"]["status"] == "cancelled"
    assert cancelled["result"]["reason"] == "cancelled_while_queued"
    assert cancelled["result"]["attempt"] is None
    cancellation = cancelled["cancellation"]
    assert cancellation["state"] == "completed"
    assert cancellation["attempt"] is None
    assert cancellation["delivered_at"] is None
    assert cancellation["reason"] == "no longer needed"
    if clock.manual:
        assert cancellation["requested_at"] == wire(clock.now())
    assert ms(cancellation["requested_at"]) >= ms(task["created_at"])
    events = acme.history(task["id"])
    assert [e["type"] for e in events][-2:] == ["cancellation_requested", "ended"]
    assert events[-1]["data"]["status"] == "cancelled"
    assert events[-1]["data"]["reason"] == "cancelled_while_queued"
    # And no claim ever returns it
    h1.claim(expect=204)
    assert acme.get_task(task["id"])["attempts"] == []


@pytest.mark.req("CANCEL-INFLIGHT/s1")
@pytest.mark.parametrize("status", ["dispatched", "assigned"])
def test_cancel_in_flight_is_recorded_pending_and_changes_nothing_else(scene, status):
    """An in-flight cancel is recorded pending against the attempt: 202, status, lease and device unchanged."""
    acme, h1 = scene.acme, scene.h1
    # Given a task dispatched (or still assigned) as attempt 1 on h1/emulator-5554
    task, lease = scene.running(h1, start=status == "dispatched")
    before = acme.get_task(task["id"])
    assert before["status"] == status and before["cancellation"] is None
    events_before = acme.event_types(task["id"])

    # When its client cancels it
    answer = acme.cancel(task["id"], "wrong build", expect=202)

    # Then the status, the attempt and the reservation are unchanged
    assert answer["status"] == status
    assert answer["attempt"] == 1
    assert answer["attempts"][0]["outcome"] is None
    assert answer["attempts"][0]["lease_expires_at"] == before["attempts"][0]["lease_expires_at"]
    assert reservation(h1, lease.device) == {"task_id": task["id"], "attempt": 1}
    # And the cancellation is pending against attempt 1, with one new history event
    cancellation = answer["cancellation"]
    assert cancellation["state"] == "pending"
    assert cancellation["attempt"] == 1
    assert cancellation["delivered_at"] is None
    assert cancellation["reason"] == "wrong build"
    assert acme.event_types(task["id"]) == events_before + ["cancellation_requested"]
    assert acme.get_task(task["id"]) == answer


@pytest.mark.req("CANCEL-INFLIGHT/s1")
def test_a_pending_cancellation_survives_a_restart(scene):
    """After the server is killed and restarted, the pending cancellation reads the same and is delivered."""
    if not scene.target.can_restart:
        pytest.skip("restarting the target needs --restart-command CMD (or the suite's own server)")
    acme, h1 = scene.acme, scene.h1
    # Given a dispatched task whose cancellation is pending
    task, lease = scene.running(h1)
    pending = acme.cancel(task["id"], "wrong build", expect=202)

    # When the server process is killed and restarted
    scene.target.restart()

    # Then the task reads the same, and h1's next renewal carries the cancellation
    assert acme.get_task(task["id"]) == pending
    assert h1.renew(lease)["cancel_requested"] is True


@pytest.mark.req("CANCEL-INFLIGHT/s2")
def test_the_owning_host_sees_the_cancellation_at_its_next_renewal(scene):
    """The next renewal answers cancel_requested: true and marks the cancellation delivered, once."""
    acme, h1, clock = scene.acme, scene.h1, scene.clock
    # Given attempt 1 dispatched on h1, renewed, then cancelled
    task, lease = scene.running(h1)
    assert h1.renew(lease)["cancel_requested"] is False
    acme.cancel(task["id"], expect=202)
    clock.advance(5)

    # When h1 renews
    answer = h1.renew(lease)

    # Then the renewal carries the cancellation and extends the lease as any renewal does
    assert answer["cancel_requested"] is True
    assert answer["status"] == "dispatched"
    if clock.manual:
        assert answer["lease_expires_at"] == wire(clock.now() + 30_000)
    delivered = acme.get_task(task["id"])["cancellation"]["delivered_at"]
    assert delivered is not None
    if clock.manual:
        assert delivered == wire(clock.now())
    assert acme.event_types(task["id"]).count("cancellation_delivered") == 1
    # And every later renewal carries it too, while delivered_at keeps its first value
    clock.advance(5)
    assert h1.renew(lease)["cancel_requested"] is True
    clock.advance(5)
    assert h1.renew(lease)["cancel_requested"] is True
    assert acme.get_task(task["id"])["cancellation"]["delivered_at"] == delivered
    assert acme.event_types(task["id"]).count("cancellation_delivered") == 1


@pytest.mark.req("CANCEL-INFLIGHT/s3")
def test_cancellation_is_not_instantaneous(scene):
    """Until the host reports or the lease expires, a cancelled task stays dispatched with its device."""
    acme, h1, clock = scene.acme, scene.h1, scene.clock
    # Given attempt 1 dispatched on h1, with lease_expires_at E, and a cancel answered 202
    task, lease = scene.running(h1, lease_seconds=clock.short_lease)
    acme.cancel(task["id"], expect=202)

    # When the task is read before E (at E - 1 ms under a manual clock)
    if clock.manual:
        clock.advance_to(lease.expires_ms - 1)
    read = acme.get_task(task["id"])

    # Then it is still dispatched, with attempt 1 active and its device reserved
    assert read["status"] == "dispatched"
    assert read["attempts"][0]["outcome"] is None
    assert read["cancellation"]["state"] == "pending"
    assert reservation(h1, lease.device) == {"task_id": task["id"], "attempt": 1}
    # And it becomes cancelled only when the lease expires at E
    clock.run_out(lease)
    ended = acme.get_task(task["id"])
    assert ended["status"] == "cancelled"
    assert ended["result"]["reason"] == "lease_expired_with_cancellation"


@pytest.mark.req("CANCEL-OUTCOME/s1")
def test_a_reported_cancellation_ends_cancelled_and_frees_the_device(scene):
    """The host's cancelled report ends the task cancelled, completes the cancellation, frees the device."""
    acme, h1, clock = scene.acme, scene.h1, scene.clock
    # Given attempt 1 dispatched on h1/emulator-5554, with a cancellation a renewal delivered
    task, lease = scene.running(h1, plan=PLAN_ABC)
    acme.cancel(task["id"], expect=202)
    assert h1.renew(lease)["cancel_requested"] is True
    clock.advance(3)

    # When h1 reports cancelled, having stopped at the step boundary after a
    steps = [
        {"id": "a", "status": "completed"},
        {"id": "b", "status": "not_started", "reason": "cancelled"},
        {"id": "c", "status": "not_started", "reason": "cancelled"},
    ]
    ended = h1.report(lease, "cancelled", steps=steps)

    # Then the task is cancelled, the attempt's outcome is cancelled, the cancellation completed
    assert ended["status"] == "cancelled"
    assert ended["attempts"][0]["outcome"] == "cancelled"
    if clock.manual:
        assert ended["attempts"][0]["ended_at"] == wire(clock.now())
    assert ended["attempts"][0]["ended_at"] == ended["result"]["recorded_at"]
    assert ended["result"]["status"] == "cancelled"
    assert ended["result"]["attempt"] == 1
    assert ended["result"]["reason"] == "reported"
    assert ended["result"]["steps"] == steps
    assert ended["cancellation"]["state"] == "completed"
    # And the device is free: the next matching claim may be assigned it
    assert reservation(h1, lease.device) is None
    follower = scene.submit()
    assert h1.claim().task_id == follower["id"]


@pytest.mark.req("CANCEL-OUTCOME/s2")
def test_lease_loss_ends_failed_not_cancelled(scene):
    """A lease that runs out without a cancellation fails the task (attempts exhausted), never cancels it."""
    acme, h1, clock = scene.acme, scene.h1, scene.clock
    # Given a task with max_attempts 1 dispatched on h1, and no cancellation
    task, lease = scene.running(h1, max_attempts=1, lease_seconds=clock.short_lease)

    # When the lease expires and h1 then renews
    clock.run_out(lease)
    h1.renew(lease, expect=(409, "lease_expired"))

    # Then the task failed with attempts_exhausted, and is not cancelled
    failed = acme.get_task(task["id"])
    assert failed["status"] == "failed"
    assert failed["result"]["reason"] == "attempts_exhausted"
    assert failed["attempts"][0]["outcome"] == "expired"
    assert failed["cancellation"] is None
    # And h1's failed report is refused and changes nothing
    h1.report(lease, "failed", expect=(409, "lease_expired"))
    assert acme.get_task(task["id"]) == failed


@pytest.mark.req("CANCEL-IDEMPOTENT/s1")
def test_cancel_twice_while_pending(scene):
    """A second cancel of a pending cancellation answers 202 and records nothing."""
    acme, h1, clock = scene.acme, scene.h1, scene.clock
    # Given a dispatched task whose cancellation was requested at T1 with reason "a"
    task, _lease = scene.running(h1)
    first = acme.cancel(task["id"], "a", expect=202)
    clock.advance(2)

    # When its client cancels again with reason "b"
    second = acme.cancel(task["id"], "b", expect=202)

    # Then nothing changed: still dispatched, same requested_at and reason, one event, same updated_at
    assert second["status"] == "dispatched"
    assert second["cancellation"] == first["cancellation"]
    assert second["cancellation"]["reason"] == "a"
    assert second["updated_at"] == first["updated_at"]
    assert acme.event_types(task["id"]).count("cancellation_requested") == 1
    assert second == first


@pytest.mark.req("CANCEL-IDEMPOTENT/s2")
@pytest.mark.parametrize("how", ["while queued", "reported"])
def test_cancel_an_already_cancelled_task(scene, how):
    """Cancelling a cancelled task answers 200 with the task unchanged and records nothing."""
    acme, h1, clock = scene.acme, scene.h1, scene.clock
    # Given a task that ended cancelled
    if how == "while queued":
        task = scene.submit()
        acme.cancel(task["id"], expect=200)
    else:
        task, lease = scene.running(h1)
        acme.cancel(task["id"], expect=202)
        h1.renew(lease)
        h1.report(lease, "cancelled")
    before = acme.get_task(task["id"])
    events = acme.history(task["id"])
    assert before["status"] == "cancelled"
    clock.advance(2)

    # When its client cancels it again
    answer = acme.cancel(task["id"], "again", expect=200)

    # Then the answer is the task as it stands, and nothing was recorded
    assert answer == before
    assert acme.get_task(task["id"]) == before
    assert acme.history(task["id"]) == events


@pytest.mark.req("CANCEL-TERMINAL/s1")
@pytest.mark.parametrize("status", ["done", "failed"])
def test_cancel_a_completed_task_is_a_conflict(scene, status):
    """Cancelling a done or failed task is 409 task_terminal and changes nothing."""
    acme, h1 = scene.acme, scene.h1
    # Given a task that ended by h1's report for attempt 1
    task, lease = scene.running(h1)
    ended = h1.report(lease, status, metadata={"screens": 3})
    events = acme.history(task["id"])

    # When its client cancels it
    acme.cancel(task["id"], expect=(409, "task_terminal"))

    # Then the task, its result, its cancellation and its history are unchanged
    after = acme.get_task(task["id"])
    assert after == ended
    assert after["status"] == status and after["cancellation"] is None
    assert after["result"]["metadata"] == {"screens": 3}
    assert acme.history(task["id"]) == events


@pytest.mark.req("CANCEL-EXPIRY/s1")
@pytest.mark.parametrize("status", ["dispatched", "assigned"])
def test_expiry_with_a_pending_cancellation_cancels_instead_of_requeueing(scene, status):
    """The lease expires while a cancellation is pending (delivered or not): cancelled, though attempts remain."""
    acme, h1, h2, clock = scene.acme, scene.h1, scene.h2, scene.clock
    # Given a task with max_attempts 3 dispatched (or still assigned, so the cancellation is
    # undelivered) on h1/emulator-5554 with lease E, and a pending cancellation
    task, lease = scene.running(h1, max_attempts=3, lease_seconds=clock.short_lease, start=status == "dispatched")
    assert acme.cancel(task["id"], expect=202)["status"] == status
    h2.register(scene.device("emulator-5570"))
    events_before = acme.event_types(task["id"])

    # When no result arrives and the server's clock reaches E
    clock.run_out(lease)

    # Then attempt 1 expired at E and the task is cancelled, not requeued
    after = acme.get_task(task["id"])
    assert after["attempts"][0]["outcome"] == "expired"
    assert after["attempts"][0]["ended_at"] == lease.lease_expires_at
    assert after["status"] == "cancelled"
    assert after["result"]["status"] == "cancelled"
    assert after["result"]["attempt"] == 1
    assert after["result"]["reason"] == "lease_expired_with_cancellation"
    assert after["cancellation"]["state"] == "completed"
    assert reservation(h1, lease.device) is None
    assert acme.event_types(task["id"]) == events_before + ["lease_expired", "ended"]
    # And no attempt 2 is ever created
    h1.claim(expect=204)
    h2.claim(expect=204)
    assert len(acme.get_task(task["id"])["attempts"]) == 1
