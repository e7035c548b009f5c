"""Leases (specs/protocol.md Part A): the start, renewals, release and expiry of an attempt.

A claim gives a task's new attempt a lease on one device (`amc.core.kernel`). The host's
start acknowledges it and its renewals keep it alive, each for the attempt's `lease_ms`;
every grant carries a pending cancellation and the messages the host has not acknowledged.
An attempt ends without a verdict when its host releases it or when its lease expires
(``now >= lease_expires_at``, applied before any command at that time sees it); the task
then goes on as the lifecycle routes it: cancelled if a cancellation is pending, queued
again if attempts are left, else failed. The lease checks (foreign, unknown, replaced,
ended, expired) stay in `amc.core.decisions`: the message, session and artifact deciders
run them too, and this module imports those.

The kernel (`amc.core.kernel`) dispatches to the deciders and appliers here, and calls
`end_attempt` and `set_reservation` where a report ends an attempt and a claim reserves a
device.
"""

from __future__ import annotations

from collections.abc import Iterable

from amc.core import lifecycle, messages, outcomes, sessions, steering
from amc.core.commands import ExpireLeases, ReleaseAttempt, RenewLease, StartAttempt
from amc.core.decisions import (
    Decision,
    LeaseGranted,
    LeasesExpired,
    ReleaseRecorded,
    check_current,
    check_holder,
    check_lease,
    check_live,
    find_attempt,
    reject,
)
from amc.core.errors import Code
from amc.core.events import (
    AttemptReleased,
    AttemptStarted,
    CancellationDelivered,
    Event,
    LeaseExpired,
    LeaseExtended,
    LeaseRenewed,
    MessagesDelivered,
    TaskEnded,
    TaskRequeued,
)
from amc.core.lifecycle import AttemptState, TaskStatus
from amc.core.records import Attempt, Message, Reservation, StepOutcome, Task, replace
from amc.core.state import State

# ---------------------------------------------------------------------------------------
# decide


def grant(state: State, c: StartAttempt | RenewLease) -> Decision:
    """A start or a renewal: the lease runs `lease_ms` from now. The first start dispatches
    the attempt; a start repeated (its answer lost) extends the lease, as a renewal does, but
    is not counted as one."""
    found = _leased_with_progress(state, c)
    if isinstance(found, Decision):
        return found
    task, attempt = found
    kind: type[AttemptStarted | LeaseExtended | LeaseRenewed]
    if type(c) is RenewLease:
        kind, event = LeaseRenewed, "renew"
    elif attempt.dispatched_at is None:
        kind, event = AttemptStarted, "start"
    else:
        kind, event = LeaseExtended, "start"
    expires_at = c.now + attempt.lease_ms
    extended = kind(at=c.now, task_id=task.id, attempt=attempt.number, lease_expires_at=expires_at)
    status = lifecycle.move(lifecycle.TASK, task.status, event)  # a live attempt can always start and renew
    return _granted(task, attempt, c.now, status, expires_at, extended)


def _leased_with_progress(state: State, c: StartAttempt | RenewLease) -> tuple[Task, Attempt] | Decision:
    """The live attempt a start or renewal names, if its progress names a step of the plan as
    steered so far: a bad step is a bad body, refused before the lease checks (PROGRESS/s1)."""
    found = find_attempt(state, c)
    if isinstance(found, Decision):
        return found
    task, attempt = found
    if c.progress_step is not None and not steering.is_known_step(task, c.progress_step):
        return reject(
            Code.invalid_request,
            f"progress.step: step {c.progress_step!r} is not in the task's plan as steered so far",
        )
    refusal = check_lease(task, attempt, c)
    return refusal if refusal is not None else (task, attempt)


def _granted(task: Task, attempt: Attempt, now: int, status: TaskStatus, expires_at: int, extended: Event) -> Decision:
    """A start or renewal response. The first one to carry a pending cancellation delivers
    it; every one carries the messages the host has not acknowledged (queued ones become
    delivered to this attempt)."""
    events: tuple[Event, ...] = (extended,)
    pending = task.cancellation_pending
    if pending and task.cancellation is not None and task.cancellation.delivered_at is None:
        events += (CancellationDelivered(at=now, task_id=task.id, attempt=attempt.number),)
    carried: tuple[Message, ...] = ()
    if task.messages:
        carried, fresh = messages.carried_messages(task, attempt.number, now)
        if fresh:
            events += (MessagesDelivered(at=now, task_id=task.id, attempt=attempt.number, message_ids=fresh),)
    reply = LeaseGranted(
        task_id=task.id,
        attempt=attempt.number,
        status=status,
        lease_expires_at=expires_at,
        cancel_requested=pending,
        messages=carried,
    )
    return Decision(events=events, reply=reply)


def release(state: State, c: ReleaseAttempt) -> Decision:
    found = outcomes.reported_attempt(state, c)
    if isinstance(found, Decision):
        return found
    task, attempt = found
    refusal = check_holder(attempt, c)
    if refusal is not None:
        return refusal
    if attempt.outcome == AttemptState.released:
        # Before the replaced check: the identical release again is answered as recorded even
        # after the task was claimed again (the host's answer may have been lost).
        if (attempt.release_reason, attempt.steps) == (c.reason, c.steps):
            return Decision(reply=ReleaseRecorded(task.id, repeated=True))
        return reject(Code.result_conflict, f"attempt {attempt.number} was already released differently")
    refusal = check_current(task, attempt) or check_live(attempt, c.now)
    if refusal is not None:
        return refusal
    released = AttemptReleased(at=c.now, task_id=task.id, attempt=attempt.number, reason=c.reason, steps=c.steps)
    events = (released,) + _after_attempt(state, task, attempt.number, c.now, "release")
    return Decision(events=events, reply=ReleaseRecorded(task.id, repeated=False))


def expire(state: State, c: ExpireLeases) -> Decision:
    """Every lease expiry and session idle end due at `c.now`, in time order (a lease before
    an idle end at the same instant, then by task id); a task's first due end is its only one."""
    due = [(at, 0, task_id, number) for at, task_id, number in state.leases.due(c.now, state.tasks)]
    due += [(at, 1, task_id, number) for at, task_id, number in state.idle.due(c.now, state.tasks)]
    events: list[Event] = []
    ended: set[str] = set()
    for at, kind, task_id, number in sorted(due):
        if task_id in ended:
            continue
        ended.add(task_id)
        if kind == 1:
            events.extend(sessions.idle_end(state, state.tasks[task_id], at))
            continue
        events.append(LeaseExpired(at=at, task_id=task_id, attempt=number))
        events.extend(_after_attempt(state, state.tasks[task_id], number, at, "expire"))
    return Decision(events=tuple(events), reply=LeasesExpired(count=count_expired(events)))


def count_expired(events: Iterable[Event]) -> int:
    return sum(isinstance(e, LeaseExpired) for e in events)


# The result reason of a task cancelled because its attempt ended with a cancellation pending.
_CANCELLED_BY = {"expire": "lease_expired_with_cancellation", "release": "released_with_cancellation"}


def _after_attempt(state: State, task: Task, number: int, at: int, event: str) -> tuple[Event, ...]:
    """Where the task goes once its active attempt `number` ended without a verdict (`event`:
    ``expire`` or ``release``): cancelled if a cancellation is pending, else queued again if
    attempts are left, else failed; with what that does to its messages."""
    guards = {"cancellation_pending": task.cancellation_pending, "attempts_left": task.attempts_left}
    # Both events end in failed when no guarded move applies.
    status = lifecycle.move(lifecycle.TASK, task.status, event, guards)
    lost = sessions.attempt_lost(task, at)
    if status == TaskStatus.queued:
        return (*lost, TaskRequeued(at=at, task_id=task.id), *messages.requeue_messages(task, number, at))
    reason = _CANCELLED_BY[event] if status == TaskStatus.cancelled else "attempts_exhausted"
    ended = TaskEnded(at=at, task_id=task.id, status=status, reason=reason, attempt=number)
    return (*lost, ended, *messages.settle_messages(state, task, at, status))


# ---------------------------------------------------------------------------------------
# apply


def apply_started(state: State, e: AttemptStarted) -> None:
    task = state.tasks[e.task_id]
    status = lifecycle.move(lifecycle.TASK, task.status, "start")
    attempt = replace(task.attempts[-1], dispatched_at=e.at, lease_expires_at=e.lease_expires_at)
    _put_attempt(state, task, e.at, attempt, status)
    state.leases.push(e.lease_expires_at, e.task_id, e.attempt)
    state.leases.clean(state.tasks)


def apply_extended(state: State, e: LeaseRenewed | LeaseExtended) -> None:
    task = state.tasks[e.task_id]
    attempt = task.attempts[-1]
    renewals = attempt.renewals + (type(e) is LeaseRenewed)
    _put_attempt(state, task, e.at, replace(attempt, lease_expires_at=e.lease_expires_at, renewals=renewals))
    state.leases.push(e.lease_expires_at, e.task_id, e.attempt)
    state.leases.clean(state.tasks)


def apply_expired(state: State, e: LeaseExpired) -> None:
    end_attempt(state, state.tasks[e.task_id], "expire", e.at)


def apply_released(state: State, e: AttemptReleased) -> None:
    end_attempt(state, state.tasks[e.task_id], "release", e.at, steps=e.steps, release_reason=e.reason)


def end_attempt(
    state: State,
    task: Task,
    event: str,
    at: int,
    steps: tuple[StepOutcome, ...] | None = None,
    release_reason: str | None = None,
) -> Task:
    """End the active attempt by `event` (an `AttemptLifecycle` event) and release its device;
    a release keeps its step outcomes and reason on the attempt (nothing else sets them)."""
    attempt = task.attempts[-1]
    outcome = lifecycle.move(lifecycle.ATTEMPT, attempt.state, event)
    ended = replace(attempt, outcome=outcome, ended_at=at, steps=steps, release_reason=release_reason)
    task = _put_attempt(state, task, at, ended)
    set_reservation(state, attempt.host_id, attempt.device, None)
    state.leases.clean(state.tasks)
    state.idle.clean(state.tasks)
    return task


def _put_attempt(state: State, task: Task, at: int, attempt: Attempt, status: TaskStatus | None = None) -> Task:
    """Put `attempt` in place of the task's active (last) one, and the task in `status`
    (None: as it is)."""
    task = replace(task, attempts=task.attempts[:-1] + (attempt,), status=status or task.status, updated_at=at)
    state.put_task(task)
    return task


def set_reservation(state: State, host_id: str, serial: str, reservation: Reservation | None) -> None:
    """Reserve a device for an attempt, or (None) free it when the attempt ends."""
    host = state.hosts[host_id]
    devices = []
    for device in host.devices:
        if device.serial == serial:
            if reservation is None and not device.online:
                continue  # it left the inventory while reserved; now it is gone
            device = replace(device, reservation=reservation)
        devices.append(device)
    state.put_host(replace(host, devices=tuple(devices)))
