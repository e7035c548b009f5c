"""The Host Agent's pure decisions (amc.core.agent), by scenario and by Hypothesis."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amc.core.agent import Execution, StopReason
from amc.core.records import Plan, Stage, Step
from tests.model.world import PLAN, World

req = pytest.mark.req

THREE = Plan(steps=tuple(Step(id=f"s{i}", action="wait", args={"seconds": 1}) for i in range(1, 4)))
T0 = 1_000_000
LEASE = 30_000


def run(execution: Execution, steps_done: int, now: int = T0) -> int:
    """Complete `steps_done` steps, one millisecond each; return the time."""
    for _ in range(steps_done):
        step = execution.next_step(now)
        assert step is not None
        now += 1
        execution.step_completed(now)
    return now


@req("LEASE-RENEW/s3")
def test_renewal_carrying_cancellation_stops_before_the_next_step():
    execution = Execution(THREE, lease_expires_at=T0 + LEASE)
    now = run(execution, 1)
    execution.lease_granted(now, now + LEASE, cancel_requested=True)
    assert execution.next_step(now) is None
    assert execution.finished


@req("AGENT-STOP-REASON/s1")
def test_stop_caused_by_cancellation_is_reported_cancelled():
    execution = Execution(THREE, lease_expires_at=T0 + LEASE)
    now = run(execution, 2)
    execution.lease_granted(now, now + LEASE, cancel_requested=True)
    execution.next_step(now)
    report = execution.report()
    assert report.status == "cancelled"
    assert report.metadata["stop_reason"] == "cancelled"


@req("AGENT-STOP-REASON/s2")
@pytest.mark.parametrize("how", ["refused", "expired"])
def test_stop_caused_by_lease_loss_is_reported_failed(how):
    execution = Execution(THREE, lease_expires_at=T0 + LEASE)
    now = run(execution, 1)
    if how == "refused":
        execution.lease_refused("lease_expired")
    else:
        now = T0 + LEASE  # no renewal succeeded before the expiry
    assert execution.next_step(now) is None
    report = execution.report()
    assert report.status == "failed" and report.metadata["stop_reason"] == "lease_lost"


def test_first_stop_reason_wins():
    execution = Execution(THREE, lease_expires_at=T0 + LEASE)
    execution.lease_refused("lease_replaced")
    execution.lease_granted(T0, T0 + LEASE, cancel_requested=True)
    assert execution.stop is StopReason.lease_lost


@req("AGENT-STEPS/s1")
def test_steps_after_a_stop_are_not_started_with_its_reason():
    execution = Execution(THREE, lease_expires_at=T0 + LEASE)
    now = run(execution, 1)
    execution.lease_granted(now, now + LEASE, cancel_requested=True)
    execution.next_step(now)
    steps = execution.report().steps
    assert [(s.id, s.status, s.reason) for s in steps] == [
        ("s1", "completed", None),
        ("s2", "not_started", "cancelled"),
        ("s3", "not_started", "cancelled"),
    ]


@req("AGENT-STEPS/s2")
def test_a_running_step_that_is_stopped_is_interrupted_never_completed_or_cancelled():
    execution = Execution(THREE, lease_expires_at=T0 + LEASE)
    now = run(execution, 1)
    assert execution.next_step(now).id == "s2"
    execution.lease_granted(now + 5, now + LEASE, cancel_requested=True)
    assert execution.should_interrupt
    execution.step_interrupted(now + 6)
    assert execution.next_step(now + 6) is None
    steps = {s.id: s for s in execution.report().steps}
    assert steps["s2"].status == "interrupted" and steps["s2"].reason == "cancelled"
    assert steps["s3"].status == "not_started"
    assert execution.report().status == "cancelled"


def test_a_cancellation_that_arrives_after_the_last_step_does_not_make_it_cancelled():
    execution = Execution(THREE, lease_expires_at=T0 + LEASE)
    now = run(execution, 2)
    execution.next_step(now)
    execution.lease_granted(now, now + LEASE, cancel_requested=True)  # during the last step
    execution.step_completed(now + 1)  # it finished anyway
    assert execution.next_step(now + 1) is None
    assert execution.report().status == "done"


def test_failed_and_refused_steps_stop_the_plan():
    execution = Execution(THREE, lease_expires_at=T0 + LEASE)
    execution.next_step(T0)
    execution.step_refused(T0 + 1, "shell command denied by policy")
    assert execution.next_step(T0 + 1) is None
    report = execution.report()
    assert report.status == "failed"
    assert [s.status for s in report.steps] == ["refused", "not_started", "not_started"]
    assert report.steps[1].reason == "previous_step_refused"


def test_stages_record_a_checkpoint_after_each_finished_stage():
    plan = Plan(stages=(
        Stage(id="login", steps=(Step(id="a", action="wait"), Step(id="b", action="wait"))),
        Stage(id="browse", steps=(Step(id="c", action="wait"),)),
    ))
    execution = Execution(plan, lease_expires_at=T0 + LEASE)
    now = run(execution, 2)
    assert execution.checkpoints == ["login"]
    execution.lease_granted(now, now + LEASE, cancel_requested=True)
    execution.next_step(now)
    assert execution.report().metadata["checkpoints"] == ["login"]


@req("AGENT-RETRY/s1")
def test_a_retried_report_is_identical_and_the_server_answers_with_the_recorded_outcome():
    world = World()
    world.register("h1", "d1")
    task_id = world.submit(plan=PLAN)
    assignment = world.claim()
    world.start(assignment)
    execution = Execution(PLAN, lease_expires_at=assignment.lease_expires_at)
    run(execution, 2, now=world.now)
    first = execution.report()
    world.report(assignment, first.status, metadata=first.metadata, steps=first.steps)
    retry = execution.report()  # the response was lost: send it again
    assert retry == first
    decision = world.report(assignment, retry.status, metadata=retry.metadata, steps=retry.steps)
    assert decision.reply.repeated and world.task(task_id).status == "done"


# -- Hypothesis: whatever happens, the report is truthful --------------------------------------

OBSERVATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("step"), st.sampled_from(("completed", "completed", "failed", "refused", "interrupted"))),
        st.tuples(st.just("renewed"), st.booleans()),
        st.tuples(st.just("refused"), st.just("lease_expired")),
        st.tuples(st.just("wait"), st.integers(1, 40_000)),
        st.tuples(st.just("shutdown"), st.just(None)),
    ),
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(observations=OBSERVATIONS, size=st.integers(1, 5))
def test_every_planned_step_gets_one_truthful_outcome(observations, size):
    plan = Plan(steps=tuple(Step(id=f"s{i}", action="wait") for i in range(size)))
    execution = Execution(plan, lease_expires_at=T0 + LEASE)
    now, started, completed, first_stop = T0, [], [], None
    for kind, value in observations:
        if kind == "step":
            if execution.running is None:
                step = execution.next_step(now)
                if step is None:
                    break
                started.append(step.id)
            now += 1
            {"completed": execution.step_completed, "interrupted": execution.step_interrupted}.get(
                value, lambda t: getattr(execution, f"step_{value}")(t, "boom")
            )(now)
            if value == "completed":
                completed.append(started[-1])
        elif kind == "renewed":
            execution.lease_granted(now, now + LEASE, cancel_requested=value)
        elif kind == "refused":
            execution.lease_refused(value)
        elif kind == "wait":
            now += value
            execution.tick(now)
        else:
            execution.request_stop(StopReason.host_stopping)
        first_stop = first_stop or execution.stop
    if execution.running is not None:
        execution.step_interrupted(now + 1)
    while execution.next_step(now) is not None:
        started.append(execution.running.id)
        execution.step_completed(now)
        completed.append(execution.running and execution.running.id or started[-1])
    report = execution.report()
    # one outcome per planned step, in plan order
    assert [s.id for s in report.steps] == [s.id for s in plan.steps]
    for outcome in report.steps:
        assert outcome.status in {"completed", "failed", "interrupted", "not_started", "refused"}
        assert (outcome.status == "completed") == (outcome.id in completed)
        assert (outcome.status != "not_started") == (outcome.id in started)
    # cancelled only for a cancellation stop; done only when everything completed
    assert (report.status == "done") == all(s.status == "completed" for s in report.steps)
    if report.status == "cancelled":
        assert execution.stop is StopReason.cancelled
    if execution.stop is StopReason.cancelled and report.status != "done":
        assert report.status == "cancelled"
    assert report is execution.report()


def test_a_step_whose_device_went_away_is_interrupted_and_stops_the_run():
    execution = Execution(THREE, lease_expires_at=T0 + LEASE)
    execution.next_step(T0)
    execution.step_lost(T0 + 1, "the device went away mid-command")
    assert execution.next_step(T0 + 1) is None
    report = execution.report()
    assert [s.status for s in report.steps] == ["interrupted", "not_started", "not_started"]
    assert report.steps[1].reason == "previous_step_lost" and report.status == "failed"
