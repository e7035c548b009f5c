"""The python-statemachine declarations and the kernel agree.

Two levels: every (state, event, guards) of each derived table gives what the declaration
itself gives; and a Hypothesis run drives the kernel with commands while one
python-statemachine instance per task, attempt and cancellation follows the same events,
requiring the same state after every step.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from statemachine.exceptions import TransitionNotAllowed

from amc.core import kernel, lifecycle
from amc.core.events import (
    AttemptReleased,
    AttemptStarted,
    CancellationDelivered,
    CancellationRequested,
    LeaseExpired,
    LeaseExtended,
    LeaseRenewed,
    TaskAssigned,
    TaskEnded,
    TaskRequeued,
)
from amc.core.render import MACHINES, rendered
from tests.model.world import World

SPECS = Path(__file__).resolve().parents[2] / "specs" / "lifecycles"
GUARDS = ("cancellation_pending", "attempts_left")


@pytest.mark.parametrize("name", sorted(MACHINES))
def test_derived_table_agrees_with_the_declaration_everywhere(name):
    machine, table = MACHINES[name]
    states = [s.id for s in machine.states]
    events = lifecycle.events_of(machine)
    for state, event, values in itertools.product(states, events, itertools.product((False, True), repeat=2)):
        guards = dict(zip(GUARDS, values))
        try:
            expected = lifecycle.drive(machine, state, event, guards)
        except TransitionNotAllowed:
            expected = None
        assert lifecycle.target(table, state, event, guards) == expected, (state, event, guards)


@pytest.mark.parametrize("name", sorted(MACHINES))
def test_move_is_target_where_the_move_is_legal_and_raises_where_it_is_not(name):
    """The apply side asks `move`: an illegal move is a bug in the kernel, never a None that
    lands in a record's field."""
    machine, table = MACHINES[name]
    events = lifecycle.events_of(machine)
    for state, event, values in itertools.product(
        [s.id for s in machine.states], events, itertools.product((False, True), repeat=2)
    ):
        guards = dict(zip(GUARDS, values))
        expected = lifecycle.target(table, state, event, guards)
        if expected is None:
            with pytest.raises(lifecycle.IllegalMove, match=f"{event!r} cannot move {state!r}"):
                lifecycle.move(table, state, event, guards)
        else:
            assert lifecycle.move(table, state, event, guards) == expected, (state, event, guards)


def test_terminal_states_are_final_and_have_no_way_out():
    for machine, table in MACHINES.values():
        finals = lifecycle.final_states(machine)
        assert finals
        assert not any(state in finals for state, _ in table)


# Where each lifecycle starts and where it may end, written out as the protocol states them
# (specs/protocol.md; an attempt's two active states are ours, the wire shows them as
# `outcome: null`), not read from the declarations: a declaration that drifts fails here.
PROTOCOL_ENDS = {
    "task": ("queued", {"done", "failed", "cancelled"}),
    "attempt": ("leased", {"done", "failed", "cancelled", "expired", "released"}),
    "cancellation": ("none", {"completed", "unfulfilled"}),
    "message": ("queued", {"completed", "rejected", "not_admitted"}),
}


@pytest.mark.parametrize("name", sorted(MACHINES))
def test_declared_initial_and_final_states_are_the_protocols(name):
    machine, table = MACHINES[name]
    initial, finals = PROTOCOL_ENDS[name]
    assert lifecycle.initial_state(machine) == initial
    assert lifecycle.final_states(machine) == finals
    # The derived table holds the same: every state is reached from the initial one, and
    # exactly the states that are not final have a move to another state.
    reached, frontier = {initial}, [initial]
    while frontier:
        source = frontier.pop()
        for (state, _), moves in table.items():
            for _, target in moves if state == source else ():
                if target not in reached:
                    reached.add(target)
                    frontier.append(target)
    assert reached == {state.value for state in machine.states}
    onward = {state for (state, _), moves in table.items() if any(target != state for _, target in moves)}
    assert onward == reached - finals


def test_the_kernel_starts_each_lifecycle_in_its_declared_initial_state():
    world = World()
    world.register("h1", "d1")
    task_id = world.submit()
    assert world.task(task_id).status == lifecycle.initial_state(lifecycle.TaskLifecycle)
    world.post(task_id, "steer", text="also check the battery page")
    assert world.task(task_id).messages[0].state == lifecycle.initial_state(lifecycle.MessageLifecycle)
    world.claim()
    assert world.task(task_id).attempts[0].state == lifecycle.initial_state(lifecycle.AttemptLifecycle)
    world.cancel(task_id)
    unrequested = lifecycle.initial_state(lifecycle.CancellationLifecycle)
    requested = lifecycle.target(lifecycle.CANCELLATION, unrequested, "request")
    assert world.task(task_id).cancellation.state == requested


def test_each_state_is_its_enum_member_and_its_wire_string():
    for machine, table in MACHINES.values():
        for state in machine.states:
            assert state.id == state.value == str(state.value)
        assert all(type(target) is type(machine.initial_state.value) for moves in table.values() for _, target in moves)


def test_rendered_lifecycles_are_up_to_date():
    for name, text in rendered().items():
        path = SPECS / name
        assert path.exists() and path.read_text() == text, f"{path} is stale: run `amc model render`"


# -- the kernel and the declarations side by side --------------------------------------------


class Shadow:
    """python-statemachine instances that follow the kernel's events."""

    def __init__(self):
        self.tasks: dict[str, lifecycle.TaskLifecycle] = {}
        self.attempts: dict[tuple[str, int], lifecycle.AttemptLifecycle] = {}
        self.cancellations: dict[str, lifecycle.CancellationLifecycle] = {}

    def follow(self, world: World, event, before) -> None:
        task_id = getattr(event, "task_id", None)
        if task_id is None:
            return
        task = before.tasks.get(task_id)
        guards = (
            {}
            if task is None
            else {
                "cancellation_pending": task.cancellation_pending,
                "attempts_left": task.attempts_left,
            }
        )
        sm = self.tasks.setdefault(task_id, lifecycle.TaskLifecycle())
        sm.guards = guards
        match event:
            case TaskAssigned():
                sm.send("claim")
                self.attempts[(task_id, event.attempt)] = lifecycle.AttemptLifecycle()
            case AttemptStarted() | LeaseExtended():
                sm.send("start")
                self.attempts[(task_id, event.attempt)].send("start")
            case LeaseRenewed():
                sm.send("renew")
                self.attempts[(task_id, event.attempt)].send("renew")
            case CancellationRequested():
                cancellation = self.cancellations.setdefault(task_id, lifecycle.CancellationLifecycle())
                cancellation.send("request")
                if event.attempt is not None:
                    sm.send("request_cancel")
            case CancellationDelivered():
                self.cancellations[task_id].send("deliver")
            case LeaseExpired():
                self.attempts[(task_id, event.attempt)].send("expire")
                sm.send("expire")
            case AttemptReleased():
                self.attempts[(task_id, event.attempt)].send("release")
                sm.send("release")
            case TaskRequeued():
                pass  # the expire or release above already moved the task
            case TaskEnded():
                if event.reason == "reported":
                    sm.send(f"report_{event.status}")
                    self.attempts[(task_id, event.attempt)].send(f"report_{event.status}")
                elif event.reason == "cancelled_while_queued":
                    sm.send("request_cancel")
                if task_id in self.cancellations and _id(self.cancellations[task_id]) == "pending":
                    self.cancellations[task_id].send(
                        "task_cancelled" if event.status == "cancelled" else "task_finished"
                    )

    def agrees_with(self, world: World) -> None:
        for task_id, sm in self.tasks.items():
            task = world.task(task_id)
            assert _id(sm) == task.status, task_id
            for attempt in task.attempts:
                assert _id(self.attempts[(task_id, attempt.number)]) == attempt.state
            cancellation = self.cancellations.get(task_id)
            assert (_id(cancellation) if cancellation else None) == (
                task.cancellation.state if task.cancellation else None
            )


def _id(machine) -> str:
    (state,) = machine.configuration
    return state.id


ACTIONS = st.lists(
    st.tuples(
        st.sampled_from(("submit", "claim", "start", "renew", "report", "release", "cancel", "tick")),
        st.integers(0, 3),
        st.sampled_from(("done", "failed", "cancelled")),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(actions=ACTIONS)
def test_kernel_moves_exactly_as_the_declarations(actions):
    world = World()
    world.register("h1", "d1", "d2")
    shadow = Shadow()
    assignments: list[kernel.Assignment] = []
    for action, pick, status in actions:
        before = world.state.records_copy()
        seen = len(world.log)
        if action == "submit":
            world.submit(max_attempts=1 + pick % 2)
        elif action == "claim":
            if (a := world.claim()) is not None:
                assignments.append(a)
        elif action == "tick":
            world.advance(12_000 * (pick + 1))
        elif action == "cancel" and world.state.tasks:
            world.cancel(sorted(world.state.tasks)[pick % len(world.state.tasks)])
        elif assignments:
            a = assignments[pick % len(assignments)]
            {"start": world.start, "renew": world.renew, "release": world.release}.get(
                action, lambda a, status=status: world.report(a, status)
            )(a)
        for event in world.log[seen:]:
            shadow.follow(world, event, before)
        shadow.agrees_with(world)
