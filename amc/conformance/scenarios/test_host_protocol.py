"""Seed 001 and the host's side of Part A: LEASE-RENEW, RESULT-IDEMPOTENT, START, RESULT,
LEASE-CHECKS, CANCELLATION-RECORD (specs/requirements/host-agent.md, protocol-rules.md).

The test plays the Host Agent: it claims, starts, renews and reports with the host tokens.
"""

from __future__ import annotations

import pytest

from amc.conformance.client import PLAN, PLAN_ABC, as_recorded, steps_all, wire


def device_of(host, serial: str) -> dict:
    return next(d for d in host.read()["devices"] if d["serial"] == serial)


# ---------------------------------------------------------------------------------------
# LEASE-RENEW


@pytest.mark.req("LEASE-RENEW/s1")
def test_a_renewal_extends_the_lease_and_changes_nothing_else(scene):
    """A renewal of a live lease: 200, lease_expires_at = now + lease_seconds, renewals + 1, nothing else."""
    acme, h1, clock = scene.acme, scene.h1, scene.clock
    # Given attempt 1 dispatched on h1/emulator-5554, granted 30 s at T, renewals 0
    task, lease = scene.running(h1, lease_seconds=30)
    before = acme.get_task(task["id"])
    events = acme.history(task["id"])
    assert before["attempts"][0]["renewals"] == 0

    # When h1 renews at T+10 s
    clock.advance(10)
    answer = h1.renew(lease)

    # Then the lease runs to T+40 s and the answer says so
    assert answer["task_id"] == task["id"]
    assert answer["attempt"] == 1
    assert answer["status"] == "dispatched"
    assert answer["cancel_requested"] is False
    assert answer["messages"] == []
    if clock.manual:
        assert answer["lease_expires_at"] == wire(clock.now() + 30_000)
    assert answer["lease_expires_at"] > before["attempts"][0]["lease_expires_at"]
    # And only the lease and the renewal count changed
    after = acme.get_task(task["id"])
    attempt, was = after["attempts"][0], before["attempts"][0]
    assert attempt["renewals"] == 1
    assert attempt["lease_expires_at"] == answer["lease_expires_at"]
    for member in ("number", "host_id", "device", "assigned_at", "dispatched_at", "outcome", "ended_at"):
        assert attempt[member] == was[member], member
    assert (after["status"], after["attempt"]) == ("dispatched", 1)
    assert device_of(h1, lease.device)["reservation"] == {"task_id": task["id"], "attempt": 1}
    assert acme.history(task["id"]) == events


@pytest.mark.req("LEASE-RENEW/s2")
def test_a_stale_or_foreign_lease_is_refused_and_nothing_changes(scene):
    """Renewing an expired, replaced or foreign lease is 409 with its code, and leaves every attempt alone."""
    acme, h1, h2, clock = scene.acme, scene.h1, scene.h2, scene.clock
    # Given attempt 1 of X held by h1 with lease L1 expired, and X requeued
    x, lease1 = scene.running(h1, max_attempts=3, lease_seconds=clock.short_lease)
    clock.run_out(lease1)
    assert acme.get_task(x["id"])["status"] == "queued"
    # (before attempt 2 exists, h1's renewal of attempt 1 is lease_expired)
    h1.renew(lease1, expect=(409, "lease_expired"))
    # and h2 holds attempt 2 with lease L2
    h2.register(scene.device("emulator-5570"))
    lease2 = h2.claim()
    assert (lease2.task_id, lease2.attempt) == (x["id"], 2)
    h2.start(lease2)
    before = acme.get_task(x["id"])

    # When h1 renews attempt 1 with L1, then attempt 2 with either lease
    h1.renew(lease1, expect=(409, "lease_replaced"))
    h1.renew(lease2, expect=(409, "lease_foreign"))
    h1.renew(lease2, lease_id=lease1.lease_id, expect=(409, "lease_foreign"))
    # (and a host that never held an attempt of the task is foreign too)
    if scene.spare is not None:
        scene.spare.renew(lease2, expect=(409, "lease_foreign"))
    y, lease_y = scene.running(h1, device="emulator-5556")
    h2.renew(lease_y, expect=(409, "lease_foreign"))

    # Then attempt 1 stays expired and attempt 2 is untouched
    after = acme.get_task(x["id"])
    assert after == before
    assert after["attempts"][0]["outcome"] == "expired"
    assert after["attempts"][1]["renewals"] == 0
    assert acme.get_task(y["id"])["attempts"][0]["renewals"] == 0


@pytest.mark.req("LEASE-RENEW/s3")
def test_renewals_keep_carrying_the_cancellation_until_the_host_reports(scene):
    """Every renewal after a cancellation carries it, the lease keeps running, and a cancelled report is accepted."""
    acme, h1, clock = scene.acme, scene.h1, scene.clock
    # Given attempt 1 of a plan a, b, c running on h1 (step a running)
    task, lease = scene.running(h1, plan=PLAN_ABC)
    acme.cancel(task["id"], expect=202)

    # When the renewals answer cancel_requested: true, and the host keeps renewing until it reports
    for _ in range(3):
        clock.advance(10)
        answer = h1.renew(lease)
        assert answer["cancel_requested"] is True
        assert answer["status"] == "dispatched"
    steps = [
        {"id": "a", "status": "interrupted", "reason": "cancelled"},
        {"id": "b", "status": "not_started", "reason": "cancelled"},
        {"id": "c", "status": "not_started", "reason": "cancelled"},
    ]
    ended = h1.report(lease, "cancelled", steps=steps)

    # Then the lease never ran out underneath it, and the report is recorded as sent
    assert ended["status"] == "cancelled"
    assert ended["attempts"][0]["outcome"] == "cancelled"
    assert ended["attempts"][0]["renewals"] == 3
    assert ended["result"]["steps"] == steps


# ---------------------------------------------------------------------------------------
# RESULT-IDEMPOTENT


@pytest.mark.req("RESULT-IDEMPOTENT/s1")
def test_report_done(scene):
    """A done report ends the attempt and the task, records the result as sent, frees the device."""
    acme, h1, clock = scene.acme, scene.h1, scene.clock
    # Given attempt 1 dispatched on h1/emulator-5554 with no cancellation
    task, lease = scene.running(h1)
    clock.advance(4)

    # When h1 reports done with metadata and every step completed
    if clock.manual:
        steps = [
            {
                "id": "open",
                "status": "completed",
                "started_at": wire(clock.now() - 3000),
                "ended_at": wire(clock.now() - 1000),
                "output": "ok",
            }
        ]
    else:
        steps = steps_all(PLAN, output="ok")
    ended = h1.report(lease, "done", metadata={"screens": 3}, steps=steps)

    # Then the task is done and the result is what h1 sent
    assert ended["status"] == "done"
    attempt, result = ended["attempts"][0], ended["result"]
    assert attempt["outcome"] == "done"
    assert attempt["ended_at"] == result["recorded_at"]
    if clock.manual:
        assert result["recorded_at"] == wire(clock.now())
    assert {k: result[k] for k in ("status", "attempt", "reason", "metadata", "steps")} == {
        "status": "done",
        "attempt": 1,
        "reason": "reported",
        "metadata": {"screens": 3},
        "steps": steps,
    }
    assert device_of(h1, lease.device)["reservation"] is None
    last = acme.history(task["id"])[-1]
    assert last["type"] == "ended"
    assert (last["data"]["status"], last["data"]["reason"]) == ("done", "reported")


@pytest.mark.req("RESULT-IDEMPOTENT/s2")
def test_report_cancelled(scene):
    """A cancelled report for a pending cancellation ends the task cancelled with the host's metadata."""
    acme, h1 = scene.acme, scene.h1
    # Given attempt 1 dispatched on h1/emulator-5554 whose cancellation is pending
    task, lease = scene.running(h1)
    acme.cancel(task["id"], expect=202)

    # When h1 reports cancelled
    ended = h1.report(lease, "cancelled", metadata={"stopped_before": "b"})

    # Then the task is cancelled and the cancellation completed
    assert ended["status"] == "cancelled"
    assert ended["attempts"][0]["outcome"] == "cancelled"
    assert ended["result"]["metadata"] == {"stopped_before": "b"}
    assert ended["result"]["reason"] == "reported"
    assert ended["cancellation"]["state"] == "completed"
    assert device_of(h1, lease.device)["reservation"] is None


@pytest.mark.req("RESULT-IDEMPOTENT/s3")
def test_repeat_a_report_whose_response_was_lost(scene):
    """The identical report again, even after the old lease time, answers 200 and changes nothing."""
    acme, h1, clock = scene.acme, scene.h1, scene.clock
    # Given h1 reported done with metadata M and steps S at T
    task, lease = scene.running(h1, lease_seconds=clock.short_lease)
    metadata, steps = {"screens": 3}, steps_all(PLAN)
    recorded = h1.report(lease, "done", metadata=metadata, steps=steps)
    events = acme.history(task["id"])

    # When h1 posts the identical body again, after the lease's old lease_expires_at passed
    clock.run_out(lease)
    clock.advance(1)
    again = h1.report(lease, "done", metadata=metadata, steps=steps)

    # Then the answer is the task as recorded: same times, one attempt, no new event
    assert again == recorded
    assert again["result"]["recorded_at"] == recorded["attempts"][0]["ended_at"]
    assert len(again["attempts"]) == 1
    assert acme.get_task(task["id"]) == recorded
    assert acme.history(task["id"]) == events


@pytest.mark.req("RESULT-IDEMPOTENT/s4")
def test_a_stale_attempt_reports_after_requeue(scene):
    """A report from an expired attempt whose task has a newer attempt is 409 lease_replaced."""
    acme, h1, h2, clock = scene.acme, scene.h1, scene.h2, scene.clock
    # Given h1's attempt 1 expired, the task was requeued and h2 holds attempt 2, dispatched
    task, lease1 = scene.running(h1, lease_seconds=clock.short_lease)
    clock.run_out(lease1)
    h2.register(scene.device("emulator-5570"))
    lease2 = h2.claim()
    assert (lease2.task_id, lease2.attempt) == (task["id"], 2)
    h2.start(lease2)
    before = acme.get_task(task["id"])

    # When h1 reports done for attempt 1 with its lease L1
    h1.report(lease1, "done", expect=(409, "lease_replaced"))

    # Then attempt 1 stays expired, attempt 2 stays active, the task stays dispatched without result
    after = acme.get_task(task["id"])
    assert after == before
    assert after["attempts"][0]["outcome"] == "expired"
    assert after["attempts"][1]["outcome"] is None
    assert after["status"] == "dispatched" and after["result"] is None
    assert device_of(h2, lease2.device)["reservation"] == {"task_id": task["id"], "attempt": 2}


# ---------------------------------------------------------------------------------------
# START


@pytest.mark.req("START/s1")
def test_start_dispatches_and_a_repeat_records_nothing(scene):
    """Start moves assigned to dispatched; a repeated start only extends the lease."""
    acme, h1, clock = scene.acme, scene.h1, scene.clock
    # Given attempt 1 of X assigned to h1 at T with lease_seconds 30
    task, lease = scene.running(h1, start=False, lease_seconds=30)
    assert acme.get_task(task["id"])["status"] == "assigned"
    events = acme.event_types(task["id"])

    # When h1 starts it at T+5 s
    clock.advance(5)
    answer = h1.start(lease)

    # Then it is dispatched, the lease runs to T+35 s and history gains dispatched
    assert answer["status"] == "dispatched"
    assert answer["cancel_requested"] is False
    assert answer["messages"] == []
    started = acme.get_task(task["id"])
    dispatched_at = started["attempts"][0]["dispatched_at"]
    if clock.manual:
        assert answer["lease_expires_at"] == wire(clock.now() + 30_000)
        assert dispatched_at == wire(clock.now())
    assert started["status"] == "dispatched"
    assert acme.event_types(task["id"]) == events + ["dispatched"]

    # And a second start at T+10 s extends the lease and records nothing
    clock.advance(5)
    repeat = h1.start(lease)
    assert repeat["status"] == "dispatched"
    if clock.manual:
        assert repeat["lease_expires_at"] == wire(clock.now() + 30_000)
    assert repeat["lease_expires_at"] >= answer["lease_expires_at"]
    again = acme.get_task(task["id"])
    assert again["attempts"][0]["dispatched_at"] == dispatched_at
    assert again["attempts"][0]["renewals"] == 0
    assert acme.event_types(task["id"]) == events + ["dispatched"]


@pytest.mark.req("START/s2")
def test_start_while_a_cancellation_is_pending_dispatches_and_says_so(scene):
    """Start of an assigned attempt with a pending cancellation: dispatched, cancel_requested true, delivered."""
    acme, h1, clock = scene.acme, scene.h1, scene.clock
    # Given attempt 1 of X assigned to h1, and a cancel answered 202
    task, lease = scene.running(h1, start=False)
    pending = acme.cancel(task["id"], expect=202)
    assert (pending["cancellation"]["state"], pending["cancellation"]["attempt"]) == ("pending", 1)
    events = acme.event_types(task["id"])
    clock.advance(2)

    # When h1 starts attempt 1
    answer = h1.start(lease)

    # Then it is dispatched and told about the cancellation, which is now delivered
    assert answer["status"] == "dispatched"
    assert answer["cancel_requested"] is True
    after = acme.get_task(task["id"])
    assert after["status"] == "dispatched"
    assert after["cancellation"]["delivered_at"] is not None
    if clock.manual:
        assert after["cancellation"]["delivered_at"] == wire(clock.now())
    assert acme.event_types(task["id"]) == events + ["dispatched", "cancellation_delivered"]
    # And it stays dispatched until h1 reports (or the lease expires)
    clock.advance(2)
    assert acme.get_task(task["id"])["status"] == "dispatched"


# ---------------------------------------------------------------------------------------
# RESULT


@pytest.mark.req("RESULT/s1")
def test_a_failed_report_ends_the_task_without_requeueing(scene):
    """A failed report ends attempt and task failed (attempts left or not), frees the device, records the result."""
    acme, h1 = scene.acme, scene.h1
    # Given task X with max_attempts 3 and attempt 1 dispatched on h1/emulator-5554
    task, lease = scene.running(h1, max_attempts=3)

    # When h1 reports failed
    steps = [{"id": "open", "status": "failed", "reason": "launch timed out"}]
    ended = h1.report(lease, "failed", metadata={"error": "launch timed out"}, steps=steps)

    # Then X is failed, not requeued, and the device is free
    assert ended["status"] == "failed"
    assert ended["attempts"][0]["outcome"] == "failed"
    assert ended["attempts"][0]["ended_at"] == ended["result"]["recorded_at"]
    assert {k: ended["result"][k] for k in ("status", "attempt", "reason", "metadata", "steps")} == {
        "status": "failed",
        "attempt": 1,
        "reason": "reported",
        "metadata": {"error": "launch timed out"},
        "steps": steps,
    }
    assert device_of(h1, lease.device)["reservation"] is None
    last = acme.history(task["id"])[-1]
    assert (last["type"], last["data"]["status"], last["data"]["reason"]) == ("ended", "failed", "reported")
    h1.claim(expect=204)


@pytest.mark.req("RESULT/s2")
def test_reporting_cancelled_without_a_pending_cancellation_is_a_conflict(scene):
    """cancelled without a pending cancellation is 409 no_cancellation_requested and changes nothing."""
    acme, h1 = scene.acme, scene.h1
    # Given attempt 1 of X dispatched on h1 with cancellation null
    task, lease = scene.running(h1)
    before = acme.get_task(task["id"])

    # When h1 reports cancelled
    h1.report(lease, "cancelled", expect=(409, "no_cancellation_requested"))

    # Then X is still dispatched with the same lease, and the device is still reserved
    assert acme.get_task(task["id"]) == before
    assert device_of(h1, lease.device)["reservation"] == {"task_id": task["id"], "attempt": 1}


@pytest.mark.req("RESULT/s3")
def test_a_different_report_for_an_ended_attempt_is_a_conflict(scene):
    """Another status, other metadata or other steps for a reported attempt: 409 result_conflict."""
    acme, h1 = scene.acme, scene.h1
    # Given h1 ended attempt 1 of X with done and metadata {"a": 1}
    task, lease = scene.running(h1)
    recorded = h1.report(lease, "done", metadata={"a": 1})

    # When h1 reports failed, or done with other metadata, or done with steps
    h1.report(lease, "failed", metadata={"a": 1}, expect=(409, "result_conflict"))
    h1.report(lease, "done", metadata={"a": 2}, expect=(409, "result_conflict"))
    h1.report(lease, "done", metadata={"a": 1}, steps=steps_all(PLAN), expect=(409, "result_conflict"))

    # Then X is unchanged, and the identical report still answers 200
    assert acme.get_task(task["id"]) == recorded
    assert h1.report(lease, "done", metadata={"a": 1}) == recorded


@pytest.mark.req("RESULT")
def test_a_report_is_accepted_from_an_assigned_attempt(scene):
    """A result is accepted before start: the attempt ends with dispatched_at still null."""
    h1 = scene.h1
    _task, lease = scene.running(h1, start=False)
    ended = h1.report(lease, "failed", metadata={"error": "could not start"})
    assert ended["status"] == "failed"
    assert ended["attempts"][0]["dispatched_at"] is None
    assert ended["attempts"][0]["outcome"] == "failed"


@pytest.mark.req("RESULT")
def test_steps_must_name_every_planned_step_in_order(scene):
    """A result whose steps miss a planned step, or list them out of order, is 400."""
    acme, h1 = scene.acme, scene.h1
    task, lease = scene.running(h1, plan=PLAN_ABC)
    before = acme.get_task(task["id"])
    h1.report(lease, "done", steps=steps_all(PLAN_ABC)[:2], expect=(400, "invalid_request"))
    h1.report(lease, "done", steps=list(reversed(steps_all(PLAN_ABC))), expect=(400, "invalid_request"))
    assert acme.get_task(task["id"]) == before


# ---------------------------------------------------------------------------------------
# LEASE-CHECKS


@pytest.mark.req("LEASE-CHECKS/s1")
def test_lease_checks_run_in_order(scene):
    """foreign, unknown, replaced, ended, expired: the first check that fails names the 409."""
    acme, h1, h2, clock = scene.acme, scene.h1, scene.h2, scene.clock
    # Given X: attempt 1 (h1, L1) expired, attempt 2 (h2, L2) active;
    #       Y: attempt 1 (h1, L1y) ended by a done report, its old lease_expires_at passed;
    #       Z: attempt 1 (h1, L1z) expired and requeued, no attempt 2
    h1.register(scene.device("emulator-5554"), scene.device("emulator-5556"), scene.device("emulator-5558"))
    x, y, z = (scene.submit(max_attempts=3) for _ in range(3))
    lx, ly, lz = (h1.claim(lease_seconds=clock.short_lease) for _ in range(3))
    assert [lx.task_id, ly.task_id, lz.task_id] == [x["id"], y["id"], z["id"]]
    h1.report(ly, "done")
    clock.run_out(lx)
    h2.register(scene.device("emulator-5570"))
    l2 = h2.claim()
    assert (l2.task_id, l2.attempt) == (x["id"], 2)
    h2.start(l2)
    # (the hosts read first: Z's `waiting` depends on whether h1 is online, and h1's requests
    # below, refused or not, show it is)
    hosts_before = (as_recorded(h1.read()), as_recorded(h2.read()))
    before = [acme.get_task(t["id"]) for t in (x, y, z)]

    for verb in ("start", "renew"):
        act = getattr(h1, verb)
        # When h2 acts on X's attempt 1 with L2: foreign, although unknown, replaced and expired apply too
        getattr(h2, verb)(lx, lease_id=l2.lease_id, expect=(409, "lease_foreign"))
        # And h1 on X's attempt 1 with L2: unknown; with L1: replaced
        act(lx, lease_id=l2.lease_id, expect=(409, "lease_unknown"))
        act(lx, expect=(409, "lease_replaced"))
        # And h1 on Y's ended attempt: ended; on Z's expired attempt: expired
        act(ly, expect=(409, "lease_ended"))
        act(lz, expect=(409, "lease_expired"))
    # The result endpoint runs the same checks (an ended attempt is RESULT's business)
    h2.report(lx, "done", lease_id=l2.lease_id, expect=(409, "lease_foreign"))
    h1.report(lx, "done", lease_id=l2.lease_id, expect=(409, "lease_unknown"))
    h1.report(lx, "done", expect=(409, "lease_replaced"))
    h1.report(lz, "done", expect=(409, "lease_expired"))

    # Then none of these requests changed any attempt, lease, device or status
    assert [acme.get_task(t["id"]) for t in (x, y, z)] == before
    assert (as_recorded(h1.read()), as_recorded(h2.read())) == hosts_before


@pytest.mark.req("LEASE-CHECKS/s2")
def test_an_unknown_task_or_attempt_is_not_found(scene):
    """Unknown task, attempt 3 of a task with two, attempt 0: 404; a body without lease_id: 400."""
    h1, h2, clock = scene.h1, scene.h2, scene.clock
    # Given task X with attempts 1 and 2, held by h1 and h2
    task, lease1 = scene.running(h1, lease_seconds=clock.short_lease)
    clock.run_out(lease1)
    h2.register(scene.device("emulator-5570"))
    lease2 = h2.claim()
    assert (lease2.task_id, lease2.attempt) == (task["id"], 2)

    # When h2 renews an unknown task, or X's attempt 3, or X's attempt 0
    h2.caller.renew(f"t_nope{scene.tag}", 1, lease2.lease_id, expect=(404, "not_found"))
    h2.renew(lease2, attempt=3, expect=(404, "not_found"))
    h2.caller.renew(task["id"], 0, lease2.lease_id, expect=(404, "not_found"))
    # And h2 starts attempt 2 without a lease_id
    h2.start(lease2, lease_id=None, expect=(400, "invalid_request"))
    assert scene.task(task["id"])["status"] == "assigned"


@pytest.mark.req("LEASE-CHECKS/s3")
def test_an_attempt_number_not_written_canonically_names_no_attempt(scene):
    """Attempt 01, +1 or 1.0 in a path is 404 for start, renew and result, and changes nothing."""
    acme, h1 = scene.acme, scene.h1
    # Given attempt 1 of X dispatched on h1
    task, lease = scene.running(h1)
    before = acme.get_task(task["id"])
    body = {"lease_id": lease.lease_id}
    # When h1 names it 01, +1 or 1.0
    for spelled in ("01", "+1", "1.0", "001"):
        base = f"/v1/tasks/{task['id']}/attempts/{spelled}"
        h1.caller.call("POST", f"{base}/renew", body, expect=(404, "not_found"))
        h1.caller.call("POST", f"{base}/start", body, expect=(404, "not_found"))
        h1.caller.call("POST", f"{base}/result", {**body, "status": "done"}, expect=(404, "not_found"))
    # Then nothing changed, and attempt 1 written as 1 still renews
    assert acme.get_task(task["id"]) == before
    h1.renew(lease)
    assert acme.get_task(task["id"])["attempts"][0]["renewals"] == 1


# ---------------------------------------------------------------------------------------
# CANCELLATION-RECORD


@pytest.mark.req("CANCELLATION-RECORD/s1")
def test_delivered_at_is_set_by_the_first_renewal_that_carries_it(scene):
    """Two renewals carry the cancellation; delivered_at is the first one's time, with one event."""
    acme, h1, clock = scene.acme, scene.h1, scene.clock
    # Given attempt 1 dispatched on h1 with a pending, undelivered cancellation
    task, lease = scene.running(h1)
    acme.cancel(task["id"], expect=202)
    assert acme.get_task(task["id"])["cancellation"]["delivered_at"] is None

    # When h1 renews at T1 and again at T2
    clock.advance(3)
    first = h1.renew(lease)
    t1 = clock.now() if clock.manual else None
    delivered = acme.get_task(task["id"])["cancellation"]["delivered_at"]
    clock.advance(3)
    second = h1.renew(lease)

    # Then both carry the cancellation, and delivered_at stays T1
    assert first["cancel_requested"] is True and second["cancel_requested"] is True
    assert delivered is not None
    if t1 is not None:  # the manual clock
        assert delivered == wire(t1)
    assert acme.get_task(task["id"])["cancellation"]["delivered_at"] == delivered
    assert acme.event_types(task["id"]).count("cancellation_delivered") == 1


@pytest.mark.req("CANCELLATION-RECORD/s2")
@pytest.mark.parametrize("status", ["done", "failed"])
def test_a_pending_cancellation_overtaken_by_the_end_becomes_unfulfilled(scene, status):
    """done or failed while a cancellation is pending: accepted, the cancellation is unfulfilled."""
    acme, h1 = scene.acme, scene.h1
    # Given h1 finished attempt 1, and a cancellation was requested after its last renewal
    task, lease = scene.running(h1)
    h1.renew(lease)
    requested = acme.cancel(task["id"], "too late", expect=202)["cancellation"]

    # When h1 reports done (or failed)
    ended = h1.report(lease, status)

    # Then the task ends with that status and the cancellation is unfulfilled, otherwise kept
    assert ended["status"] == status
    assert ended["result"]["reason"] == "reported"
    cancellation = ended["cancellation"]
    assert cancellation["state"] == "unfulfilled"
    assert cancellation["requested_at"] == requested["requested_at"]
    assert cancellation["reason"] == "too late"
    assert cancellation["delivered_at"] is None
    # And a further cancel is task_terminal
    acme.cancel(task["id"], expect=(409, "task_terminal"))
    assert acme.get_task(task["id"]) == ended
