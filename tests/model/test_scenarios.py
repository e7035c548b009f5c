"""One kernel test per requirement scenario (specs/requirements), tagged with its id.

Each test drives the pure kernel through `World`, which also checks every invariant after
every command and that a rejected command changed nothing.
"""

from __future__ import annotations

import asyncio

import pytest

from amc.core import kernel
from amc.core.commands import RenewLease, SubmitTask
from amc.core.errors import Code
from amc.core.events import CancellationRequested, TaskRequeued
from amc.core.records import Plan, Requirements, Stage, Step
from amc.service import ManualClock, MemoryService, SystemClock
from tests.model.world import LEASE_MS, PLAN, START, World, code, outcomes

req = pytest.mark.req


def dispatched(world: World, **submit) -> tuple[str, kernel.Assignment]:
    """A task running on h1/d1."""
    if "h1" not in world.state.hosts:
        world.register("h1", "d1")
    task_id = world.submit(**submit)
    assignment = world.claim("h1")
    assert assignment is not None and assignment.task_id == task_id
    assert world.start(assignment).accepted
    return task_id, assignment


# -- seed 000: cancellation ---------------------------------------------------------------


@req("CANCEL-QUEUED/s1")
def test_cancel_queued_task_ends_it_at_once_and_it_is_never_assigned():
    world = World()
    world.register("h1", "d1")
    task_id = world.submit()
    decision = world.cancel(task_id, reason="not needed")
    assert decision.reply == kernel.CancelAccepted(task_id, pending=False)
    task = world.task(task_id)
    assert task.status == "cancelled"
    assert task.result.reason == "cancelled_while_queued" and task.result.attempt is None
    assert task.cancellation.state == "completed" and task.cancellation.attempt is None
    assert world.claim("h1") is None
    world.advance(10 * LEASE_MS)
    assert world.task(task_id).attempts == ()


@req("CANCEL-INFLIGHT/s1")
def test_cancel_of_dispatched_task_is_recorded_against_its_attempt_and_survives_restart():
    world = World()
    task_id, _ = dispatched(world)
    decision = world.cancel(task_id)
    assert decision.reply == kernel.CancelAccepted(task_id, pending=True)
    task = world.task(task_id)
    assert task.status == "dispatched"
    assert (task.cancellation.state, task.cancellation.attempt) == ("pending", 1)
    world.restart()
    assert world.task(task_id).cancellation.state == "pending"
    assert world.task(task_id).status == "dispatched"


@req("CANCEL-INFLIGHT/s2")
def test_owning_host_sees_pending_cancellation_at_next_renewal():
    world = World()
    task_id, assignment = dispatched(world)
    assert world.renew(assignment).reply.cancel_requested is False
    world.cancel(task_id)
    world.advance(1_000)
    first = world.renew(assignment)
    assert first.reply.cancel_requested is True
    assert world.task(task_id).cancellation.delivered_at == world.now
    world.advance(1_000)
    assert world.renew(assignment).reply.cancel_requested is True  # every later renewal says so too


@req("CANCEL-INFLIGHT/s3")
def test_cancellation_is_not_instantaneous():
    world = World()
    task_id, assignment = dispatched(world)
    world.cancel(task_id)
    world.advance(LEASE_MS - 1)
    assert world.task(task_id).status == "dispatched"
    assert world.renew(assignment).accepted
    assert world.task(task_id).status == "dispatched"  # only the host's report ends it


@req("CANCEL-OUTCOME/s1")
def test_execution_stopped_by_cancellation_ends_cancelled_and_frees_the_device():
    world = World()
    task_id, assignment = dispatched(world)
    world.cancel(task_id)
    world.renew(assignment)
    steps = outcomes(("open", "completed"), ("look", "not_started"))
    assert world.report(assignment, "cancelled", steps=steps).accepted
    task = world.task(task_id)
    assert task.status == "cancelled" and task.result.reason == "reported"
    assert task.cancellation.state == "completed"
    assert task.attempts[0].outcome == "cancelled"
    assert world.device("h1", "d1").reservation is None


@req("CANCEL-OUTCOME/s2")
def test_execution_stopped_by_lease_loss_ends_failed_not_cancelled():
    world = World()
    task_id, assignment = dispatched(world)
    # Without a cancellation request the host cannot claim "cancelled" ...
    assert code(world.report(assignment, "cancelled")) is Code.no_cancellation_requested
    # ... and a failure report makes the task failed.
    assert world.report(assignment, "failed", metadata={"stop": "lease_lost"}).accepted
    assert world.task(task_id).status == "failed"


@req("CANCEL-IDEMPOTENT/s1")
def test_cancel_twice_records_one_request_and_answers_the_same():
    world = World()
    task_id, _ = dispatched(world)
    first = world.cancel(task_id)
    second = world.cancel(task_id)
    assert first.reply == second.reply
    assert second.events == ()
    assert sum(isinstance(e, CancellationRequested) for e in world.log) == 1


@req("CANCEL-IDEMPOTENT/s2")
def test_cancel_an_already_cancelled_task_succeeds_without_change():
    world = World()
    task_id = world.submit()
    world.cancel(task_id)
    again = world.cancel(task_id)
    assert again.accepted and again.events == ()
    assert again.reply == kernel.CancelAccepted(task_id, pending=False)


@req("CANCEL-TERMINAL/s1")
@pytest.mark.parametrize("status", ["done", "failed"])
def test_cancel_of_done_or_failed_task_is_a_conflict_and_changes_nothing(status):
    world = World()
    task_id, assignment = dispatched(world)
    world.report(assignment, status, metadata={"k": "v"})
    result = world.task(task_id).result
    assert code(world.cancel(task_id)) is Code.task_terminal
    assert world.task(task_id).result == result and world.task(task_id).status == status


@req("CANCEL-EXPIRY/s1")
@pytest.mark.parametrize("started", [True, False], ids=["dispatched", "assigned"])
def test_expiry_with_pending_cancellation_cancels_instead_of_requeueing(started):
    world = World()
    world.register("h1", "d1", "d2")
    task_id = world.submit(max_attempts=3)
    assignment = world.claim()
    if started:
        world.start(assignment)
    world.cancel(task_id)
    world.advance(LEASE_MS)
    task = world.task(task_id)
    assert task.status == "cancelled"
    assert task.result.reason == "lease_expired_with_cancellation"
    assert task.cancellation.state == "completed"
    assert task.attempts[0].outcome == "expired"
    assert world.device("h1", "d1").reservation is None
    assert world.claim("h1") is None
    assert not any(isinstance(e, TaskRequeued) for e in world.log)


# -- seed 001: host agent protocol ----------------------------------------------------------


@req("LEASE-RENEW/s1")
def test_renewal_extends_the_lease_and_changes_nothing_else():
    world = World()
    task_id, assignment = dispatched(world)
    world.advance(10_000)
    before = world.task(task_id).attempts[0]
    decision = world.renew(assignment)
    after = world.task(task_id).attempts[0]
    assert decision.reply.lease_expires_at == world.now + LEASE_MS == after.lease_expires_at
    assert (after.number, after.device, after.host_id, after.lease_id) == (
        before.number,
        before.device,
        before.host_id,
        before.lease_id,
    )
    assert after.renewals == before.renewals + 1
    assert world.task(task_id).status == "dispatched"


@req("LEASE-RENEW/s2")
def test_stale_or_foreign_renewal_is_a_conflict_and_revives_nothing():
    world = World()
    world.register("h2", "e1")
    task_id, assignment = dispatched(world, max_attempts=2)
    assert code(world.renew(assignment, host="h2")) is Code.lease_foreign
    world.advance(LEASE_MS)  # expired and requeued
    assert code(world.renew(assignment)) is Code.lease_expired
    newer = world.claim("h2")
    assert code(world.renew(assignment)) is Code.lease_replaced
    assert world.task(task_id).active_attempt.number == newer.attempt == 2


@req("RESULT-IDEMPOTENT/s1")
def test_report_done_records_the_result_and_frees_the_device():
    world = World()
    task_id, assignment = dispatched(world)
    world.report(assignment, "done", metadata={"screens": 2})
    task = world.task(task_id)
    assert task.status == "done"
    assert (task.result.status, task.result.reason, task.result.metadata) == ("done", "reported", {"screens": 2})
    assert world.device("h1", "d1").reservation is None


@req("RESULT-IDEMPOTENT/s2")
def test_report_cancelled_after_observed_cancellation():
    world = World()
    task_id, assignment = dispatched(world)
    world.cancel(task_id)
    assert world.renew(assignment).reply.cancel_requested
    assert world.report(assignment, "cancelled").accepted
    assert world.task(task_id).status == "cancelled"
    assert world.device("h1", "d1").reservation is None


@req("RESULT-IDEMPOTENT/s3")
def test_repeating_an_identical_report_returns_the_recorded_outcome():
    world = World()
    task_id, assignment = dispatched(world)
    steps = outcomes(("open", "completed"), ("look", "completed"))
    world.report(assignment, "done", metadata={"a": 1}, steps=steps)
    recorded = world.task(task_id)
    world.advance(5_000)
    again = world.report(assignment, "done", metadata={"a": 1}, steps=steps)
    assert again.reply == kernel.ResultRecorded(task_id, repeated=True)
    assert again.events == ()
    assert world.task(task_id) == recorded
    assert len(world.task(task_id).attempts) == 1


@req("RESULT-IDEMPOTENT/s4")
def test_stale_attempt_report_after_requeue_is_rejected():
    world = World()
    world.register("h2", "e1")
    task_id, stale = dispatched(world)
    world.advance(LEASE_MS)
    newer = world.claim("h2")
    assert code(world.report(stale, "done")) is Code.lease_replaced
    task = world.task(task_id)
    assert task.status == "assigned" and task.active_attempt.number == newer.attempt


# -- specs/protocol.md Part A rules ---------------------------------------------------------------


@req("SUBMIT/s1")
def test_submit_creates_a_queued_task_with_defaults():
    world = World()
    task_id = world.submit(tenant="acme")
    task = world.task(task_id)
    assert (task.status, task.priority, task.max_attempts, task.labels) == ("queued", 0, 3, {})
    assert task.attempts == () and task.cancellation is None and task.result is None
    assert task.created_at == task.updated_at == world.now


@req("SUBMIT-IDEMPOTENT/s1")
def test_same_key_same_submission_returns_the_existing_task():
    world = World()
    first = world.run(SubmitTask(now=0, task_id="x1", tenant="acme", plan=PLAN, idempotency_key="k"))
    again = world.run(SubmitTask(now=0, task_id="x2", tenant="acme", plan=PLAN, idempotency_key="k"))
    assert again.reply == kernel.Submitted("x1", created=False)
    assert again.events == () and "x2" not in world.state.tasks
    assert first.reply.created


@req("SUBMIT-IDEMPOTENT/s2")
def test_same_key_different_submission_is_a_conflict():
    world = World()
    world.run(SubmitTask(now=0, task_id="x1", tenant="acme", plan=PLAN, idempotency_key="k"))
    other = world.run(SubmitTask(now=0, task_id="x2", tenant="acme", plan=PLAN, priority=9, idempotency_key="k"))
    assert code(other) is Code.idempotency_conflict


@req("SUBMIT-IDEMPOTENT/s3")
def test_idempotency_keys_are_scoped_to_the_tenant():
    world = World()
    world.run(SubmitTask(now=0, task_id="x1", tenant="acme", plan=PLAN, idempotency_key="k"))
    other = world.run(SubmitTask(now=0, task_id="x2", tenant="globex", plan=PLAN, idempotency_key="k"))
    assert other.reply == kernel.Submitted("x2", created=True)


@req("CLAIM/s1")
def test_claim_takes_highest_priority_first_then_oldest_even_after_requeue():
    world = World()
    world.register("h1", "d1")
    old_low = world.submit(priority=0)
    high = world.submit(priority=5)
    young_low = world.submit(priority=0)
    assert world.claim().task_id == high
    world.advance(LEASE_MS)  # high expires and is requeued: it keeps its place
    assert world.claim().task_id == high
    world.report(world.claim("h1") or _current(world, high), "done")
    assert world.claim().task_id == old_low
    assert young_low in world.state.tasks


def _current(world: World, task_id: str) -> kernel.Assignment:
    attempt = world.task(task_id).active_attempt
    return kernel.Assignment(
        task_id=task_id,
        attempt=attempt.number,
        lease_id=attempt.lease_id,
        lease_expires_at=attempt.lease_expires_at,
        lease_ms=attempt.lease_ms,
        device=attempt.device,
        plan=world.task(task_id).plan,
    )


@req("CLAIM/s2")
def test_requirements_match_serial_and_attributes_first_device_in_serial_order():
    world = World()
    from amc.core.commands import RegisterHost
    from amc.core.records import DeviceSpec

    world.run(
        RegisterHost(
            now=0,
            host_id="h1",
            devices=(
                DeviceSpec(serial="c", attributes={"model": "Pixel 7"}),
                DeviceSpec(serial="a", attributes={"model": "Pixel 8"}),
                DeviceSpec(serial="b", attributes={"model": "Pixel 7"}),
            ),
        )
    )
    pinned = world.submit(requirements=Requirements(serial="c"))
    pixel7 = world.submit(requirements=Requirements(attributes={"model": "Pixel 7"}))
    nowhere = world.submit(requirements=Requirements(attributes={"model": "iPhone"}))
    first = world.claim()
    assert (first.task_id, first.device) == (pinned, "c")
    second = world.claim()
    assert (second.task_id, second.device) == (pixel7, "b")  # b before c, and c is taken
    assert world.claim() is None
    assert world.task(nowhere).status == "queued"


@req("CLAIM/s3")
def test_reserved_and_offline_devices_are_never_offered():
    world = World()
    world.register("h1", "d1")
    a = world.submit()
    b = world.submit()
    assert world.claim().task_id == a
    assert world.claim() is None  # d1 is reserved: one attempt per device
    world.register("h1")  # d1 disappears while reserved; d1 is the only listed default
    world.register("h1", "d2")
    assert world.device("h1", "d1").online is False
    assignment = world.claim()
    assert (assignment.task_id, assignment.device) == (b, "d2")


@req("CLAIM/s4")
def test_unregistered_host_or_no_match_gets_no_assignment():
    world = World()
    world.submit(requirements=Requirements(serial="zzz"))
    assert world.claim("never-registered") is None
    world.register("h1", "d1")
    assert world.claim("h1") is None


@req("CLAIM/s5")
def test_devices_filter_restricts_the_candidates():
    world = World()
    world.register("h1", "d1", "d2")
    world.submit()
    assert world.claim(devices=("nope",)) is None
    assert world.claim(devices=("d2",)).device == "d2"


@req("ATTEMPTS/s1")
def test_expired_attempt_is_requeued_while_attempts_remain():
    world = World()
    task_id, _ = dispatched(world, max_attempts=2)
    world.advance(LEASE_MS)
    task = world.task(task_id)
    assert task.status == "queued" and task.attempts[0].outcome == "expired"
    assert task.attempts[0].ended_at == task.attempts[0].lease_expires_at
    assert world.claim().attempt == 2


@req("ATTEMPTS/s2")
def test_last_allowed_attempt_expiring_fails_the_task():
    world = World()
    task_id, _ = dispatched(world, max_attempts=1)
    world.advance(LEASE_MS)
    task = world.task(task_id)
    assert task.status == "failed"
    assert (task.result.reason, task.result.attempt) == ("attempts_exhausted", 1)


@req("EXPIRY/s1")
def test_lease_is_expired_exactly_at_its_expiry_time():
    world = World()
    task_id, assignment = dispatched(world)
    world.advance(LEASE_MS - 1)
    assert world.renew(assignment).accepted  # one millisecond before: alive
    world.advance(LEASE_MS)  # exactly at lease_expires_at
    assert world.task(task_id).attempts[0].outcome == "expired"
    assert code(world.renew(assignment)) is Code.lease_expired


@req("EXPIRY/s2")
def test_expiry_is_applied_before_the_command_that_could_observe_it():
    world = World()
    task_id, assignment = dispatched(world)
    renewal = RenewLease(
        now=world.now + LEASE_MS, host_id="h1", task_id=task_id, attempt=1, lease_id=assignment.lease_id
    )
    decision = kernel.execute(world.state, renewal)  # no tick first: the renewal itself must expire it
    assert code(decision) is Code.lease_expired
    assert [type(e).__name__ for e in decision.events] == ["LeaseExpired", "TaskRequeued"]
    assert world.task(task_id).status == "queued"


@req("LEASE-CHECKS/s1")
def test_lease_checks_run_in_protocol_order():
    world = World()
    world.register("h2", "e1")
    _task_id, first = dispatched(world, max_attempts=3)
    # foreign beats unknown
    assert code(world.renew(first, host="h2", lease_id="bogus")) is Code.lease_foreign
    # unknown beats replaced: expire attempt 1 and let h1 claim attempt 2 ...
    world.advance(LEASE_MS)
    world.register("h2")  # h2 has no devices now, so h1 gets attempt 2
    second = world.claim("h1")
    assert second.attempt == 2
    assert code(world.renew(first, lease_id="bogus")) is Code.lease_unknown
    # replaced beats expired
    assert code(world.renew(first)) is Code.lease_replaced
    # ended beats expired: report, then let time pass the old expiry
    world.report(second, "done")
    world.advance(2 * LEASE_MS)
    assert code(world.renew(second)) is Code.lease_ended
    assert code(world.start(second)) is Code.lease_ended


@req("LEASE-CHECKS/s2")
def test_unknown_task_or_attempt_number_is_not_found():
    world = World()
    _task_id, assignment = dispatched(world)
    missing_task = kernel.Assignment(**{**_fields(assignment), "task_id": "nope"})
    missing_attempt = kernel.Assignment(**{**_fields(assignment), "attempt": 7})
    assert code(world.renew(missing_task, host="h1")) is Code.not_found
    assert code(world.renew(missing_attempt, host="h1")) is Code.not_found


def _fields(a: kernel.Assignment) -> dict:
    import attrs

    return attrs.asdict(a, recurse=False)


@req("START/s1")
def test_start_dispatches_and_a_repeat_records_nothing_new():
    world = World()
    world.register("h1", "d1")
    task_id = world.submit()
    assignment = world.claim()
    first = world.start(assignment)
    assert first.reply.status == "dispatched" and world.task(task_id).status == "dispatched"
    dispatched_at = world.task(task_id).attempts[0].dispatched_at
    world.advance(1_000)
    again = world.start(assignment)
    assert again.accepted and again.reply.status == "dispatched"
    assert [type(e).__name__ for e in again.events] == ["LeaseExtended"]
    attempt = world.task(task_id).attempts[0]
    assert attempt.dispatched_at == dispatched_at and attempt.renewals == 0
    assert attempt.lease_expires_at == world.now + LEASE_MS


@req("START/s2")
def test_start_with_pending_cancellation_dispatches_and_says_so():
    world = World()
    world.register("h1", "d1")
    task_id = world.submit()
    assignment = world.claim()
    assert world.cancel(task_id).reply.pending  # cancel while assigned: pending
    decision = world.start(assignment)
    assert decision.reply.status == "dispatched" and decision.reply.cancel_requested
    assert world.task(task_id).cancellation.delivered_at == world.now


@req("RESULT/s1")
def test_report_ends_attempt_frees_device_records_result():
    world = World()
    task_id, assignment = dispatched(world)
    steps = outcomes(("open", "completed"), ("look", "failed"))
    world.report(assignment, "failed", metadata={"why": "crash"}, steps=steps)
    task = world.task(task_id)
    assert task.attempts[0].outcome == "failed" and task.attempts[0].ended_at == world.now
    assert task.result.steps == steps and task.result.recorded_at == world.now
    assert world.device("h1", "d1").reservation is None


@req("RESULT/s2")
def test_reporting_cancelled_without_a_pending_cancellation_is_a_conflict():
    world = World()
    task_id, assignment = dispatched(world)
    assert code(world.report(assignment, "cancelled")) is Code.no_cancellation_requested
    assert world.task(task_id).status == "dispatched"


@req("RESULT/s3")
def test_a_different_report_for_an_ended_attempt_is_a_conflict():
    world = World()
    _, assignment = dispatched(world)
    world.report(assignment, "done", metadata={"a": 1})
    assert code(world.report(assignment, "done", metadata={"a": 2})) is Code.result_conflict
    assert code(world.report(assignment, "failed")) is Code.result_conflict


@req("RESULT/s1", "AGENT-STEPS/s1")
@pytest.mark.parametrize(
    ("reported", "where"),
    [
        (("look", "open"), "position 0: expected step 'open', got 'look'"),
        (("open", "open"), "position 1: expected step 'look', got 'open'"),
        (("open",), "position 1: step 'look' is missing"),
        ((), "position 0: step 'open' is missing"),
        (("open", "look", "extra"), "position 2: step 'extra' is not planned"),
        (("open", "look", "extra", "more"), "position 2: step 'extra' is not planned"),
    ],
)
def test_a_result_whose_steps_are_not_the_plan_is_refused_naming_the_first_wrong_step(reported, where):
    world = World()
    task_id, assignment = dispatched(world)
    refused = world.report(assignment, "done", steps=outcomes(*((step_id, "completed") for step_id in reported)))
    assert code(refused) is Code.invalid_request
    assert refused.rejection.detail == (
        f"steps: must name every planned step once, in plan order (2 planned, first difference at {where})"
    )
    assert world.task(task_id).status == "dispatched"


@req("CANCELLATION-RECORD/s1")
def test_delivered_at_is_set_once_by_the_first_response_that_carries_it():
    world = World()
    task_id, assignment = dispatched(world)
    world.cancel(task_id)
    assert world.task(task_id).cancellation.delivered_at is None
    world.advance(1_000)
    world.renew(assignment)
    delivered = world.task(task_id).cancellation.delivered_at
    world.advance(1_000)
    world.renew(assignment)
    assert world.task(task_id).cancellation.delivered_at == delivered == world.now - 1_000


@req("CANCELLATION-RECORD/s2")
@pytest.mark.parametrize("status", ["done", "failed"])
def test_pending_cancellation_overtaken_by_done_or_failed_is_unfulfilled(status):
    world = World()
    task_id, assignment = dispatched(world)
    world.cancel(task_id)
    world.report(assignment, status)
    task = world.task(task_id)
    assert task.status == status and task.cancellation.state == "unfulfilled"


@req("INVENTORY/s1")
def test_registration_replaces_the_inventory():
    world = World()
    world.register("h1", "d1", "d2", attributes={"model": "A"})
    world.register("h1", "d2", "d3", attributes={"model": "B"})
    host = world.state.hosts["h1"]
    assert [(d.serial, d.attributes, d.online) for d in host.devices] == [
        ("d2", {"model": "B"}, True),
        ("d3", {"model": "B"}, True),
    ]
    assert host.updated_at == world.now


@req("INVENTORY/s2")
def test_reserved_device_that_disappears_stays_offline_until_its_attempt_ends():
    world = World()
    task_id, assignment = dispatched(world)
    world.register("h1", "d9")
    device = world.device("h1", "d1")
    assert device.online is False and device.reservation.task_id == task_id
    assert world.renew(assignment).accepted
    world.report(assignment, "done")
    assert world.device("h1", "d1") is None
    world.register("h1", "d1", "d9")  # it comes back: online and free
    assert world.device("h1", "d1").online and world.device("h1", "d1").reservation is None


@req("TENANCY/s1")
def test_a_client_cannot_see_or_cancel_another_tenants_task():
    world = World()
    task_id = world.submit(tenant="acme")
    assert code(world.cancel(task_id, tenant="globex")) is Code.not_found
    assert kernel.visible_task(world.state, task_id, "globex") is None
    assert world.task(task_id).status == "queued"


@req("TENANCY/s2")
def test_an_admin_acts_across_tenants():
    world = World()
    task_id = world.submit(tenant="acme")
    assert kernel.visible_task(world.state, task_id, None) is not None
    assert world.cancel(task_id, tenant=None).accepted
    assert world.task(task_id).status == "cancelled"


@req("HISTORY/s1")
def test_history_lists_every_recorded_event_of_a_task_in_order():
    service = MemoryService(clock=ManualClock(START))
    from amc.core.commands import CancelTask, ClaimTask, RegisterHost, RenewLease, StartAttempt
    from amc.core.records import DeviceSpec

    async def run():
        await service.execute(RegisterHost(now=0, host_id="h1", devices=(DeviceSpec(serial="d1"),)))
        await service.execute(SubmitTask(now=0, task_id="t1", tenant="acme", plan=PLAN, max_attempts=1))
        a = (await service.execute(ClaimTask(now=0, host_id="h1", lease_id="L", lease_ms=LEASE_MS))).reply
        await service.execute(StartAttempt(now=0, host_id="h1", task_id="t1", attempt=1, lease_id="L"))
        await service.execute(RenewLease(now=0, host_id="h1", task_id="t1", attempt=1, lease_id="L"))
        await service.execute(CancelTask(now=0, task_id="t1", tenant="acme"))
        await service.execute(RenewLease(now=0, host_id="h1", task_id="t1", attempt=1, lease_id="L"))
        await service.advance_clock(LEASE_MS)
        return a

    asyncio.run(run())
    entries = service.history("t1")
    assert [e.type for e in entries] == [
        "submitted",
        "assigned",
        "dispatched",
        "cancellation_requested",
        "cancellation_delivered",
        "lease_expired",
        "ended",
    ]
    assert [e.seq for e in entries] == list(range(1, 8))
    assert entries[-1].data == {"status": "cancelled", "reason": "lease_expired_with_cancellation", "attempt": 1}


@req("CLOCK/s1")
def test_the_system_clock_never_goes_backwards():
    far_future = 4_102_444_800_000  # 2100
    clock = SystemClock(floor=far_future)
    assert clock.now() == far_future  # wall time is earlier: the recorded time wins
    manual = ManualClock(START)
    with pytest.raises(ValueError):
        manual.advance(0)
    assert manual.advance(5) == START + 5


def test_plan_of_stages_exposes_all_steps_in_order():
    plan = Plan(
        stages=(
            Stage(id="s1", steps=(Step(id="a", action="wait"),)),
            Stage(id="s2", steps=(Step(id="b", action="wait"),)),
        )
    )
    assert [s.id for s in plan.all_steps()] == ["a", "b"]
