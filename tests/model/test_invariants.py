"""Each invariant rejects a state built to break it.

The model tests check `invariants.violations` after every step, but only ever on states
the kernel made, which keep every invariant: a weakened check would go unnoticed there.
Each case below takes a state the kernel made (the `World` checked it on the way), breaks
exactly one rule by hand, and requires the checker to name that rule.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
import pytest

from amc.core import invariants
from amc.core.lifecycle import AttemptState, CancellationState, MessageState, StepStatus, TaskStatus
from amc.core.records import Reservation, Result, StepOutcome
from tests.model.world import LEASE_MS, World

# -- states the kernel makes ---------------------------------------------------------------


def _world() -> World:
    world = World()
    world.register("h1", "d1", "d2")
    return world


def _dispatched(world: World):
    task_id = world.submit()
    assignment = world.claim()
    world.start(assignment)
    return task_id, assignment


def _done(world: World, steps=None):
    task_id, assignment = _dispatched(world)
    world.report(assignment, TaskStatus.done, steps=steps)
    return task_id


def _with_delivered_steer(world: World) -> str:
    task_id, assignment = _dispatched(world)
    world.post(task_id, "steer", text="look at the battery page too")
    world.renew(assignment)
    assert world.task(task_id).messages[0].state == MessageState.delivered
    return task_id


def _with_collected_follow_up(world: World) -> tuple[str, str]:
    task_id, assignment = _dispatched(world)
    world.post(task_id, "follow_up", data={"steps": [{"id": "again", "action": "screenshot", "args": {}}]})
    world.report(assignment, TaskStatus.done)
    successor = world.task(task_id).messages[0].successor
    assert successor is not None
    return task_id, successor


# -- breaking one rule ---------------------------------------------------------------------


def _task(world: World, task_id: str, **changes) -> None:
    world.state.tasks[task_id] = attrs.evolve(world.task(task_id), **changes)


def _attempt(world: World, task_id: str, index: int, **changes) -> None:
    attempts = list(world.task(task_id).attempts)
    attempts[index] = attrs.evolve(attempts[index], **changes)
    _task(world, task_id, attempts=tuple(attempts))


def _message(world: World, task_id: str, index: int, **changes) -> None:
    messages = list(world.task(task_id).messages)
    messages[index] = attrs.evolve(messages[index], **changes)
    _task(world, task_id, messages=tuple(messages))


def _cancellation(world: World, task_id: str, **changes) -> None:
    _task(world, task_id, cancellation=attrs.evolve(world.task(task_id).cancellation, **changes))


def _device(world: World, serial: str, **changes) -> None:
    host = world.state.hosts["h1"]
    devices = tuple(attrs.evolve(d, **changes) if d.serial == serial else d for d in host.devices)
    world.state.hosts["h1"] = attrs.evolve(host, devices=devices)


# Each case: breaks one rule in a fresh world and returns the checker's findings.


def two_active_attempts(world):
    task_id, _ = _dispatched(world)
    first = world.task(task_id).attempts[0]
    _task(world, task_id, attempts=(first, attrs.evolve(first, number=2, device="d2")))
    return invariants.violations(world.state)


def active_attempt_not_the_current(world):
    task_id, _ = _dispatched(world)
    first = world.task(task_id).attempts[0]
    ended = attrs.evolve(first, number=2, outcome=AttemptState.expired, ended_at=world.now)
    _task(world, task_id, attempts=(first, ended))
    return invariants.violations(world.state)


def active_attempt_on_queued_task(world):
    task_id, _ = _dispatched(world)
    _task(world, task_id, status=TaskStatus.queued)
    return invariants.violations(world.state)


def in_flight_task_without_active_attempt(world):
    task_id, _ = _dispatched(world)
    _attempt(world, task_id, 0, outcome=AttemptState.expired, ended_at=world.now)
    return invariants.violations(world.state)


def attempts_misnumbered(world):
    task_id, _ = _dispatched(world)
    _attempt(world, task_id, 0, number=2)
    return invariants.violations(world.state)


def more_attempts_than_allowed(world):
    task_id, _ = _dispatched(world)
    _task(world, task_id, max_attempts=0)
    return invariants.violations(world.state)


def cancelled_without_completed_cancellation(world):
    task_id = world.submit()
    world.cancel(task_id)
    _cancellation(world, task_id, state=CancellationState.unfulfilled)
    return invariants.violations(world.state)


def cancelled_without_any_cancellation(world):
    task_id = world.submit()
    world.cancel(task_id)
    _task(world, task_id, cancellation=None)
    return invariants.violations(world.state)


def queued_cancel_then_an_active_attempt(world):
    task_id = world.submit()
    world.cancel(task_id)
    requested = world.task(task_id).cancellation.requested_at
    other, _ = _dispatched(world)
    # active, though assigned before the request: the `active` half of the rule alone catches it
    attempt = attrs.evolve(world.task(other).attempts[0], assigned_at=requested - 1)
    _task(world, task_id, attempts=(attempt,))
    return invariants.violations(world.state)


def queued_cancel_then_a_later_ended_attempt(world):
    task_id = world.submit()
    world.cancel(task_id)
    world.now += 1_000
    other = _done(world)
    # ended, but assigned after the request: the time half of the rule alone catches it
    _task(world, task_id, attempts=world.task(other).attempts)
    return invariants.violations(world.state)


def pending_cancellation_on_queued_task(world):
    task_id, _ = _dispatched(world)
    world.cancel(task_id)
    _task(world, task_id, status=TaskStatus.queued, attempts=())
    return invariants.violations(world.state)


def settled_cancellation_on_running_task(world):
    task_id, _ = _dispatched(world)
    world.cancel(task_id)
    _cancellation(world, task_id, state=CancellationState.completed)
    return invariants.violations(world.state)


def unfulfilled_without_a_report(world):
    task_id, assignment = _dispatched(world)
    world.cancel(task_id)
    world.report(assignment, TaskStatus.done)
    assert world.task(task_id).cancellation.state == CancellationState.unfulfilled
    _task(world, task_id, result=attrs.evolve(world.task(task_id).result, reason="attempts_exhausted"))
    return invariants.violations(world.state)


def ended_task_without_result(world):
    task_id = _done(world)
    _task(world, task_id, result=None)
    return invariants.violations(world.state)


def queued_task_with_result(world):
    task_id = world.submit()
    _task(world, task_id, result=Result(status=TaskStatus.done, attempt=None, reason="reported"))
    return invariants.violations(world.state)


def _reported_steps():
    return (StepOutcome(id="open", status=StepStatus.completed), StepOutcome(id="look", status=StepStatus.completed))


def result_steps_out_of_plan_order(world):
    task_id = _done(world, steps=_reported_steps())
    result = world.task(task_id).result
    _task(world, task_id, result=attrs.evolve(result, steps=result.steps[::-1]))
    return invariants.violations(world.state)


def result_step_with_no_valid_outcome(world):
    task_id = _done(world, steps=_reported_steps())
    result = world.task(task_id).result
    bad = attrs.evolve(result.steps[1], status="cancelled")  # a task's status, not a step's
    _task(world, task_id, result=attrs.evolve(result, steps=(result.steps[0], bad)))
    return invariants.violations(world.state)


def message_id_twice(world):
    task_id = _with_delivered_steer(world)
    message = world.task(task_id).messages[0]
    _task(world, task_id, messages=(message, message))
    return invariants.violations(world.state)


def message_in_no_valid_state(world):
    task_id = _with_delivered_steer(world)
    _message(world, task_id, 0, state="lost")
    return invariants.violations(world.state)


def delivery_time_without_attempt(world):
    task_id = _with_delivered_steer(world)
    _message(world, task_id, 0, attempt=None)
    return invariants.violations(world.state)


def follow_up_sent_to_a_host(world):
    task_id = _with_delivered_steer(world)
    _message(world, task_id, 0, intent="follow_up")
    return invariants.violations(world.state)


def delivered_without_delivery(world):
    task_id = _with_delivered_steer(world)
    _message(world, task_id, 0, attempt=None, delivered_at=None)
    return invariants.violations(world.state)


def admitted_without_admission_time(world):
    task_id = _with_delivered_steer(world)
    _message(world, task_id, 0, state=MessageState.admitted)
    return invariants.violations(world.state)


def completed_without_admission_time(world):
    task_id = _with_delivered_steer(world)
    _message(world, task_id, 0, state=MessageState.completed, completed_at=world.now)
    return invariants.violations(world.state)


def completed_without_completion_time(world):
    task_id = _with_delivered_steer(world)
    _message(world, task_id, 0, state=MessageState.completed, admitted_at=world.now)
    return invariants.violations(world.state)


def rejected_without_detail(world):
    task_id = _with_delivered_steer(world)
    _message(world, task_id, 0, state=MessageState.rejected)
    return invariants.violations(world.state)


def steer_naming_a_successor(world):
    task_id = _with_delivered_steer(world)
    _message(world, task_id, 0, successor="t9")
    return invariants.violations(world.state)


def open_message_on_ended_task(world):
    task_id = _with_delivered_steer(world)
    _task(
        world,
        task_id,
        status=TaskStatus.failed,
        result=Result(status=TaskStatus.failed, attempt=1, reason="attempts_exhausted"),
        attempts=(attrs.evolve(world.task(task_id).attempts[0], outcome=AttemptState.expired, ended_at=world.now),),
    )
    _device(world, "d1", reservation=None)
    return invariants.violations(world.state)


def admission_not_listed(world):
    task_id = _with_delivered_steer(world)
    _task(world, task_id, admissions=("m9",))
    return invariants.violations(world.state)


def offline_device_without_reservation(world):
    world.submit()
    _device(world, "d2", online=False)
    return invariants.violations(world.state)


def attempt_holding_two_devices(world):
    task_id, _ = _dispatched(world)
    _device(world, "d2", reservation=Reservation(task_id=task_id, attempt=1))
    return invariants.violations(world.state)


def device_reserved_by_ended_attempt(world):
    task_id = _done(world)
    _device(world, "d1", reservation=Reservation(task_id=task_id, attempt=1))
    return invariants.violations(world.state)


def active_attempt_without_reservation(world):
    _dispatched(world)
    _device(world, "d1", reservation=None)
    return invariants.violations(world.state)


def follow_up_collected_twice(world):
    _, successor = _with_collected_follow_up(world)
    world.state.tasks["copy"] = attrs.evolve(world.task(successor), id="copy")
    return invariants.violations(world.state)


def follow_up_naming_a_successor_without_it(world):
    _task_id, successor = _with_collected_follow_up(world)
    _task(world, successor, collected=())
    return invariants.violations(world.state)


def successor_holding_a_follow_up_that_names_another(world):
    task_id, _successor = _with_collected_follow_up(world)
    _message(world, task_id, 0, successor=None)
    return invariants.violations(world.state)


def active_at_its_lease_expiry(world):
    task_id, _ = _dispatched(world)
    return invariants.violations(world.state, now=world.task(task_id).attempts[0].lease_expires_at)


# Cases about change: the state before, then after a step that broke a rule.


def _changed(world: World, break_it: Callable[[], None]) -> list[str]:
    before = world.state.records_copy()
    break_it()
    return invariants.violations(world.state, before, world.now)


def task_disappeared(world):
    task_id = world.submit()
    return _changed(world, lambda: world.state.tasks.pop(task_id))


def held_task_claimed(world):
    task_id = world.submit()
    world.post(task_id, "pause")
    assert world.task(task_id).held
    other, _ = _dispatched(world)
    return _changed(world, lambda: _task(world, task_id, attempts=world.task(other).attempts))


def message_lost(world):
    task_id = _with_delivered_steer(world)
    return _changed(world, lambda: _task(world, task_id, messages=()))


def message_moved_back(world):
    task_id = _with_delivered_steer(world)
    return _changed(
        world, lambda: _message(world, task_id, 0, state=MessageState.queued, attempt=None, delivered_at=None)
    )


def settled_message_changed(world):
    task_id, assignment = _dispatched(world)
    world.post(task_id, "steer", text="look at the battery page too")
    world.renew(assignment)
    world.ack(assignment, world.task(task_id).messages[0].id, MessageState.rejected, detail="cannot")
    return _changed(world, lambda: _message(world, task_id, 0, detail="changed its mind"))


def message_rewritten(world):
    task_id = _with_delivered_steer(world)
    return _changed(world, lambda: _message(world, task_id, 0, text="something else"))


def terminal_task_changed(world):
    task_id = _done(world)
    return _changed(
        world,
        lambda: _task(
            world,
            task_id,
            status=TaskStatus.failed,
            result=attrs.evolve(world.task(task_id).result, status=TaskStatus.failed),
        ),
    )


def pending_cancellation_dropped(world):
    task_id, _ = _dispatched(world)
    world.cancel(task_id)
    return _changed(world, lambda: _cancellation(world, task_id, state=CancellationState.completed))


def cancellation_disappeared(world):
    task_id = world.submit()
    world.cancel(task_id)
    return _changed(world, lambda: _task(world, task_id, cancellation=None))


def attempts_disappeared(world):
    task_id = _done(world)
    return _changed(world, lambda: _task(world, task_id, attempts=()))


def ended_attempt_changed(world):
    task_id = _done(world)
    return _changed(world, lambda: _attempt(world, task_id, 0, renewals=7))


def replaced_attempt_changed(world):
    task_id, _ = _dispatched(world)
    world.advance(LEASE_MS)  # expires; the task is queued again
    assignment = world.claim()
    assert assignment is not None and assignment.attempt == 2
    return _changed(world, lambda: _attempt(world, task_id, 0, renewals=7))


def replaced_attempt_changed_while_active(world):
    task_id, _ = _dispatched(world)
    first = world.task(task_id).attempts[0]
    # attempt 1 still reads active, but attempt 2 replaced it: it is history all the same
    _task(world, task_id, attempts=(first, attrs.evolve(first, number=2, device="d2")))
    return _changed(world, lambda: _attempt(world, task_id, 0, renewals=7))


# (case, the invariant it must be rejected by, words of that finding)
CASES = [
    (two_active_attempts, "I1", "has active attempts [1, 2]"),
    (active_attempt_not_the_current, "I1", "has active attempts [1]"),
    (active_attempt_on_queued_task, "I1", "is queued with active attempts [1]"),
    (in_flight_task_without_active_attempt, "I1", "is dispatched with active attempts []"),
    (attempts_misnumbered, "I1", "attempts are not numbered 1..n"),
    (more_attempts_than_allowed, "I1", "has 1 attempts, max 0"),
    (cancelled_without_completed_cancellation, "I4", "is cancelled with cancellation"),
    (cancelled_without_any_cancellation, "I4", "is cancelled with cancellation None"),
    (queued_cancel_then_an_active_attempt, "I5", "was cancelled while queued but got attempts [1]"),
    (queued_cancel_then_a_later_ended_attempt, "I5", "was cancelled while queued but got attempts [1]"),
    (pending_cancellation_on_queued_task, "I6", "is queued with a cancellation pending"),
    (settled_cancellation_on_running_task, "I6", "is dispatched with cancellation completed"),
    (unfulfilled_without_a_report, "I6", "cancellation went unfulfilled without a report"),
    (ended_task_without_result, "I3", "is done with result None"),
    (queued_task_with_result, "I3", "is queued with result"),
    (result_steps_out_of_plan_order, "I9", "reported steps ['look', 'open'] for plan ['open', 'look']"),
    (result_step_with_no_valid_outcome, "I9", "steps ['look'] have no valid outcome"),
    (message_id_twice, "I10", "twice"),
    (message_in_no_valid_state, "I10", "has no valid state"),
    (delivery_time_without_attempt, "I10", "has a delivery time without an attempt"),
    (follow_up_sent_to_a_host, "I10", "is a follow-up that went to a host"),
    (delivered_without_delivery, "I10", "was never delivered"),
    (admitted_without_admission_time, "I10", "(admitted) has no admission time"),
    (completed_without_admission_time, "I10", "(completed) has no admission time"),
    (completed_without_completion_time, "I10", "has no completion time"),
    (rejected_without_detail, "I10", "says nothing about why"),
    (steer_naming_a_successor, "I10", "names a successor without being a collected follow-up"),
    (open_message_on_ended_task, "I10", "is still delivered on a failed task"),
    (admission_not_listed, "I10", "lists admissions ('m9',)"),
    (offline_device_without_reservation, "I2", "offline device h1/d2 is kept without a reservation"),
    (attempt_holding_two_devices, "I2", "holds two devices"),
    (device_reserved_by_ended_attempt, "I2", "device h1/d1 is reserved by ended attempt"),
    (active_attempt_without_reservation, "I2", "holds no reservation of its device"),
    (follow_up_collected_twice, "I11", "was collected into"),
    (follow_up_naming_a_successor_without_it, "I11", "which lacks it"),
    (successor_holding_a_follow_up_that_names_another, "I11", "a successor collected a message that does not name it"),
    (active_at_its_lease_expiry, "I-EXPIRY", "is active after its lease expired"),
    (task_disappeared, "I8", "disappeared"),
    (held_task_claimed, "I10", "was claimed while held"),
    (message_lost, "I10", "were lost or reordered"),
    (message_moved_back, "I10", "went from delivered to queued"),
    (settled_message_changed, "I10", "went from rejected to rejected"),
    (message_rewritten, "I10", "was rewritten"),
    (terminal_task_changed, "I3", "changed from done to failed"),
    (pending_cancellation_dropped, "I6", "was dropped"),
    (cancellation_disappeared, "I6", "the cancellation of task t1 disappeared"),
    (attempts_disappeared, "I7", "attempts of task"),
    (ended_attempt_changed, "I7", "attempt t1#1 changed after it ended"),
    (replaced_attempt_changed, "I7", "attempt t1#1 changed after it ended"),
    (replaced_attempt_changed_while_active, "I7", "attempt t1#1 changed after it ended"),
]


@pytest.mark.parametrize(("break_it", "invariant", "words"), CASES, ids=[case.__name__ for case, _, _ in CASES])
def test_each_invariant_rejects_a_state_that_breaks_it(break_it, invariant, words):
    found = break_it(_world())
    named = [f for f in found if f.startswith(f"{invariant}:") and words in f]
    assert named, f"expected {invariant} ({words!r}) among {found}"


def test_the_unbroken_states_keep_every_invariant():
    """The states the cases start from are sound, so what each case finds is its own break."""
    world = _world()
    _with_delivered_steer(world)
    _with_collected_follow_up(world)
    _done(world, steps=_reported_steps())
    assert invariants.violations(world.state, now=world.now) == []
