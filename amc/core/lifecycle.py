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
    attempts left (``queued`` again), else ``failed``. A cancel on a queued task ends it at
    once; on an in-flight task it only records a request (a self-transition) that the
    cancellation machine tracks.

``AttemptLifecycle``
    One per claim: ``leased -> running -> {done, failed, cancelled, expired}``. Only the
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

The declarations below, written with python-statemachine, are the source of truth: the
diagrams and tables in ``specs/lifecycles/`` are rendered from them. But driving a
python-statemachine instance costs hundreds of microseconds per transition, so the kernel
never does. At import time, `transition_table` flattens each declaration into a plain dict
``(state, event) -> [(guards, target), ...]`` and the kernel looks moves up with `target`.
A failed lookup is an illegal move. ``tests/model/test_lifecycle.py`` drives the
declarations and the kernel side by side to prove the two agree.

Guards are named predicates over the kernel's state (``cancellation_pending``,
``attempts_left``). The kernel evaluates them itself and passes their values in by name,
so a guard has one meaning in both worlds.
"""

from __future__ import annotations

from collections.abc import Mapping

from statemachine import State, StateMachine

Guard = tuple[str, bool]  # (predicate name, the value it must have)
Move = tuple[tuple[Guard, ...], str]  # (guards, target state)
Table = dict[tuple[str, str], tuple[Move, ...]]


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

    queued = State(initial=True)
    assigned = State()
    dispatched = State()
    done = State(final=True)
    failed = State(final=True)
    cancelled = State(final=True)

    claim = queued.to(assigned)
    start = assigned.to(dispatched) | dispatched.to.itself(internal=True)
    renew = assigned.to.itself(internal=True) | dispatched.to.itself(internal=True)
    request_cancel = (
        queued.to(cancelled)
        | assigned.to.itself(internal=True)
        | dispatched.to.itself(internal=True)
    )
    report_done = assigned.to(done) | dispatched.to(done)
    report_failed = assigned.to(failed) | dispatched.to(failed)
    report_cancelled = assigned.to(cancelled, cond="cancellation_pending") | dispatched.to(
        cancelled, cond="cancellation_pending"
    )
    expire = (
        assigned.to(cancelled, cond="cancellation_pending")
        | assigned.to(queued, cond="attempts_left")
        | assigned.to(failed)
        | dispatched.to(cancelled, cond="cancellation_pending")
        | dispatched.to(queued, cond="attempts_left")
        | dispatched.to(failed)
    )


class AttemptLifecycle(_Guarded):
    """One attempt (a lease on one device) of a task."""

    leased = State(initial=True)
    running = State()
    done = State(final=True)
    failed = State(final=True)
    cancelled = State(final=True)
    expired = State(final=True)

    start = leased.to(running) | running.to.itself(internal=True)
    renew = leased.to.itself(internal=True) | running.to.itself(internal=True)
    report_done = leased.to(done) | running.to(done)
    report_failed = leased.to(failed) | running.to(failed)
    report_cancelled = leased.to(cancelled) | running.to(cancelled)
    expire = leased.to(expired) | running.to(expired)


class CancellationLifecycle(_Guarded):
    """The cancellation request of a task, if any."""

    none = State(initial=True)
    pending = State()
    completed = State(final=True)
    unfulfilled = State(final=True)

    request = none.to(pending)
    deliver = pending.to.itself(internal=True)
    task_cancelled = pending.to(completed)
    task_finished = pending.to(unfulfilled)


class MessageLifecycle(_Guarded):
    """A message sent to a task (steer, follow-up, pause, resume)."""

    queued = State(initial=True)
    delivered = State()
    admitted = State()
    completed = State(final=True)
    rejected = State(final=True)
    not_admitted = State(final=True)

    deliver = queued.to(delivered)
    # From queued: the server applies it itself (a pause or resume of a queued task, a
    # follow-up collected into its successor); from delivered: the host applied it.
    admit = queued.to(admitted) | delivered.to(admitted)
    complete = admitted.to(completed)
    reject = delivered.to(rejected)
    drop = queued.to(not_admitted) | delivered.to(not_admitted)


def transition_table(machine: type[StateMachine]) -> Table:
    """Flatten a declaration into ``(state, event) -> moves``, in declaration order."""
    table: dict[tuple[str, str], list[Move]] = {}
    for state in machine.states:
        for transition in state.transitions:
            guards = tuple(
                (spec.attr_name, bool(spec.expected_value)) for spec in transition.cond
            )
            for event in transition.events:
                table.setdefault((state.id, str(event)), []).append(
                    (guards, transition.target.id)
                )
    return {key: tuple(moves) for key, moves in table.items()}


def final_states(machine: type[StateMachine]) -> frozenset[str]:
    return frozenset(state.id for state in machine.states if state.final)


def events_of(machine: type[StateMachine]) -> tuple[str, ...]:
    return tuple(sorted({event for (_, event) in transition_table(machine)}))


TASK = transition_table(TaskLifecycle)
ATTEMPT = transition_table(AttemptLifecycle)
CANCELLATION = transition_table(CancellationLifecycle)
MESSAGE = transition_table(MessageLifecycle)

TERMINAL_STATUSES = final_states(TaskLifecycle)
ACTIVE_STATUSES = frozenset({"assigned", "dispatched"})


def target(table: Table, state: str, event: str, guards: Mapping[str, bool] = {}) -> str | None:
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


def drive(machine: type[_Guarded], state: str, event: str, guards: Mapping[str, bool] = {}) -> str:
    """Run one event through the python-statemachine declaration itself (slow; tests only).

    Raises `statemachine.exceptions.TransitionNotAllowed` for an illegal move.
    """
    instance = machine(guards=guards, start=state)
    instance.send(event)
    (current,) = instance.configuration
    return current.id
