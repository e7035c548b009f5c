"""An exhaustive, bounded model checker for the kernel (breadth-first, in the manner of TLC).

In a small scope (a few hosts with one device each, a few tasks, a small `max_attempts`)
it tries every command in every reachable state: submit, claim, start, renew, each terminal
report, cancel, a device leaving and coming back, and a clock step of one tick. After each
transition it checks the invariants (`amc.core.invariants`), and that a rejected command
changed nothing. Breadth-first order makes the first violation found a shortest one.

Absolute times grow forever, so states are compared by a fingerprint that keeps what
decides behaviour (statuses, attempts and their owners, how far each active lease is from
expiry, cancellations, reservations) and drops what only records history (timestamps,
renewal counts). Two states with one fingerprint have the same futures up to timestamps.
"""

from __future__ import annotations

from collections import deque
from itertools import permutations
from collections.abc import Callable, Iterator

import attrs

from amc.core import invariants, kernel
from amc.core.commands import (
    CancelTask,
    ClaimTask,
    Command,
    ExpireLeases,
    RegisterHost,
    RenewLease,
    ReportResult,
    StartAttempt,
    SubmitTask,
)
from amc.core.records import DeviceSpec, Plan, Step
from amc.core.state import State

PLAN = Plan(steps=(Step(id="only", action="wait", args={"seconds": 1}),))


@attrs.frozen
class Scope:
    hosts: int = 2
    tasks: int = 2
    max_attempts: int = 2
    lease_ticks: int = 2  # a lease lasts this many clock steps
    tick_ms: int = 1_000
    churn: bool = False  # also let devices leave and come back
    max_states: int = 1_000_000


@attrs.frozen
class Result:
    states: int
    transitions: int
    depth: int
    complete: bool  # False when max_states stopped the search early
    violation: list[str] | None = None
    trace: list[str] | None = None  # the shortest command sequence that reaches it


def _hosts(scope: Scope) -> list[tuple[str, str]]:
    return [(f"h{i}", f"d{i}") for i in range(1, scope.hosts + 1)]


def commands(state: State, now: int, scope: Scope) -> Iterator[tuple[str, Command]]:
    """Every command worth trying in `state`, with a short label for traces."""
    for n in range(1, scope.tasks + 1):
        task_id = f"t{n}"
        if task_id not in state.tasks:
            yield f"submit {task_id}", SubmitTask(now=now, task_id=task_id, tenant="acme", plan=PLAN,
                                                  max_attempts=scope.max_attempts)
            break  # tasks are submitted in order: their order matters only through `seq`
    for host, serial in _hosts(scope):
        known = state.hosts.get(host)
        yield f"claim {host}", ClaimTask(now=now, host_id=host, lease_id="pending", lease_ms=scope.lease_ticks * scope.tick_ms)
        if known is not None and not scope.churn:
            continue
        online = known is not None and any(d.serial == serial and d.online for d in known.devices)
        listed = () if online else (DeviceSpec(serial=serial),)
        label = f"{host} loses {serial}" if online else f"{host} registers {serial}"
        yield label, RegisterHost(now=now, host_id=host, devices=listed)
    for task in state.tasks.values():
        yield f"cancel {task.id}", CancelTask(now=now, task_id=task.id, tenant=None)
        for attempt in task.attempts:
            lease = dict(now=now, host_id=attempt.host_id, task_id=task.id, attempt=attempt.number, lease_id=attempt.lease_id)
            tag = f"{task.id}#{attempt.number}"
            yield f"start {tag}", StartAttempt(**lease)
            yield f"renew {tag}", RenewLease(**lease)
            for status in ("done", "failed", "cancelled"):
                yield f"report {status} {tag}", ReportResult(**lease, status=status)
    yield "tick", ExpireLeases(now=now + scope.tick_ms)


def fingerprint(state: State, now: int) -> tuple:
    """What decides the future of `state` at `now`; see the module docstring.

    Hosts are interchangeable (each has one device and nothing tells them apart), so the
    fingerprint is the least over every renaming of the hosts: symmetric states count once.
    """
    names = sorted(state.hosts)
    return min(_fingerprint(state, now, dict(zip(names, order))) for order in permutations(names))


def _fingerprint(state: State, now: int, rename: dict[str, str]) -> tuple:
    def host(host_id: str) -> str:
        return rename.get(host_id, host_id)

    tasks = tuple(
        (
            t.id,
            t.status,
            tuple(
                (host(a.host_id), a.outcome, a.dispatched_at is not None,
                 max(a.lease_expires_at - now, 0) if a.active else None)
                for a in t.attempts
            ),
            None if t.cancellation is None else (t.cancellation.state, t.cancellation.delivered_at is not None),
            None if t.result is None else (t.result.status, t.result.reason),
        )
        for t in sorted(state.tasks.values(), key=lambda t: t.id)
    )
    hosts = tuple(sorted(
        (host(h.id), tuple((d.online, d.reservation and (d.reservation.task_id, d.reservation.attempt)) for d in h.devices))
        for h in state.hosts.values()
    ))
    return tasks, hosts


def _clone(state: State) -> State:
    return State.from_records(state.tasks.values(), state.hosts.values())


def explore(scope: Scope, progress: Callable[[int, int, int], None] | None = None) -> Result:
    """Breadth-first over every command sequence in `scope`."""
    start = State()
    root = fingerprint(start, 0)
    parents: dict[tuple, tuple[tuple, str] | None] = {root: None}
    frontier: deque[tuple[State, int, tuple, int]] = deque([(start, 0, root, 0)])
    transitions = depth = 0
    while frontier:
        state, now, key, level = frontier.popleft()
        depth = max(depth, level)
        for label, command in commands(state, now, scope):
            transitions += 1
            if isinstance(command, ClaimTask):
                # Lease ids are fresh in real life; here they are named by what they lease.
                task_count = sum(len(t.attempts) for t in state.tasks.values())
                command = attrs.evolve(command, lease_id=f"L{task_count + 1}")
            # Every expiry due at `now` was applied on the way here, so only a tick can
            # expire anything; a rejected command is a self-loop and needs no copy.
            decision = kernel.decide(state, command)
            if not decision.accepted:
                continue
            after = _clone(state)
            for event in decision.events:
                kernel.apply(after, event)
            found = invariants.violations(after, state, command.now)
            next_key = fingerprint(after, command.now)
            if found:
                return Result(len(parents), transitions, level + 1, True, found, _trace(parents, key) + [label])
            if next_key in parents:
                continue
            parents[next_key] = (key, label)
            if len(parents) >= scope.max_states:
                return Result(len(parents), transitions, level + 1, False)
            frontier.append((after, command.now, next_key, level + 1))
        if progress is not None:
            progress(len(parents), transitions, len(frontier))
    return Result(len(parents), transitions, depth, True)


def _trace(parents: dict, key: tuple) -> list[str]:
    labels: list[str] = []
    while parents[key] is not None:
        key, label = parents[key]
        labels.append(label)
    return labels[::-1]
