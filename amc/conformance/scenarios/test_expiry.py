"""Lease expiry: ATTEMPTS, EXPIRY (specs/requirements/protocol-rules.md).

Under a manual clock the clock is moved to the exact instant a lease expires; in real time
the scenarios claim short leases and wait them out.
"""

from __future__ import annotations

import pytest

from amc.conformance.client import ms, wire


def reservation(host, serial: str):
    return next(d for d in host.read()["devices"] if d["serial"] == serial)["reservation"]


def requeued_once(scene):
    """Given a task with max_attempts 2 whose attempt 1 (h1) expired, and h2 ready to claim it."""
    h1, h2, clock = scene.h1, scene.h2, scene.clock
    task, lease1 = scene.running(h1, max_attempts=2, lease_seconds=clock.short_lease)
    h2.register(scene.device("emulator-5570"))
    events = scene.acme.event_types(task["id"])
    clock.run_out(lease1)
    return task, lease1, events


@pytest.mark.req("ATTEMPTS/s1")
def test_an_expired_attempt_is_requeued_while_attempts_remain(scene):
    """Expiry with attempts left: attempt expired at E, device free, task queued; the next claim is attempt 2."""
    acme, h1, h2 = scene.acme, scene.h1, scene.h2
    # Given a task with max_attempts 2, attempt 1 on h1/emulator-5554 with lease_expires_at E
    # When the server's clock reaches E
    task, lease1, events = requeued_once(scene)

    # Then attempt 1 expired at E, its device is free, and the task is queued again
    after = acme.get_task(task["id"])
    assert after["attempts"][0]["outcome"] == "expired"
    assert after["attempts"][0]["ended_at"] == lease1.lease_expires_at
    assert reservation(h1, lease1.device) is None
    assert (after["status"], after["attempt"], after["result"]) == ("queued", 1, None)
    assert acme.event_types(task["id"]) == events + ["lease_expired", "requeued"]
    # And the next matching claim (by h2) creates attempt 2 with a new lease
    lease2 = h2.claim()
    assert (lease2.task_id, lease2.attempt) == (task["id"], 2)
    assert lease2.lease_id != lease1.lease_id
    assert acme.get_task(task["id"])["status"] == "assigned"


@pytest.mark.req("ATTEMPTS/s2")
def test_the_last_allowed_attempt_expiring_fails_the_task(scene):
    """Expiry of attempt max_attempts: failed with attempts_exhausted; never claimed again."""
    acme, h1, h2, clock = scene.acme, scene.h1, scene.h2, scene.clock
    # Given the same task with attempt 2 dispatched on h2, lease_expires_at E2
    task, _, _ = requeued_once(scene)
    lease2 = h2.claim(lease_seconds=clock.short_lease)
    h2.start(lease2)
    events = acme.event_types(task["id"])

    # When the server's clock reaches E2
    clock.run_out(lease2)

    # Then attempt 2 expired, its device is free and the task failed
    after = acme.get_task(task["id"])
    assert after["attempts"][1]["outcome"] == "expired"
    assert after["attempts"][1]["ended_at"] == lease2.lease_expires_at
    assert reservation(h2, lease2.device) is None
    assert after["status"] == "failed"
    result = after["result"]
    assert {k: result[k] for k in ("status", "attempt", "reason", "steps")} == {
        "status": "failed",
        "attempt": 2,
        "reason": "attempts_exhausted",
        "steps": None,
    }
    assert result["metadata"] in ({}, None)  # nobody reported any
    # (recorded when the server applied the expiry: E itself under a manual clock, E or later in real time)
    if clock.manual:
        assert result["recorded_at"] == lease2.lease_expires_at
    assert ms(result["recorded_at"]) >= lease2.expires_ms
    history = acme.history(task["id"])
    assert [e["type"] for e in history] == events + ["lease_expired", "ended"]
    assert (history[-1]["data"]["status"], history[-1]["data"]["reason"]) == ("failed", "attempts_exhausted")
    # And no claim returns it again
    h1.claim(expect=204)
    h2.claim(expect=204)


@pytest.mark.req("EXPIRY/s1")
def test_a_lease_is_expired_exactly_at_its_expiry_time(scene):
    """At E - 1 ms a renewal succeeds; at exactly E it is 409 lease_expired and the attempt ended at E."""
    h1, clock = scene.h1, scene.clock
    clock.need_manual("the clock must stand at E - 1 ms and at exactly E")
    # Given attempts of X and Y dispatched on h1, both with lease_expires_at E
    h1.register(scene.device("emulator-5554"), scene.device("emulator-5556"))
    x, y = scene.submit(), scene.submit()
    lx, ly = h1.claim(), h1.claim()
    h1.start(lx), h1.start(ly)
    assert lx.lease_expires_at == ly.lease_expires_at
    expires = lx.expires_ms

    # When the clock stands at E - 1 ms and h1 renews X
    clock.advance_to(expires - 1)
    renewed = h1.renew(lx)

    # Then the renewal succeeds and moves the lease to E - 1 ms + lease_seconds
    assert renewed["lease_expires_at"] == wire(expires - 1 + 30_000)

    # And when the clock stands at exactly E and h1 renews Y, the lease is gone
    clock.advance_to(expires)
    h1.renew(ly, expect=(409, "lease_expired"))
    attempt = scene.task(y["id"])["attempts"][0]
    assert (attempt["outcome"], attempt["ended_at"]) == ("expired", wire(expires))
    assert scene.task(x["id"])["attempts"][0]["outcome"] is None


@pytest.mark.req("EXPIRY/s2")
def test_expiry_is_applied_before_any_request_can_observe_the_lease(scene):
    """At E, a read shows the task queued, the stale result is lease_expired, a cancel finds it queued."""
    acme, h1, h2, clock = scene.acme, scene.h1, scene.h2, scene.clock
    # Given attempts 1 of X and Y on h1 with lease_expires_at E, max_attempts 3, no cancellation
    h1.register(scene.device("emulator-5554"), scene.device("emulator-5556"))
    x, y = scene.submit(max_attempts=3), scene.submit(max_attempts=3)
    lx = h1.claim(lease_seconds=clock.short_lease)
    ly = h1.claim(lease_seconds=clock.short_lease)
    h2.register(scene.device("emulator-5570"))

    # When the clock reaches E and a client reads X
    clock.run_out(ly if ly.expires_ms > lx.expires_ms else lx)
    read = acme.get_task(x["id"])

    # Then X reads queued with attempt 1 expired, never assigned with a lapsed lease
    assert read["status"] == "queued"
    assert read["attempts"][0]["outcome"] == "expired"
    # And h1's result for attempt 1 is lease_expired
    h1.report(lx, "done", expect=(409, "lease_expired"))
    # And a client's cancel of Y finds it queued and cancels it at once
    cancelled = acme.cancel(y["id"], expect=200)
    assert cancelled["status"] == "cancelled"
    assert cancelled["result"]["reason"] == "cancelled_while_queued"
    # And a claim by h2 is assigned X as attempt 2
    lease = h2.claim()
    assert (lease.task_id, lease.attempt) == (x["id"], 2)
