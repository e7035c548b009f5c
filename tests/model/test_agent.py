"""The Host Agent's pure decisions (amc.core.execution), by scenario and by Hypothesis."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from amc.core.execution import NO_PLANNER, RELEASE_REASONS, Execution, Release, StopReason
from amc.core.records import Message, Plan, Stage, Step
from amc.core.steering import planned_step_ids
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
    plan = Plan(
        stages=(
            Stage(id="login", steps=(Step(id="a", action="wait"), Step(id="b", action="wait"))),
            Stage(id="browse", steps=(Step(id="c", action="wait"),)),
        )
    )
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
        st.tuples(
            st.just("step"),
            st.sampled_from(("completed", "completed", "failed", "refused", "interrupted", "lost", "device_lost")),
        ),
        st.tuples(st.just("renewed"), st.booleans()),
        st.tuples(st.just("refused"), st.just("lease_expired")),
        st.tuples(st.just("wait"), st.integers(1, 40_000)),
        st.tuples(st.just("shutdown"), st.sampled_from((StopReason.drain_timed_out, StopReason.forced_stop))),
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
            {
                "completed": execution.step_completed,
                "interrupted": execution.step_interrupted,
                "device_lost": lambda t: execution.device_lost(t, "device gone"),
            }.get(value, lambda t, value=value: getattr(execution, f"step_{value}")(t, "boom"))(now)
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
            drain_ended = execution.stop is StopReason.drain_timed_out
            execution.request_stop(value)
            if drain_ended and value is StopReason.forced_stop:  # the one escalation
                assert execution.stop is StopReason.forced_stop
        first_stop = first_stop or execution.stop
    if execution.running is not None:
        execution.step_interrupted(now + 1)
    while execution.next_step(now) is not None:
        started.append(execution.running.id)
        execution.step_completed(now)
        completed.append((execution.running and execution.running.id) or started[-1])
    conclusion = execution.conclusion()
    # one outcome per planned step, in plan order
    assert [s.id for s in conclusion.steps] == [s.id for s in plan.steps]
    for outcome in conclusion.steps:
        assert outcome.status in {"completed", "failed", "interrupted", "not_started", "refused"}
        assert (outcome.status == "completed") == (outcome.id in completed)
        assert (outcome.status != "not_started") == (outcome.id in started)
    if isinstance(conclusion, Release):
        # a host stop gives the attempt back: no verdict on the task, none on a step
        assert execution.stop in RELEASE_REASONS
        assert conclusion.reason == RELEASE_REASONS[execution.stop]
        assert {s.status for s in conclusion.steps} <= {"completed", "interrupted", "not_started"}
        assert not all(s.status == "completed" for s in conclusion.steps)
        assert all(s.reason == conclusion.reason for s in conclusion.steps if s.status == "not_started")
        assert conclusion is execution.conclusion()
        return
    report = conclusion
    # a host stop never ends in a verdict, unless every step had completed anyway
    assert execution.stop not in RELEASE_REASONS or report.status == "done"
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


# -- host stops: drain, forced stop, device lost -------------------------------------------------


def table_of(steps) -> list[tuple]:
    return [(s.id, s.status, s.reason) for s in steps]


@req("AGENT-DRAIN/s2")
def test_a_drain_that_timed_out_lets_the_running_step_finish_then_releases_at_the_boundary():
    execution = Execution(THREE, lease_expires_at=T0 + LEASE)
    now = run(execution, 1)
    execution.next_step(now)  # s2 runs
    execution.request_stop(StopReason.drain_timed_out, "the drain ran out")
    assert not execution.should_interrupt  # a drain stops at the boundary, not mid-step
    execution.step_completed(now + 5)
    assert execution.next_step(now + 5) is None and execution.finished
    release = execution.conclusion()
    assert isinstance(release, Release) and release.reason == "host_stopping"
    assert table_of(release.steps) == [
        ("s1", "completed", None),
        ("s2", "completed", None),
        ("s3", "not_started", "host_stopping"),
    ]
    assert release is execution.conclusion()


@req("AGENT-DRAIN/s3")
@pytest.mark.parametrize("drain_first", [False, True])
def test_a_forced_stop_interrupts_the_running_step_and_releases(drain_first):
    execution = Execution(THREE, lease_expires_at=T0 + LEASE)
    now = run(execution, 1)
    execution.next_step(now)
    if drain_first:  # the drain ran out, then a second signal: the stop escalates
        execution.request_stop(StopReason.drain_timed_out)
    execution.request_stop(StopReason.forced_stop, "stop now")
    assert execution.stop is StopReason.forced_stop and execution.should_interrupt
    execution.step_interrupted(now + 1)
    release = execution.conclusion()
    assert isinstance(release, Release) and release.reason == "host_stopping"
    assert table_of(release.steps) == [
        ("s1", "completed", None),
        ("s2", "interrupted", "host_stopping"),
        ("s3", "not_started", "host_stopping"),
    ]


@req("AGENT-DRAIN/s5")
def test_a_step_that_fails_after_the_drain_timed_out_is_the_tasks_own_failure():
    execution = Execution(THREE, lease_expires_at=T0 + LEASE)
    now = run(execution, 1)
    execution.next_step(now)
    execution.request_stop(StopReason.drain_timed_out)
    execution.step_failed(now + 1, "exit status 1")  # it ran to its end, and failed: the host stop changed nothing
    report = execution.conclusion()
    assert not isinstance(report, Release) and report.status == "failed"
    assert table_of(report.steps)[2] == ("s3", "not_started", "previous_step_failed")


@req("AGENT-DRAIN/s4")
def test_a_device_lost_mid_step_releases_the_attempt_with_reason_device_lost():
    execution = Execution(THREE, lease_expires_at=T0 + LEASE)
    now = run(execution, 1)
    execution.next_step(now)
    execution.device_lost(now + 1, "device amc-sim-01 not found")
    assert execution.next_step(now + 1) is None
    release = execution.conclusion()
    assert isinstance(release, Release) and release.reason == "device_lost"
    assert table_of(release.steps) == [
        ("s1", "completed", None),
        ("s2", "interrupted", "device amc-sim-01 not found"),
        ("s3", "not_started", "device_lost"),
    ]


@req("AGENT-DRAIN/s1")
def test_a_host_stop_after_every_step_completed_is_a_done_report_not_a_release():
    execution = Execution(THREE, lease_expires_at=T0 + LEASE)
    run(execution, 3)
    execution.request_stop(StopReason.forced_stop)
    assert execution.finished and not execution.releases
    assert execution.conclusion().status == "done"


@req("AGENT-DRAIN/s5")
def test_a_cancellation_before_the_host_stop_is_still_reported_cancelled():
    execution = Execution(THREE, lease_expires_at=T0 + LEASE)
    now = run(execution, 1)
    execution.lease_granted(now, now + LEASE, cancel_requested=True)
    execution.request_stop(StopReason.forced_stop)  # the first reason counts
    execution.next_step(now)
    assert execution.conclusion().status == "cancelled"


@req("AGENT-DRAIN/s5")
def test_a_release_of_a_paused_run_names_the_host_stop_and_settles_admitted_steers():
    execution = Execution(ABCD, lease_expires_at=T0 + LEASE)
    deliver(execution, T0, message("m1", "steer", {"skip": ["c"]}), message("m2", "pause"))
    assert execution.next_step(T0) is None and execution.paused
    execution.request_stop(StopReason.drain_timed_out)
    release = execution.conclusion()
    assert isinstance(release, Release)
    assert table_of(release.steps) == [
        ("a", "not_started", "host_stopping"),
        ("b", "not_started", "host_stopping"),
        ("c", "not_started", "steered"),
        ("d", "not_started", "host_stopping"),
    ]
    assert ("m1", "completed") in [(m, state) for m, state, *_ in acks(execution)]
    with pytest.raises(AssertionError):
        execution.report()  # a host stop never ends in a verdict


# -- Part B: steering, pause and acknowledgements -----------------------------------------------

ABCD = Plan(steps=tuple(Step(id=i, action="tap", args={"x": 1, "y": 2}) for i in "abcd"))


def message(message_id: str, intent: str, data: dict | None = None, text: str | None = None) -> Message:
    """A message as a start or renewal response carries it."""
    return Message(id=message_id, intent=intent, text=text, data=data, state="delivered", created_at=T0, attempt=1)


def screenshot(step_id: str) -> dict:
    return {"id": step_id, "action": "screenshot", "args": {}}


def deliver(execution: Execution, now: int, *messages: Message, cancel: bool = False) -> None:
    execution.lease_granted(now, now + LEASE, cancel_requested=cancel, messages=messages)


def acks(execution: Execution) -> list[tuple]:
    """The acknowledgements decided so far, as (message id, state, before_step or detail)."""
    return [
        (a.message_id, a.state, a.boundary.before_step if a.boundary else a.detail)
        for a in execution.take_acknowledgements()
    ]


def table(report) -> list[tuple]:
    return [(s.id, s.status, s.reason) for s in report.steps]


@req("STEER/s1")
def test_a_steer_waits_for_the_next_boundary_and_is_admitted_before_the_next_step():
    execution = Execution(ABCD, lease_expires_at=T0 + LEASE)
    now = run(execution, 1)
    assert execution.next_step(now).id == "b"
    deliver(execution, now, message("m1", "steer", {"skip": ["d"]}))
    assert acks(execution) == []  # delivered, not applied: b is running
    execution.step_completed(now + 1)
    assert execution.next_step(now + 1).id == "c"
    assert acks(execution) == [("m1", "admitted", "c")]
    execution.step_completed(now + 2)
    assert execution.next_step(now + 2) is None and execution.finished
    report = execution.report()
    assert table(report) == [
        ("a", "completed", None),
        ("b", "completed", None),
        ("c", "completed", None),
        ("d", "not_started", "steered"),
    ]
    assert report.status == "done" and report.metadata["steered_steps"] == {"d": "m1"}
    assert acks(execution) == [("m1", "completed", None)]  # settled with the report, before it is sent


@req("STEER/s2")
def test_a_steer_naming_a_started_step_is_rejected_and_the_step_keeps_its_outcome():
    execution = Execution(THREE, lease_expires_at=T0 + LEASE)
    now = run(execution, 1)
    assert execution.next_step(now).id == "s2"
    deliver(execution, now, message("m1", "steer", {"skip": ["s2"]}))
    execution.step_completed(now + 1)
    assert execution.next_step(now + 1).id == "s3"
    assert acks(execution) == [("m1", "rejected", "step 's2' had already started")]
    execution.step_completed(now + 2)
    execution.next_step(now + 2)
    assert [s.status for s in execution.report().steps] == ["completed"] * 3
    assert acks(execution) == []  # nothing to complete: it was not admitted


@req("STEER/s3")
def test_replace_remaining_drops_every_step_not_started_and_runs_the_new_ones():
    execution = Execution(Plan(steps=ABCD.steps[:3]), lease_expires_at=T0 + LEASE)
    now = run(execution, 1)
    deliver(execution, now, message("m1", "steer", {"replace_remaining": [screenshot("b2")]}))
    assert execution.next_step(now).id == "b2"
    assert acks(execution) == [("m1", "admitted", "b")]
    execution.step_completed(now + 1)
    assert execution.next_step(now + 1) is None
    assert table(execution.report()) == [
        ("a", "completed", None),
        ("b", "not_started", "steered"),
        ("c", "not_started", "steered"),
        ("b2", "completed", None),
    ]
    assert execution.report().status == "done"


def test_a_steer_with_text_only_is_rejected_because_a_scripted_plan_has_no_planner():
    execution = Execution(THREE, lease_expires_at=T0 + LEASE)
    deliver(execution, T0, message("m1", "steer", text="be careful with the dialog"))
    assert execution.next_step(T0).id == "s1"
    assert acks(execution) == [("m1", "rejected", NO_PLANNER)]


def test_a_structured_edit_to_a_staged_plan_is_rejected():
    plan = Plan(stages=(Stage(id="one", steps=(Step(id="a", action="wait"), Step(id="b", action="wait"))),))
    execution = Execution(plan, lease_expires_at=T0 + LEASE)
    deliver(execution, T0, message("m1", "steer", {"skip": ["b"]}))
    execution.next_step(T0)
    assert acks(execution) == [("m1", "rejected", "structured edits apply to plans of steps; this plan runs stages")]


@req("BOUNDARY/s2")
@pytest.mark.parametrize("ending", ["done", "failed", "cancelled", "lease_lost"])
def test_an_inserted_step_is_reported_in_place_however_the_attempt_ends(ending):
    execution = Execution(Plan(steps=ABCD.steps[:3]), lease_expires_at=T0 + LEASE)
    now = run(execution, 1)
    deliver(execution, now, message("m1", "steer", {"insert_after": "a", "steps": [screenshot("a2")]}))
    assert execution.next_step(now).id == "a2"
    if ending == "failed":
        execution.step_failed(now + 1, "boom")
    elif ending == "cancelled":
        deliver(execution, now, cancel=True)
        execution.step_interrupted(now + 1)
    elif ending == "lease_lost":
        execution.lease_refused("lease_expired")
        execution.step_interrupted(now + 1)
    else:
        execution.step_completed(now + 1)
    while execution.next_step(now + 1) is not None:
        execution.step_completed(now + 1)
    report = execution.report()
    assert [s.id for s in report.steps] == ["a", "a2", "b", "c"]
    assert all(
        s.status in ("completed", "failed", "interrupted") or (s.status == "not_started" and s.reason)
        for s in report.steps
    )
    assert report.status == {"done": "done", "cancelled": "cancelled"}.get(ending, "failed")
    assert report.metadata["steered_steps"] == {"a2": "m1"}


@req("BOUNDARY/s3")
def test_a_policy_refusal_is_refused_while_a_steered_skip_is_not_started_steered():
    plan = Plan(
        steps=(
            Step(id="a", action="tap"),
            Step(id="s", action="shell", args={"command": "reboot"}),
            Step(id="d", action="tap"),
            Step(id="e", action="tap"),
        )
    )
    execution = Execution(plan, lease_expires_at=T0 + LEASE)
    execution.next_step(T0)
    deliver(execution, T0, message("m1", "steer", {"skip": ["d"]}))
    execution.step_completed(T0 + 1)
    assert execution.next_step(T0 + 1).id == "s"
    execution.step_refused(T0 + 2, "shell command 'reboot' is denied by the host's action policy")
    assert execution.next_step(T0 + 2) is None
    assert table(execution.report()) == [
        ("a", "completed", None),
        ("s", "refused", "shell command 'reboot' is denied by the host's action policy"),
        ("d", "not_started", "steered"),
        ("e", "not_started", "previous_step_refused"),
    ]


@req("DELIVERY/s2")
def test_a_redelivered_message_is_recognised_by_id_and_never_applied_twice():
    execution = Execution(Plan(steps=ABCD.steps[:3]), lease_expires_at=T0 + LEASE)
    insert = message("m1", "steer", {"insert_after": "a", "steps": [screenshot("a2")]})
    now = run(execution, 1)
    deliver(execution, now, insert)
    assert execution.next_step(now).id == "a2"
    assert acks(execution) == [("m1", "admitted", "b")]
    deliver(execution, now, insert)  # its acknowledgement was lost: carried again, same id
    execution.step_completed(now + 1)
    deliver(execution, now + 1, insert)
    assert execution.next_step(now + 1).id == "b"
    assert acks(execution) == []
    assert [e.step.id for e in execution.outline] == ["a", "a2", "b", "c"]


@req("PAUSE/s1", "PAUSE/s3")
def test_a_pause_admits_no_step_until_a_resume_and_records_its_checkpoint():
    execution = Execution(THREE, lease_expires_at=T0 + LEASE)
    assert execution.next_step(T0).id == "s1"
    deliver(execution, T0, message("p", "pause"))
    execution.step_completed(T0 + 1)
    assert execution.next_step(T0 + 1) is None and not execution.finished
    assert acks(execution) == [("p", "admitted", "s2")]
    now = T0 + 1
    for _ in range(10):  # many lease periods, the pause carried again: still paused
        now += LEASE // 2
        deliver(execution, now, message("p", "pause"))
        assert execution.next_step(now) is None and not execution.finished
    deliver(execution, now, message("r", "resume"))
    assert execution.next_step(now).id == "s2"
    assert acks(execution) == [("r", "admitted", "s2"), ("r", "completed", None), ("p", "completed", None)]
    execution.step_completed(now + 1)
    run(execution, 1, now + 1)
    assert execution.next_step(now + 2) is None
    report = execution.report()
    assert report.status == "done"
    assert report.metadata["pauses"] == [{"message_id": "p", "before_step": "s2", "resumed_by": "r"}]


def test_a_resume_with_nothing_paused_and_a_second_pause_are_rejected():
    execution = Execution(THREE, lease_expires_at=T0 + LEASE)
    deliver(execution, T0, message("r", "resume"), message("p1", "pause"), message("p2", "pause"))
    assert execution.next_step(T0) is None
    assert acks(execution) == [
        ("r", "rejected", "the run is not paused"),
        ("p1", "admitted", "s1"),
        ("p2", "rejected", "the run is already paused by message p1"),
    ]


@pytest.mark.parametrize("stop", ["cancel", "lease_lost"])
def test_a_stop_ends_a_paused_run(stop):
    execution = Execution(THREE, lease_expires_at=T0 + LEASE)
    now = run(execution, 1)
    deliver(execution, now, message("p", "pause"))
    assert execution.next_step(now) is None and not execution.finished
    if stop == "cancel":
        deliver(execution, now, cancel=True)
    else:
        now = execution.lease_expires_at  # no renewal succeeded
    assert execution.next_step(now) is None and execution.finished
    report = execution.report()
    assert report.status == ("cancelled" if stop == "cancel" else "failed")
    assert table(report)[1:] == [("s2", "not_started", "paused"), ("s3", "not_started", "paused")]
    assert report.metadata["pauses"] == [{"message_id": "p", "before_step": "s2", "resumed_by": None}]


def test_a_message_arriving_after_a_stop_is_never_applied():
    execution = Execution(THREE, lease_expires_at=T0 + LEASE)
    now = run(execution, 1)
    deliver(execution, now, message("m1", "steer", {"skip": ["s3"]}), cancel=True)
    assert execution.next_step(now) is None
    assert table(execution.report())[2] == ("s3", "not_started", "cancelled")
    assert acks(execution) == []  # the server marks it not_admitted when the result arrives


# -- Hypothesis: the Host Agent against the real kernel -------------------------------------------


class HostAgainstKernel(RuleBasedStateMachine):
    """One attempt run by an `Execution`, with the kernel (through `World`) as the server.

    Clients post steers, pauses and resumes at any time; renewals carry what the host has
    not acknowledged; the host's acknowledgements reach the kernel late, in order, and some
    wait across several renewals (a lost or slow acknowledgement), so messages are carried
    again. Every acknowledgement and the final report must be accepted by the kernel, which
    checks the result's steps against the edits it admitted; the World checks every
    invariant after every command. The host may stop (a drain that timed out, a forced stop)
    or lose its device mid-step: then it releases, and the kernel must accept the release's
    steps by the same rule, and requeue (or cancel) the task, never fail it with attempts left.
    """

    @initialize(size=st.integers(1, 4))
    def setup(self, size):
        self.world = w = World()
        w.register("h1", "d1")
        self.task_id = w.submit(
            plan=Plan(steps=tuple(Step(id=f"s{i}", action="tap", args={"x": 1, "y": 2}) for i in range(size)))
        )
        self.assignment = w.claim("h1")
        self.execution = Execution(self.assignment.plan, self.assignment.lease_expires_at)
        self._grant(w.start(self.assignment))
        self.unsent: list = []  # decided, not yet accepted by the kernel
        self.decided: list = []  # every acknowledgement decided
        self.started: list[str] = []
        self.fresh = itertools.count()

    def _grant(self, decision) -> None:
        assert decision.accepted, decision.rejection
        grant = decision.reply
        note(f"carried: {[m.id for m in grant.messages]}")
        self.execution.lease_granted(self.world.now, grant.lease_expires_at, grant.cancel_requested, grant.messages)

    def _collect(self) -> None:
        taken = self.execution.take_acknowledgements()
        self.unsent += taken
        self.decided += taken

    def _paused_by_acknowledgements(self) -> bool:
        """Paused as the acknowledgements tell it: a pause admitted and not yet completed."""
        admitted = {a.message_id for a in self.decided if a.state == "admitted"}
        completed = {a.message_id for a in self.decided if a.state == "completed"}
        pauses = {m.id for m in self.world.task(self.task_id).messages if m.intent == "pause"}
        return bool((admitted & pauses) - completed)

    def _boundary(self) -> None:
        step = self.execution.next_step(self.world.now)
        self._collect()
        if step is not None:
            assert not self._paused_by_acknowledgements(), f"{step.id} started while paused"
            self.started.append(step.id)

    def _new_steps(self, draw, clash_with: list[str]) -> list[dict]:
        ids = [f"n{next(self.fresh)}" for _ in range(draw(st.integers(1, 2)))]
        if clash_with and draw(st.integers(0, 9)) == 0:
            ids[0] = draw(st.sampled_from(clash_with))  # an id already in the plan: not applicable
        return [{"id": i, "action": "screenshot", "args": {}} for i in ids]

    def tick(self) -> None:
        self.world.now += 100  # renewals keep the 30 s lease far from its expiry

    @rule(data=st.data(), kind=st.sampled_from(["skip", "insert", "replace", "text", "pause", "resume"]))
    def post(self, data, kind):
        self.tick()
        known = [e.step.id for e in self.execution.outline]
        if kind == "skip":
            body = {
                "data": {
                    "skip": data.draw(st.lists(st.sampled_from(known + ["zz"]), min_size=1, max_size=2, unique=True))
                }
            }
        elif kind == "insert":
            anchor = data.draw(st.sampled_from(known + [None, "zz"]))
            body = {"data": {"insert_after": anchor, "steps": self._new_steps(data.draw, known)}}
        elif kind == "replace":
            body = {"data": {"replace_remaining": self._new_steps(data.draw, known)}}
        elif kind == "text":
            body = {"text": "mind the dialog"}
        else:
            body = {}
        intent = "steer" if kind in ("skip", "insert", "replace", "text") else kind
        decision = self.world.post(self.task_id, intent, **body)
        edit = body.get("data") or {}
        if "zz" in edit.get("skip", ()) or edit.get("insert_after") == "zz":  # in no plan: refused when posted
            assert decision.rejection is not None and "'zz'" in decision.rejection.detail, decision
            return
        assert decision.accepted, decision.rejection
        note(f"posted {decision.reply.message_id}: {intent} {body}")

    @rule()
    def renew(self):
        self.tick()
        self._grant(self.world.renew(self.assignment))

    @rule(
        outcome=st.sampled_from(
            ["completed", "completed", "completed", "failed", "refused", "interrupted", "device_lost"]
        )
    )
    def step(self, outcome):
        self.tick()
        execution, now = self.execution, self.world.now
        if execution.running is None:
            self._boundary()
        elif outcome == "completed":
            execution.step_completed(now)
        elif outcome == "interrupted":
            execution.step_interrupted(now, "unknown")
        elif outcome == "device_lost":
            execution.device_lost(now, "device d1 not found")
        else:
            getattr(execution, f"step_{outcome}")(now, "boom")

    @rule(reason=st.sampled_from([StopReason.drain_timed_out, StopReason.forced_stop]))
    def host_stops(self, reason):
        self.tick()
        self.execution.request_stop(reason, "the host is stopping")
        if self.execution.should_interrupt:
            self.execution.step_interrupted(self.world.now)

    @rule(count=st.integers(1, 3))
    def send_acknowledgements(self, count):
        self.tick()
        for ack in self.unsent[:count]:
            decision = self.world.ack(
                self.assignment,
                ack.message_id,
                ack.state,
                before_step=ack.boundary.before_step if ack.boundary else ...,
                detail=ack.detail,
            )
            assert decision.accepted, (ack, decision.rejection)
        del self.unsent[:count]

    @rule()
    def cancel(self):
        self.tick()
        self.world.cancel(self.task_id)

    @invariant()
    def each_message_is_applied_at_most_once(self):
        first = Counter(a.message_id for a in self.decided if a.state in ("admitted", "rejected"))
        assert all(n == 1 for n in first.values()), first

    @invariant()
    def no_started_step_is_recalled(self):
        removed = {e.step.id for e in self.execution.outline if e.removed_by is not None}
        assert not removed & set(self.started)

    def teardown(self):
        if not hasattr(self, "execution"):
            return
        execution, w = self.execution, self.world
        while not execution.finished or execution.running is not None:
            self.tick()
            if execution.running is not None:
                execution.step_completed(w.now)
            elif execution.paused:  # a client resumes it
                assert w.post(self.task_id, "resume").accepted
                self._grant(w.renew(self.assignment))
            self._boundary()
        report = execution.conclusion()
        self._collect()
        self.send_acknowledgements(len(self.unsent))
        if isinstance(report, Release):
            cancelling = w.task(self.task_id).cancellation is not None
            decision = w.release(self.assignment, report.reason, steps=report.steps)
            assert decision.accepted, decision.rejection
            assert {s.status for s in report.steps} <= {"completed", "interrupted", "not_started"}
            # a host stop is no verdict: with attempts left the task waits for another host
            assert w.task(self.task_id).status == ("cancelled" if cancelling else "queued")
        else:
            assert w.task(self.task_id).paused == execution.paused
            decision = w.report(self.assignment, report.status, metadata=report.metadata, steps=report.steps)
            assert decision.accepted, decision.rejection
        ids = [s.id for s in report.steps]
        assert ids == [e.step.id for e in execution.outline] == planned_step_ids(w.task(self.task_id), 1)
        assert len(set(ids)) == len(ids)
        for outcome in report.steps:  # the truth about each step
            assert (outcome.status != "not_started") == (outcome.id in self.started)
        # every steer admitted was completed with the report
        messages = {m.id: m for m in w.task(self.task_id).messages}
        assert all(
            messages[a.message_id].state == "completed"
            for a in self.decided
            if a.state == "admitted" and messages[a.message_id].intent == "steer"
        )


HostAgainstKernel.TestCase.settings = settings(max_examples=250, stateful_step_count=40, deadline=None)
test_the_host_agrees_with_the_kernel = HostAgainstKernel.TestCase


@req("AGENT-STEPS/s1")
def test_a_failed_step_stops_the_plan_and_the_rest_never_starts():
    execution = Execution(Plan(steps=ABCD.steps), lease_expires_at=T0 + LEASE)
    now = run(execution, 1)
    assert execution.next_step(now).id == "b"
    execution.step_failed(now + 1, "boom")
    assert execution.next_step(now + 1) is None
    report = execution.report()
    assert report.status == "failed"
    assert [(s.id, s.status) for s in report.steps] == [
        ("a", "completed"),
        ("b", "failed"),
        ("c", "not_started"),
        ("d", "not_started"),
    ]
    assert {s.reason for s in report.steps[2:]} == {"previous_step_failed"}


@req("PROGRESS")
def test_progress_names_the_running_step_and_counts_the_steps_ended():
    execution = Execution(THREE, T0 + LEASE)
    assert (execution.progress.step, execution.progress.ended) == (None, 0)
    step = execution.next_step(T0)
    assert step is not None and (execution.progress.step, execution.progress.ended) == ("s1", 0)
    execution.step_completed(T0 + 1)
    assert (execution.progress.step, execution.progress.ended) == (None, 1)
    execution.next_step(T0 + 2)
    execution.step_failed(T0 + 3, "boom")
    assert (execution.progress.step, execution.progress.ended) == (None, 2)
