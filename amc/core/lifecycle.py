"""The lifecycles of amc: read this module first.

Theory of operation
===================

Three small machines describe everything that can happen to a task. They are coupled:
one command may move several of them at once, and the kernel (`amc.core.kernel`) is the
only place that decides which moves a command makes.

``TaskLifecycle``
    ``queued -> assigned -> dispatched -> {done, failed, cancelled}``. A claim creates an
    attempt and reserves a device (``assigned``); the host's start acknowledgement makes it
    ``dispatched``; a terminal report ends it. A lease that expires on an in-flight task
    routes three ways, tried in order: a pending cancellation wins (``cancelled``), then
    attempts left (``queued`` again), else ``failed``; a host's release routes the same
    three ways at once. A cancel on a queued task ends it at
    once; on an in-flight task it only records a request (a self-transition) that the
    cancellation machine tracks.

``AttemptLifecycle``
    One per claim: ``leased -> running -> {done, failed, cancelled, expired, released}``. Only the
    latest attempt of a task can be active; an attempt that ended (or was replaced) never
    moves again, which is what fences a stale Host Agent off.

``CancellationLifecycle``
    ``none -> pending -> {completed, unfulfilled}``. ``pending`` survives renewals,
    expiries and restarts; it ends ``completed`` when the task ends cancelled and
    ``unfulfilled`` when the host finished or failed first. A queued task passes through
    ``pending`` inside the cancel command itself, which also ends the task.

``MessageLifecycle``
    ``queued -> delivered -> admitted -> completed``, or ``rejected`` (the host could not
    apply it) or ``not_admitted`` (its attempt or task ended first). Delivered is not
    applied: only the host's acknowledgement at a step boundary admits a steer or a pause.
    The server admits a message itself only where no host is involved: a pause or resume
    of a queued task (hold and release) and follow-ups collected into a successor.

The states of each machine are an enum declared here (`TaskStatus`, `AttemptState`,
`CancellationState`, `MessageState`; and `StepStatus`, which is no machine); every other
module names a state by its member, never by its string. The declarations below, written
with python-statemachine from those enums, are the source of truth: the diagrams and
tables in ``specs/lifecycles/`` are rendered from them. But driving a python-statemachine
instance costs hundreds of microseconds per transition, so the kernel
never does. At import time, `transition_table` flattens each declaration into a plain dict
``(state, event) -> [(guards, target), ...]`` and the kernel looks moves up with `target`.
A failed lookup is an illegal move. ``tests/model/test_lifecycle.py`` drives the
declarations and the kernel side by side to prove the two agree. Where a move cannot be
illegal (an event being applied, a command past its checks) the kernel asks `move`, which
raises `IllegalMove` instead of answering None.

Guards are named predicates over the kernel's state (``cancellation_pending``,
``attempts_left``). The kernel evaluates them itself and passes their values in by name,
so a guard has one meaning in both worlds.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import TypeVar

from statemachine import StateMachine
from statemachine.states import States

# --- the states, one enum per lifecycle --------------------------------------------------
#
# Each is a StrEnum, so a member equals its wire (and storage) string and serializes as it:
# the codecs write "queued", never an enum repr. The member names are the values themselves
# because python-statemachine names each state after its member (`States.from_enum`): the
# state id, the member and the wire string are then one word.


class _WireState(enum.StrEnum):
    """Shown as its wire string, also by repr: a message or a record's repr that names a
    state reads ``'done'``, as the protocol writes it, not ``<TaskStatus.done: 'done'>``."""

    def __repr__(self) -> str:
        return repr(self.value)


class TaskStatus(_WireState):
    queued = "queued"
    assigned = "assigned"
    dispatched = "dispatched"
    done = "done"
    failed = "failed"
    cancelled = "cancelled"


class AttemptState(_WireState):
    """An attempt's state; an ended attempt's `outcome` is one of the final ones."""

    leased = "leased"
    running = "running"
    done = "done"
    failed = "failed"
    cancelled = "cancelled"
    expired = "expired"
    released = "released"


class CancellationState(_WireState):
    """``none`` is the state before any request; a stored cancellation is never in it."""

    none = "none"
    pending = "pending"
    completed = "completed"
    unfulfilled = "unfulfilled"


class MessageState(_WireState):
    queued = "queued"
    delivered = "delivered"
    admitted = "admitted"
    completed = "completed"
    rejected = "rejected"
    not_admitted = "not_admitted"


class StepStatus(_WireState):
    """How one step of a reported result ended. Not a machine: a step is reported once, at the end."""

    completed = "completed"
    failed = "failed"
    interrupted = "interrupted"
    not_started = "not_started"
    refused = "refused"


class ActionState(_WireState):
    """Where one action of a session (specs/protocol.md Part D) stands. Not a machine of its own:
    ``queued -> delivered -> final``, or ``queued -> final`` when it never reached a host; the
    final states are a step outcome's (`StepStatus`), and a final state never changes."""

    queued = "queued"
    delivered = "delivered"
    completed = "completed"
    failed = "failed"
    interrupted = "interrupted"
    not_started = "not_started"
    refused = "refused"


FINAL_ACTION_STATES = frozenset(ActionState(s.value) for s in StepStatus)


S = TypeVar("S", bound=enum.StrEnum)
Guard = tuple[str, bool]  # (predicate name, the value it must have)
Move = tuple[tuple[Guard, ...], S]  # (guards, target state)
Table = dict[tuple[str, str], tuple[Move[S], ...]]


class _Guarded(StateMachine):
    """Guards read the scratch model the machine is bound to; see `drive`."""

    def __init__(self, guards: Mapping[str, bool] | None = None, start: str | None = None):
        self.guards: dict[str, bool] = dict(guards or {})
        if start is None:
            super().__init__()
        else:
            super().__init__(start_value=start)

    def cancellation_pending(self) -> bool:
        return self.guards.get("cancellation_pending", False)

    def attempts_left(self) -> bool:
        return self.guards.get("attempts_left", False)


class TaskLifecycle(_Guarded):
    """The status of a task."""

    _ = States.from_enum(
        TaskStatus, initial=TaskStatus.queued, final=(TaskStatus.done, TaskStatus.failed, TaskStatus.cancelled)
    )

    claim = _.queued.to(_.assigned)
    start = _.assigned.to(_.dispatched) | _.dispatched.to.itself(internal=True)
    renew = _.assigned.to.itself(internal=True) | _.dispatched.to.itself(internal=True)
    request_cancel = (
        _.queued.to(_.cancelled) | _.assigned.to.itself(internal=True) | _.dispatched.to.itself(internal=True)
    )
    report_done = _.assigned.to(_.done) | _.dispatched.to(_.done)
    report_failed = _.assigned.to(_.failed) | _.dispatched.to(_.failed)
    report_cancelled = _.assigned.to(_.cancelled, cond="cancellation_pending") | _.dispatched.to(
        _.cancelled, cond="cancellation_pending"
    )
    expire = (
        _.assigned.to(_.cancelled, cond="cancellation_pending")
        | _.assigned.to(_.queued, cond="attempts_left")
        | _.assigned.to(_.failed)
        | _.dispatched.to(_.cancelled, cond="cancellation_pending")
        | _.dispatched.to(_.queued, cond="attempts_left")
        | _.dispatched.to(_.failed)
    )
    # A host gives its attempt back: the task goes on as after an expiry, only sooner.
    release = (
        _.assigned.to(_.cancelled, cond="cancellation_pending")
        | _.assigned.to(_.queued, cond="attempts_left")
        | _.assigned.to(_.failed)
        | _.dispatched.to(_.cancelled, cond="cancellation_pending")
        | _.dispatched.to(_.queued, cond="attempts_left")
        | _.dispatched.to(_.failed)
    )


class AttemptLifecycle(_Guarded):
    """One attempt (a lease on one device) of a task."""

    _ = States.from_enum(
        AttemptState,
        initial=AttemptState.leased,
        final=(
            AttemptState.done,
            AttemptState.failed,
            AttemptState.cancelled,
            AttemptState.expired,
            AttemptState.released,
        ),
    )

    start = _.leased.to(_.running) | _.running.to.itself(internal=True)
    renew = _.leased.to.itself(internal=True) | _.running.to.itself(internal=True)
    report_done = _.leased.to(_.done) | _.running.to(_.done)
    report_failed = _.leased.to(_.failed) | _.running.to(_.failed)
    report_cancelled = _.leased.to(_.cancelled) | _.running.to(_.cancelled)
    expire = _.leased.to(_.expired) | _.running.to(_.expired)
    release = _.leased.to(_.released) | _.running.to(_.released)


class CancellationLifecycle(_Guarded):
    """The cancellation request of a task, if any."""

    _ = States.from_enum(
        CancellationState,
        initial=CancellationState.none,
        final=(CancellationState.completed, CancellationState.unfulfilled),
    )

    request = _.none.to(_.pending)
    deliver = _.pending.to.itself(internal=True)
    task_cancelled = _.pending.to(_.completed)
    task_finished = _.pending.to(_.unfulfilled)


class MessageLifecycle(_Guarded):
    """A message sent to a task (steer, follow-up, pause, resume)."""

    _ = States.from_enum(
        MessageState,
        initial=MessageState.queued,
        final=(MessageState.completed, MessageState.rejected, MessageState.not_admitted),
    )

    deliver = _.queued.to(_.delivered)
    # From queued: the server applies it itself (a pause or resume of a queued task, a
    # follow-up collected into its successor); from delivered: the host applied it.
    admit = _.queued.to(_.admitted) | _.delivered.to(_.admitted)
    complete = _.admitted.to(_.completed)
    reject = _.delivered.to(_.rejected)
    drop = _.queued.to(_.not_admitted) | _.delivered.to(_.not_admitted)


def transition_table(machine: type[StateMachine], states: type[S]) -> Table[S]:
    """Flatten a declaration into ``(state, event) -> moves``, in declaration order.

    `states` is the enum the machine's states come from; every target must be one of its members.
    """
    table: dict[tuple[str, str], list[Move[S]]] = {}
    for state in machine.states:
        for transition in state.transitions:
            guards = tuple((spec.attr_name, bool(spec.expected_value)) for spec in transition.cond)
            for event in transition.events:
                table.setdefault((state.value, str(event)), []).append((guards, states(transition.target.value)))
    return {key: tuple(moves) for key, moves in table.items()}


def initial_state(machine: type[StateMachine]) -> enum.StrEnum:
    value: enum.StrEnum = machine.initial_state.value
    return value


def final_states(machine: type[StateMachine]) -> frozenset[enum.StrEnum]:
    return frozenset(state.value for state in machine.states if state.final)


def events_of(machine: type[StateMachine]) -> tuple[str, ...]:
    return tuple(sorted({str(event) for state in machine.states for t in state.transitions for event in t.events}))


TASK = transition_table(TaskLifecycle, TaskStatus)
ATTEMPT = transition_table(AttemptLifecycle, AttemptState)
CANCELLATION = transition_table(CancellationLifecycle, CancellationState)
MESSAGE = transition_table(MessageLifecycle, MessageState)

TERMINAL_STATUSES = frozenset(TaskStatus(status) for status in final_states(TaskLifecycle))
ACTIVE_STATUSES = frozenset({TaskStatus.assigned, TaskStatus.dispatched})


def target(table: Table[S], state: str, event: str, guards: Mapping[str, bool] = {}) -> S | None:
    """The state that `event` moves `state` to, or None when the move is illegal.

    The first move whose guards all hold wins, as in the declaration.
    """
    moves = table.get((state, event), ())
    if len(moves) == 1 and not moves[0][0]:
        return moves[0][1]  # the common case: one unguarded move
    for required, destination in moves:
        if all(guards.get(name, False) == value for name, value in required):
            return destination
    return None


class IllegalMove(Exception):
    """The kernel applied a move its own lifecycle declarations forbid: a bug in the kernel,
    never the caller's (a refused command is a `Rejection`, decided before anything moves)."""


def move(table: Table[S], state: str, event: str, guards: Mapping[str, bool] = {}) -> S:
    """The state that `event` moves `state` to, where the move cannot be illegal: what an
    event does when it is applied, or what a command does once its checks have passed.
    Raises `IllegalMove` when it is; `target` is for the checks, where illegal means refused."""
    moves = table.get((state, event), ())
    if len(moves) == 1 and not moves[0][0]:
        return moves[0][1]  # the common case, as in `target`, without a second call
    destination = target(table, state, event, guards)
    if destination is None:
        raise IllegalMove(f"{event!r} cannot move {state!r} (guards: {dict(guards)})")
    return destination


def drive(machine: type[_Guarded], state: str, event: str, guards: Mapping[str, bool] = {}) -> enum.StrEnum:
    """Run one event through the python-statemachine declaration itself (slow; tests only).

    Raises `statemachine.exceptions.TransitionNotAllowed` for an illegal move.
    """
    instance = machine(guards=guards, start=state)
    instance.send(event)
    (current,) = instance.configuration
    value: enum.StrEnum = current.value
    return value
