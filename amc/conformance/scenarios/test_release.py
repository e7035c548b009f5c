"""Release: a host gives an attempt back (RELEASE, specs/requirements/release.md).

The task goes on at once as after a lease expiry: requeued, cancelled or failed. The
scenarios release well before the lease runs out, so they hold under either clock.
"""

from __future__ import annotations

import pytest

from amc.conformance.client import ms, plan_of, ran, wire


def reservation(host, serial: str):
    return next(d for d in host.read()["devices"] if d["serial"] == serial)["reservation"]


def released_entry(caller, task_id: str) -> dict:
    (entry,) = [e for e in caller.history(task_id) if e["type"] == "released"]
    return entry


@pytest.mark.req("RELEASE/s1")
def test_a_release_with_attempts_left_requeues_the_task_at_once(scene):
    """Released before its lease runs out: attempt 1 released now, device free, task queued; attempt 2 next."""
    acme, h1, h2, clock = scene.acme, scene.h1, scene.h2, scene.clock
    # Given a task with max_attempts 2, attempt 1 dispatched on h1, no cancellation
    task, lease = scene.running(h1, max_attempts=2)
    h2.register(scene.device("emulator-5570"))
    events = acme.event_types(task["id"])

    # When h1 releases attempt 1 with reason host_stopping
    answer = h1.release(lease, reason="host_stopping")

    # Then the answer is the task, queued with attempt 1 released and no result
    assert answer["id"] == task["id"]
    assert (answer["status"], answer["attempt"], answer["result"]) == ("queued", 1, None)
    attempt = answer["attempts"][0]
    assert attempt["outcome"] == "released"
    assert attempt["steps"] is None
    assert ms(attempt["ended_at"]) < lease.expires_ms  # at once, not when the lease would have run out
    if clock.manual:
        assert attempt["ended_at"] == wire(clock.now())
    assert reservation(h1, lease.device) is None
    assert acme.get_task(task["id"]) == answer
    # And history gains released then requeued
    assert acme.event_types(task["id"]) == events + ["released", "requeued"]
    assert released_entry(acme, task["id"])["data"] == {"attempt": 1, "reason": "host_stopping"}
    # And the next matching claim creates attempt 2
    lease2 = h2.claim()
    assert (lease2.task_id, lease2.attempt) == (task["id"], 2)
    assert lease2.lease_id != lease.lease_id


@pytest.mark.req("RELEASE/s2")
def test_a_release_with_a_pending_cancellation_cancels_the_task(scene):
    """A pending cancellation wins over the attempts left: cancelled, released_with_cancellation."""
    acme, h1 = scene.acme, scene.h1
    # Given attempt 1 dispatched on h1 with max_attempts 3 and a pending cancellation
    task, lease = scene.running(h1, max_attempts=3)
    acme.cancel(task["id"], "wrong build", expect=202)

    # When h1 releases attempt 1
    answer = h1.release(lease, reason="host_stopping")

    # Then the task is cancelled by the release, and the cancellation completed
    assert answer["status"] == "cancelled"
    result = answer["result"]
    assert (result["status"], result["attempt"], result["reason"]) == ("cancelled", 1, "released_with_cancellation")
    assert answer["cancellation"]["state"] == "completed"
    assert answer["attempts"][0]["outcome"] == "released"
    assert acme.event_types(task["id"])[-2:] == ["released", "ended"]
    # And no claim returns the task again
    h1.claim(expect=204)
    assert acme.get_task(task["id"])["status"] == "cancelled"


@pytest.mark.req("RELEASE/s3")
def test_a_release_of_the_last_allowed_attempt_fails_the_task(scene):
    """The released attempt counts: at max_attempts the task fails, attempts_exhausted."""
    acme, h1 = scene.acme, scene.h1
    # Given a task with max_attempts 1, attempt 1 dispatched on h1
    task, lease = scene.running(h1, max_attempts=1)

    # When h1 releases attempt 1
    answer = h1.release(lease, reason="device_lost")

    # Then the task failed, attempts exhausted, and history ends released, ended
    assert answer["status"] == "failed"
    assert (answer["result"]["reason"], answer["result"]["attempt"]) == ("attempts_exhausted", 1)
    assert answer["attempts"][0]["outcome"] == "released"
    history = acme.history(task["id"])
    assert [e["type"] for e in history[-2:]] == ["released", "ended"]
    assert {k: history[-1]["data"][k] for k in ("status", "reason")} == {
        "status": "failed",
        "reason": "attempts_exhausted",
    }
    assert reservation(h1, lease.device) is None


@pytest.mark.req("RELEASE/s4")
def test_a_repeated_release_is_answered_as_recorded_and_a_different_one_conflicts(scene):
    """The identical release again is 200 even after a new claim; another reason or other steps are 409."""
    acme, h1 = scene.acme, scene.h1
    # Given attempt 1 released by h1 (device_lost), and the task claimed again as attempt 2
    plan = plan_of("a", "b")
    task, lease = scene.running(h1, max_attempts=3, plan=plan)
    steps = ran("a") + ran("b", status="interrupted")
    h1.release(lease, reason="device_lost", steps=steps)
    lease2 = h1.claim()
    assert (lease2.task_id, lease2.attempt) == (task["id"], 2)
    before = acme.get_task(task["id"])
    history = acme.history(task["id"])

    # When h1 sends the identical release of attempt 1 again
    answer = h1.release(lease, reason="device_lost", steps=steps)

    # Then it is answered with the task as it stands, and nothing changed
    assert answer == before
    assert answer["status"] == "assigned" and answer["attempt"] == 2
    assert acme.history(task["id"]) == history
    # And a different release of attempt 1 is a conflict
    h1.release(lease, reason="host_stopping", steps=steps, expect=(409, "result_conflict"))
    h1.release(lease, reason="device_lost", expect=(409, "result_conflict"))
    h1.release(lease, reason="device_lost", steps=ran("a", "b"), expect=(409, "result_conflict"))
    assert acme.get_task(task["id"]) == before


@pytest.mark.req("RELEASE/s5")
def test_other_requests_on_a_released_attempt_meet_the_lease_checks(scene):
    """lease_ended while the task waits, lease_replaced once attempt 2 exists; foreign and unknown as ever."""
    acme, h1, h2 = scene.acme, scene.h1, scene.h2
    # Given attempt 1 released by h1 and the task queued
    task, lease = scene.running(h1, max_attempts=3)
    h1.release(lease)
    before = acme.get_task(task["id"])
    assert before["status"] == "queued"

    # When h1 renews, starts or reports for attempt 1: lease_ended, and nothing changes
    h1.renew(lease, expect=(409, "lease_ended"))
    h1.start(lease, expect=(409, "lease_ended"))
    h1.report(lease, "done", expect=(409, "lease_ended"))
    h1.report(lease, "failed", expect=(409, "lease_ended"))
    assert acme.get_task(task["id"]) == before
    # And with another host's token, or another lease id, the release itself is refused as any lease request
    h2.release(lease, expect=(409, "lease_foreign"))
    h1.release(lease, lease_id="not-the-lease", expect=(409, "lease_unknown"))
    h1.release(lease, attempt=7, expect=(404, "not_found"))
    # And once the task was claimed again as attempt 2, each is lease_replaced
    lease2 = h1.claim()
    assert lease2.attempt == 2
    h1.renew(lease, expect=(409, "lease_replaced"))
    h1.report(lease, "done", expect=(409, "lease_replaced"))
    h1.release(lease, reason="other", expect=(409, "result_conflict"))  # a different release of attempt 1
    assert acme.get_task(task["id"])["status"] == "assigned"


@pytest.mark.req("RELEASE/s5")
def test_a_release_after_the_lease_expired_is_lease_expired(scene):
    """An expired attempt cannot be released: it already ended by expiry."""
    acme, h1, clock = scene.acme, scene.h1, scene.clock
    task, lease = scene.running(h1, max_attempts=3, lease_seconds=clock.short_lease)
    clock.run_out(lease)
    h1.release(lease, reason="host_stopping", expect=(409, "lease_expired"))
    after = acme.get_task(task["id"])
    assert after["attempts"][0]["outcome"] == "expired"
    assert "released" not in acme.event_types(task["id"])


@pytest.mark.req("RELEASE/s6")
def test_the_step_outcomes_of_a_release_are_kept_on_the_attempt(scene):
    """steps go to attempts[].steps, never to result; steps that do not fit the plan are 400."""
    acme, h1, h2 = scene.acme, scene.h1, scene.h2
    # Given attempt 1 of a two-step task dispatched on h1
    plan = plan_of("a", "b")
    task, lease = scene.running(h1, max_attempts=3, plan=plan)

    # A release whose steps do not name every planned step once, in order, is 400, and changes nothing
    before = acme.get_task(task["id"])
    h1.release(lease, steps=ran("a"), expect=(400, "invalid_request"))
    h1.release(lease, steps=ran("b", "a"), expect=(400, "invalid_request"))
    h1.release(lease, steps=[{"id": "a", "status": "paused"}, {"id": "b", "status": "completed"}], expect=400)
    assert acme.get_task(task["id"]) == before

    # When h1 releases it with one step completed and one interrupted
    steps = ran("a") + ran("b", status="interrupted")
    answer = h1.release(lease, reason="host_stopping", steps=steps)

    # Then attempt 1 keeps those outcomes, and the task has no result
    assert answer["attempts"][0]["steps"] == steps
    assert answer["result"] is None
    # And an attempt that was not released reads steps: null, also once it ended by a report
    h2.register(scene.device("emulator-5570"))
    lease2 = h2.claim()
    h2.start(lease2)
    assert acme.get_task(task["id"])["attempts"][1]["steps"] is None
    done = h2.report(lease2, "done", steps=ran("a", "b"))
    assert done["attempts"][1]["steps"] is None
    assert done["attempts"][0]["steps"] == steps
    assert done["result"]["steps"] == ran("a", "b")
