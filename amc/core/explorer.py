"""An exhaustive, bounded model checker for the kernel (breadth-first, in the manner of TLC).

In a small scope (a few hosts with one device each, a few tasks, a small `max_attempts`)
it tries every command in every reachable state: submit, claim, start, renew, each terminal
report, a release (the host gives the attempt back), cancel, a device leaving and coming back, and a clock step of one tick. With
`messages` on, it also posts every kind of message (a pause, a resume, a steer that skips
the second step, a follow-up) up to `messages` per task, and acknowledges every message an
attempt was given in every way (admitted before each step or after the last, completed,
rejected); results then report the steps the attempt's edited plan has. With `artifacts`
on, every attempt (live or stale), and a foreign host on its behalf, stores evidence: two
names, two contents, a step of the plan and one that is not, up to `artifacts` per task,
against a per-task limit that the last one passes; each attempt reports `done` with its
steps listing every artifact of the task (refused when one is another attempt's); and every
task holding some has them purged (refused until it ended). After each
transition it checks the invariants (`amc.core.invariants`), and that a rejected command
changed nothing. Breadth-first order makes the first violation found a shortest one.

Absolute times grow forever, so states are compared by a fingerprint that keeps what
decides behaviour (statuses, attempts and their owners, how far each active lease is from
expiry, cancellations, reservations) and drops what only records history (timestamps,
renewal counts). Two states with one fingerprint have the same futures up to timestamps.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from itertools import permutations
from typing import TypedDict

import attrs

from amc.core import invariants, kernel
from amc.core.commands import (
    AcknowledgeMessage,
    CancelTask,
    ClaimTask,
    Command,
    ExpireLeases,
    PostMessage,
    PurgeArtifacts,
    RegisterHost,
    ReleaseAttempt,
    RenewLease,
    ReportResult,
    StartAttempt,
    StoreArtifact,
    SubmitTask,
)
from amc.core.lifecycle import MessageState, StepStatus, TaskStatus
from amc.core.records import Boundary, DeviceSpec, Plan, Step, StepOutcome, Task, replace
from amc.core.state import State
from amc.core.steering import STEERED, attempt_outline, planned_step_ids

PLAN = Plan(steps=(Step(id="only", action="wait", args={"seconds": 1}),))
# With messages, two steps: a boundary between them is where a steer or a pause lands.
TWO_STEPS = Plan(steps=(Step(id="a", action="wait", args={"seconds": 1}), Step(id="b", action="screenshot", args={})))
MESSAGES = (
    ("pause", None),
    ("resume", None),
    ("steer", {"skip": ["b"]}),
    ("follow_up", {"steps": [{"id": "c", "action": "screenshot", "args": {}}]}),
)


# What decides a state's future (see the module docstring): its tasks and its hosts, each a
# tuple of plain values, so fingerprints hash and order.
Fingerprint = tuple[tuple[object, ...], tuple[object, ...]]


class _Lease(TypedDict):
    """The fields every command about one attempt carries."""

    now: int
    host_id: str
    task_id: str
    attempt: int
    lease_id: str


class _Acknowledgement(_Lease):
    message_id: str


@attrs.frozen
class Scope:
    hosts: int = 2
    tasks: int = 2
    max_attempts: int = 2
    lease_ticks: int = 2  # a lease lasts this many clock steps
    tick_ms: int = 1_000
    churn: bool = False  # also let devices leave and come back
    messages: int = 0  # Part B: up to this many messages per submitted task
    artifacts: int = 0  # Part C: up to this many artifacts per task (the limit lets one fewer in)
    max_states: int = 1_000_000


@attrs.frozen
class Exploration:
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
            plan = TWO_STEPS if scope.messages else PLAN
            yield (
                f"submit {task_id}",
                SubmitTask(now=now, task_id=task_id, tenant="acme", plan=plan, max_attempts=scope.max_attempts),
            )
            break  # tasks are submitted in order: their order matters only through `seq`
    for host, serial in _hosts(scope):
        known = state.hosts.get(host)
        yield (
            f"claim {host}",
            ClaimTask(now=now, host_id=host, lease_id="pending", lease_ms=scope.lease_ticks * scope.tick_ms),
        )
        if known is not None and not scope.churn:
            continue
        online = known is not None and any(d.serial == serial and d.online for d in known.devices)
        listed = () if online else (DeviceSpec(serial=serial),)
        label = f"{host} loses {serial}" if online else f"{host} registers {serial}"
        yield label, RegisterHost(now=now, host_id=host, devices=listed)
    for task in state.tasks.values():
        yield f"cancel {task.id}", CancelTask(now=now, task_id=task.id, tenant=None)
        if scope.messages and task.follow_up_of is None and len(task.messages) < scope.messages:
            message_id = f"{task.id}m{len(task.messages) + 1}"
            for intent, data in MESSAGES:
                yield (
                    f"{intent} {task.id}",
                    PostMessage(now=now, task_id=task.id, tenant=None, message_id=message_id, intent=intent, data=data),
                )
        for attempt in task.attempts:
            lease = _Lease(
                now=now, host_id=attempt.host_id, task_id=task.id, attempt=attempt.number, lease_id=attempt.lease_id
            )
            tag = f"{task.id}#{attempt.number}"
            yield f"start {tag}", StartAttempt(**lease)
            yield f"renew {tag}", RenewLease(**lease)
            steps = _steps_of(task, attempt.number) if scope.messages else None
            for status in (TaskStatus.done, TaskStatus.failed, TaskStatus.cancelled):
                yield f"report {status} {tag}", ReportResult(**lease, status=status, steps=steps)
            if task.artifacts:  # the steps listing every artifact of the task: refused unless all are this attempt's
                evidenced = _with_evidence(task, steps if steps is not None else _steps_of(task, attempt.number))
                yield f"report done with evidence {tag}", ReportResult(**lease, status=TaskStatus.done, steps=evidenced)
            yield f"release {tag}", ReleaseAttempt(**lease, reason="host_stopping", steps=steps)
            if scope.messages:
                yield from _acknowledgements(task, attempt.number, lease, tag)
            if len(task.artifacts) < scope.artifacts:
                yield from _artifact_uploads(state, task, lease, tag, scope)
        if scope.artifacts and task.artifacts:
            yield f"purge {task.id}", PurgeArtifacts(now=now, task_id=task.id)
    yield "tick", ExpireLeases(now=now + scope.tick_ms)


def _steps_of(task: Task, number: int) -> tuple[StepOutcome, ...]:
    """Every step of the attempt's plan completed, but those a correction removed."""
    return tuple(
        StepOutcome(id=e.step.id, status=StepStatus.not_started, reason=STEERED)
        if e.removed_by
        else StepOutcome(id=e.step.id, status=StepStatus.completed)
        for e in attempt_outline(task, number)
    )


def _with_evidence(task: Task, steps: tuple[StepOutcome, ...]) -> tuple[StepOutcome, ...]:
    """`steps`, each listing every artifact of the task stored for it, by any attempt."""
    return tuple(replace(o, artifacts=tuple(a.id for a in task.artifacts if a.step == o.id)) for o in steps)


def _acknowledgements(task: Task, number: int, lease: _Lease, tag: str) -> Iterator[tuple[str, Command]]:
    """Every acknowledgement of every message attempt `number` was given."""
    boundaries = [None, *planned_step_ids(task, number)]
    for m in task.messages:
        if m.attempt != number:
            continue
        ack = _Acknowledgement(**lease, message_id=m.id)
        for before in boundaries:
            yield (
                f"admit {m.id} before {before} {tag}",
                AcknowledgeMessage(**ack, state=MessageState.admitted, boundary=Boundary(before_step=before)),
            )
        yield f"complete {m.id} {tag}", AcknowledgeMessage(**ack, state=MessageState.completed)
        yield f"reject {m.id} {tag}", AcknowledgeMessage(**ack, state=MessageState.rejected, detail="cannot")


def _artifact_uploads(state: State, task: Task, lease: _Lease, tag: str, scope: Scope) -> Iterator[tuple[str, Command]]:
    """Uploads by the attempt's host and by another one: a step of the plan or not, two names
    and two contents; each artifact is one byte, and the task may hold one fewer than
    `scope.artifacts`, so the last upload is over the limit."""
    step = planned_step_ids(task, lease["attempt"])[0]
    others = [h for h in sorted(state.hosts) if h != lease["host_id"]][:1]
    for host in [lease["host_id"], *others]:
        who = "" if host == lease["host_id"] else f" by {host}"
        sent: _Lease = {**lease, "host_id": host}
        for name, content in (("x", "a"), ("x", "b"), ("y", "a")):
            yield (
                f"store {name}={content}{who} {tag}",
                StoreArtifact(
                    **sent,
                    artifact_id=f"{task.id}a{len(task.artifacts) + 1}",
                    step=step,
                    name=name,
                    content_type="text/plain",
                    size=1,
                    sha256=content * 64,
                    max_task_bytes=scope.artifacts - 1,
                ),
            )
    yield (
        f"store for an unplanned step {tag}",
        StoreArtifact(
            **lease,
            artifact_id="unplanned",
            step="nowhere",
            name="z",
            content_type="text/plain",
            size=1,
            sha256="c" * 64,
            max_task_bytes=scope.artifacts,
        ),
    )


def fingerprint(state: State, now: int) -> Fingerprint:
    """What decides the future of `state` at `now`; see the module docstring.

    Hosts are interchangeable (each has one device and nothing tells them apart), so the
    fingerprint is the least over every renaming of the hosts: symmetric states count once.
    """
    names = sorted(state.hosts)
    return min(_fingerprint(state, now, dict(zip(names, order))) for order in permutations(names))


def _fingerprint(state: State, now: int, rename: dict[str, str]) -> Fingerprint:
    def host(host_id: str) -> str:
        return rename.get(host_id, host_id)

    tasks = tuple(
        (
            t.id,
            t.status,
            tuple(
                (
                    host(a.host_id),
                    a.outcome,
                    a.dispatched_at is not None,
                    max(a.lease_expires_at - now, 0) if a.active else None,
                )
                for a in t.attempts
            ),
            None if t.cancellation is None else (t.cancellation.state, t.cancellation.delivered_at is not None),
            None if t.result is None else (t.result.status, t.result.reason),
            t.paused,
            tuple((m.intent, m.state, m.attempt, m.boundary, m.successor) for m in t.messages),
            t.admissions,
            tuple((a.attempt, a.step, a.name, a.sha256) for a in t.artifacts),
        )
        for t in sorted(state.tasks.values(), key=lambda t: t.id)
    )
    hosts = tuple(
        sorted(
            (
                host(h.id),
                tuple((d.online, d.reservation and (d.reservation.task_id, d.reservation.attempt)) for d in h.devices),
            )
            for h in state.hosts.values()
        )
    )
    return tasks, hosts


def _clone(state: State) -> State:
    return State.from_records(state.tasks.values(), state.hosts.values())


def explore(scope: Scope, progress: Callable[[int, int, int], None] | None = None) -> Exploration:
    """Breadth-first over every command sequence in `scope`."""
    start = State()
    root = fingerprint(start, 0)
    parents: dict[Fingerprint, tuple[Fingerprint, str] | None] = {root: None}
    frontier: deque[tuple[State, int, Fingerprint, int]] = deque([(start, 0, root, 0)])
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
                return Exploration(len(parents), transitions, level + 1, True, found, _trace(parents, key) + [label])
            if next_key in parents:
                continue
            parents[next_key] = (key, label)
            if len(parents) >= scope.max_states:
                return Exploration(len(parents), transitions, level + 1, False)
            frontier.append((after, command.now, next_key, level + 1))
        if progress is not None:
            progress(len(parents), transitions, len(frontier))
    return Exploration(len(parents), transitions, depth, True)


def _trace(parents: dict[Fingerprint, tuple[Fingerprint, str] | None], key: Fingerprint) -> list[str]:
    labels: list[str] = []
    while (parent := parents[key]) is not None:
        key, label = parent
        labels.append(label)
    return labels[::-1]
