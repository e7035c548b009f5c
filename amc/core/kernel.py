"""The transition kernel: `decide` what a command means, `apply` what happened.

    decide(state, command) -> Decision      pure; never mutates the state
    apply(state, event) -> state            the only way the state changes
    execute(state, command) -> Decision     expire due leases, then decide and apply

`decide` answers with a `Rejection` (a protocol error code; the state is untouched) or
with the events the command causes and a reply. Replaying the events of a log through
`apply` rebuilds the same state, so a store only needs to keep the events.

Time arrives inside the command. `execute` first applies every lease expiry due at
`now` (a lease is expired when ``now >= lease_expires_at``) and only then decides the
command, so no command ever observes an expired lease as active. The expiry events are
returned with the command's own, first, even when the command is rejected: time passing
is not something a rejection can undo.

Which status a task moves to is looked up in the tables derived from the lifecycle
declarations (`amc.core.lifecycle`); this module decides the rest: who may do what, in
which order the lease checks run, which device a claim gets. Replies and the shared
checks are in `amc.core.decisions`; the start, renewal, release and expiry of a lease in
`amc.core.leases`; messages (Part B) in `amc.core.messages`; artifacts (Part C) in
`amc.core.artifacts`; sessions (Part D) in `amc.core.sessions`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import attrs

from amc.core import artifacts, leases, lifecycle, messages, outcomes, sessions, steering
from amc.core.commands import (
    AcknowledgeMessage,
    CancelTask,
    ClaimTask,
    Command,
    EndSession,
    ExpireLeases,
    PollAction,
    PostAction,
    PostMessage,
    PurgeArtifacts,
    RegisterHost,
    ReleaseAttempt,
    RenewLease,
    ReportAction,
    ReportResult,
    StartAttempt,
    StoreArtifact,
    SubmitTask,
)
from amc.core.decisions import (  # noqa: F401  (replies are part of this module's interface)
    AcknowledgementRecorded,
    ActionAccepted,
    ActionRecorded,
    Assignment,
    CancelAccepted,
    Decision,
    HostUpdated,
    LeaseGranted,
    LeasesExpired,
    MessageAccepted,
    NoAssignment,
    PollAnswer,
    ReleaseRecorded,
    Reply,
    ResultRecorded,
    SessionEndAccepted,
    Submitted,
    check_live,
    check_ownership,
    find_attempt,
    reject,
    visible_task,
)
from amc.core.errors import Code
from amc.core.events import (
    ActionDelivered,
    ActionEnded,
    ActionPosted,
    ArtifactsPurged,
    ArtifactStored,
    AttemptReleased,
    AttemptStarted,
    CancellationDelivered,
    CancellationRequested,
    Event,
    FollowUpsCollected,
    HostRegistered,
    LeaseExpired,
    LeaseExtended,
    LeaseRenewed,
    MessageAcknowledged,
    MessageApplied,
    MessagePosted,
    MessagesDelivered,
    MessagesNotAdmitted,
    SessionEndRequested,
    TaskAssigned,
    TaskEnded,
    TaskRequeued,
    TaskSubmitted,
)
from amc.core.lifecycle import AttemptState, CancellationState, TaskStatus
from amc.core.records import (
    Attempt,
    Cancellation,
    Device,
    Host,
    Requirements,
    Reservation,
    Result,
    Session,
    Task,
    replace,
)
from amc.core.state import State

# ---------------------------------------------------------------------------------------
# decide


def decide(state: State, command: Command) -> Decision:
    """What `command` means in `state`: a rejection, or events and a reply."""
    decider = _DECIDERS.get(type(command))
    if decider is None:
        raise TypeError(f"not a command: {command!r}")
    return decider(state, command)


def _submit(state: State, c: SubmitTask) -> Decision:
    if c.idempotency_key is not None:
        existing_id = state.idempotency.get((c.tenant, c.idempotency_key))
        if existing_id is not None:
            if _same_submission(state.tasks[existing_id], c):
                return Decision(reply=Submitted(existing_id, created=False))
            return reject(
                Code.idempotency_conflict,
                f"idempotency_key {c.idempotency_key!r} was used for a different submission",
            )
    if c.task_id in state.tasks:
        return reject(Code.invalid_request, f"task id {c.task_id!r} is taken")
    event = TaskSubmitted(
        at=c.now,
        task_id=c.task_id,
        tenant=c.tenant,
        plan=c.plan,
        requirements=c.requirements,
        priority=c.priority,
        max_attempts=c.max_attempts,
        labels=c.labels,
        idempotency_key=c.idempotency_key,
        idle_ms=c.idle_ms,
    )
    return Decision(events=(event,), reply=Submitted(c.task_id, created=True))


def _same_submission(task: Task, c: SubmitTask) -> bool:
    idle_ms = None if task.session is None else task.session.idle_ms
    return (task.plan, task.requirements, task.priority, task.max_attempts, task.labels, idle_ms) == (
        c.plan,
        c.requirements,
        c.priority,
        c.max_attempts,
        c.labels,
        c.idle_ms,
    )


def _cancel(state: State, c: CancelTask) -> Decision:
    task = visible_task(state, c.task_id, c.tenant)
    if task is None:
        return reject(Code.not_found, f"no task {c.task_id!r}")
    if task.status == TaskStatus.cancelled or task.cancellation_pending:
        return Decision(reply=CancelAccepted(task.id, pending=task.cancellation_pending))
    status = lifecycle.target(lifecycle.TASK, task.status, "request_cancel")
    if status is None:
        return reject(Code.task_terminal, f"task {task.id!r} already ended {task.status}")
    if status == TaskStatus.cancelled:  # it was queued: settle it here and now
        events: tuple[Event, ...] = (
            CancellationRequested(at=c.now, task_id=task.id, attempt=None, reason=c.reason),
            TaskEnded(
                at=c.now,
                task_id=task.id,
                status=TaskStatus.cancelled,
                reason="cancelled_while_queued",
                attempt=None,
            ),
        )
        events = sessions.settle_actions(task, c.now, "cancelled", "cancelled") + events
        events += messages.settle_messages(state, task, c.now, TaskStatus.cancelled)
        return Decision(events=events, reply=CancelAccepted(task.id, pending=False))
    assert task.current is not None  # not queued and not ended: an attempt holds it
    request = CancellationRequested(at=c.now, task_id=task.id, attempt=task.current.number, reason=c.reason)
    return Decision(events=(request,), reply=CancelAccepted(task.id, pending=True))


def _register(state: State, c: RegisterHost) -> Decision:
    serials = [d.serial for d in c.devices]
    if len(set(serials)) != len(serials):
        return reject(Code.invalid_request, "devices: a serial is listed twice")
    event = HostRegistered(at=c.now, host_id=c.host_id, devices=c.devices)
    return Decision(events=(event,), reply=HostUpdated(c.host_id))


def _claim(state: State, c: ClaimTask) -> Decision:
    host = state.hosts.get(c.host_id)
    if host is None:
        return Decision(reply=NoAssignment())
    wanted = None if c.devices is None else set(c.devices)
    free = [d for d in host.devices if d.online and d.reservation is None and (wanted is None or d.serial in wanted)]
    best = _best(state, free, c.sessions)
    if best is None:
        return Decision(reply=NoAssignment())
    task_id, requirements = best
    task = state.tasks[task_id]
    device = next(d for d in free if requirements.matches(d.serial, d.attributes))
    number = len(task.attempts) + 1
    expires_at = c.now + c.lease_ms
    event = TaskAssigned(
        at=c.now,
        task_id=task_id,
        attempt=number,
        host_id=host.id,
        device=device.serial,
        lease_id=c.lease_id,
        lease_ms=c.lease_ms,
        lease_expires_at=expires_at,
    )
    reply = Assignment(
        task_id=task_id,
        attempt=number,
        lease_id=c.lease_id,
        lease_expires_at=expires_at,
        lease_ms=c.lease_ms,
        device=device.serial,
        plan=steering.attempt_plan(task, number),
        idle_ms=None if task.session is None else task.session.idle_ms,
    )
    return Decision(events=(event,), reply=reply)


def _best(state: State, free: list[Device], with_sessions: bool) -> tuple[str, Requirements] | None:
    """The best claimable task for `free` devices: among plans, and among sessions too when
    the host runs them; the better of the two by priority, then submission order."""
    best = state.queue.best(free)
    if not with_sessions:
        return best
    session = state.session_queue.best(free)
    if best is None or session is None:
        return best or session
    rank = lambda found: (-state.tasks[found[0]].priority, state.tasks[found[0]].seq)  # noqa: E731
    return min(best, session, key=rank)


def _report(state: State, c: ReportResult) -> Decision:
    found = outcomes.reported_attempt(state, c)
    if isinstance(found, Decision):
        return found
    task, attempt = found
    refusal = check_ownership(task, attempt, c)
    if refusal is not None:
        return refusal
    if attempt.outcome not in (None, AttemptState.expired, AttemptState.released):
        # Ended by a report: the identical report again is answered as recorded.
        recorded = task.result
        assert recorded is not None  # the attempt ended by a report, which set it
        if (recorded.status, recorded.metadata, recorded.steps) == (c.status, c.metadata, c.steps):
            return Decision(reply=ResultRecorded(task.id, repeated=True))
        return reject(Code.result_conflict, f"attempt {attempt.number} already reported {recorded.status}")
    refusal = check_live(attempt, c.now)
    if refusal is not None:
        return refusal
    guards = {"cancellation_pending": task.cancellation_pending}
    if lifecycle.target(lifecycle.TASK, task.status, f"report_{c.status}", guards) is None:
        return reject(Code.no_cancellation_requested, "cancelled was reported, but no cancellation is pending")
    ended = TaskEnded(
        at=c.now,
        task_id=task.id,
        status=c.status,
        reason="reported",
        attempt=attempt.number,
        metadata=c.metadata,
        steps=c.steps,
    )
    events = sessions.reported_end(task, c.now, c.status) + (ended,)
    events += messages.settle_messages(state, task, c.now, c.status)
    return Decision(events=events, reply=ResultRecorded(task.id, repeated=False))


# ---------------------------------------------------------------------------------------
# apply


def apply(state: State, event: Event) -> State:
    """Fold one event into the state (in place) and return it."""
    applier = _APPLIERS.get(type(event))
    if applier is None:
        raise TypeError(f"not an event: {event!r}")
    applier(state, event)
    return state


def _apply_cancellation_requested(state: State, e: CancellationRequested) -> None:
    task = state.tasks[e.task_id]
    # Recorded pending either way; a queued task's TaskEnded follows at once and completes it.
    requested = lifecycle.move(lifecycle.CANCELLATION, CancellationState.none, "request")
    cancellation = Cancellation(
        state=requested,
        requested_at=e.at,
        attempt=e.attempt,
        reason=e.reason,
    )
    state.put_task(replace(task, cancellation=cancellation, updated_at=e.at))
    state.idle.clean(state.tasks)  # a session is never idle with a cancellation pending


def _apply_cancellation_delivered(state: State, e: CancellationDelivered) -> None:
    task = state.tasks[e.task_id]
    assert task.cancellation is not None  # delivered, so requested
    state.put_task(replace(task, cancellation=replace(task.cancellation, delivered_at=e.at)))


def _apply_requeued(state: State, e: TaskRequeued) -> None:
    task = replace(state.tasks[e.task_id], status=TaskStatus.queued, updated_at=e.at)
    state.put_task(task)
    if task.claimable:  # a task paused in flight comes back held
        state.queue_of(task).push(task)


def _apply_submitted(state: State, e: TaskSubmitted) -> None:
    task = Task(
        id=e.task_id,
        tenant=e.tenant,
        status=TaskStatus.queued,
        plan=e.plan,
        requirements=e.requirements,
        priority=e.priority,
        max_attempts=e.max_attempts,
        labels=e.labels,
        idempotency_key=e.idempotency_key,
        created_at=e.at,
        updated_at=e.at,
        seq=state.submitted,
        follow_up_of=e.follow_up_of,
        collected=e.collected,
        session=None if e.idle_ms is None else Session(idle_ms=e.idle_ms),
    )
    state.submitted += 1
    state.put_task(task)
    if e.idempotency_key is not None:
        state.idempotency[(e.tenant, e.idempotency_key)] = task.id
    state.queue_of(task).push(task)


def _apply_registered(state: State, e: HostRegistered) -> None:
    old = state.hosts.get(e.host_id)
    old_devices = {d.serial: d for d in old.devices} if old else {}
    listed = {spec.serial for spec in e.devices}
    devices = [
        Device(
            serial=spec.serial,
            attributes=spec.attributes,
            reservation=old_devices[spec.serial].reservation if spec.serial in old_devices else None,
        )
        for spec in e.devices
    ]
    # A reserved device that disappeared stays, offline, until its attempt ends.
    devices += [
        replace(d, online=False) for d in old_devices.values() if d.serial not in listed and d.reservation is not None
    ]
    devices.sort(key=lambda d: d.serial)
    state.put_host(Host(id=e.host_id, updated_at=e.at, devices=tuple(devices)))


def _apply_assigned(state: State, e: TaskAssigned) -> None:
    task = state.tasks[e.task_id]
    attempt = Attempt(
        number=e.attempt,
        host_id=e.host_id,
        device=e.device,
        lease_id=e.lease_id,
        lease_ms=e.lease_ms,
        assigned_at=e.at,
        lease_expires_at=e.lease_expires_at,
    )
    status = lifecycle.move(lifecycle.TASK, task.status, "claim")
    task = replace(task, status=status, attempts=task.attempts + (attempt,), updated_at=e.at)
    state.put_task(task)
    state.queue_of(task).clean(task.requirements, state.tasks)
    leases.set_reservation(state, e.host_id, e.device, Reservation(task_id=task.id, attempt=e.attempt))
    state.leases.push(e.lease_expires_at, task.id, e.attempt)
    sessions.on_assigned(state, task, e.at)


def _apply_ended(state: State, e: TaskEnded) -> None:
    task = state.tasks[e.task_id]
    if e.reason == "reported" or (e.reason in sessions.SERVER_ENDS and e.attempt is not None):
        # The server's end of a session is a verdict of done on the attempt, as a report's.
        task = leases.end_attempt(state, task, f"report_{e.status}", e.at)
    if task.cancellation_pending:
        assert task.cancellation is not None  # pending, so requested
        event = "task_cancelled" if e.status == TaskStatus.cancelled else "task_finished"
        settled = lifecycle.move(lifecycle.CANCELLATION, CancellationState.pending, event)
        task = replace(task, cancellation=replace(task.cancellation, state=settled))
    result = Result(
        status=e.status,
        attempt=e.attempt,
        reason=e.reason,
        metadata=e.metadata,
        steps=e.steps,
        recorded_at=e.at,
    )
    was_queued = task.status == TaskStatus.queued
    task = replace(task, status=e.status, result=result, updated_at=e.at)
    state.put_task(task)
    if was_queued:
        state.queue_of(task).clean(task.requirements, state.tasks)


# Each takes its own command type: the lookup by type(command) is what makes the call safe.
_DECIDERS: dict[type, Callable[[State, Any], Decision]] = {
    SubmitTask: _submit,
    CancelTask: _cancel,
    RegisterHost: _register,
    ClaimTask: _claim,
    StartAttempt: leases.grant,
    RenewLease: leases.grant,
    ReportResult: _report,
    ReleaseAttempt: leases.release,
    PostMessage: messages.post,
    AcknowledgeMessage: messages.acknowledge,
    ExpireLeases: leases.expire,
    StoreArtifact: artifacts.store,
    PurgeArtifacts: artifacts.purge,
    PostAction: sessions.post,
    EndSession: sessions.end,
    PollAction: sessions.poll,
    ReportAction: sessions.report,
}

_APPLIERS: dict[type, Callable[[State, Any], None]] = {
    TaskSubmitted: _apply_submitted,
    HostRegistered: _apply_registered,
    TaskAssigned: _apply_assigned,
    AttemptStarted: leases.apply_started,
    LeaseRenewed: leases.apply_extended,
    LeaseExtended: leases.apply_extended,
    CancellationRequested: _apply_cancellation_requested,
    CancellationDelivered: _apply_cancellation_delivered,
    LeaseExpired: leases.apply_expired,
    AttemptReleased: leases.apply_released,
    TaskRequeued: _apply_requeued,
    TaskEnded: _apply_ended,
    MessagePosted: messages.apply_posted,
    MessagesDelivered: messages.apply_delivered,
    MessageAcknowledged: messages.apply_acknowledged,
    MessageApplied: messages.apply_applied,
    MessagesNotAdmitted: messages.apply_not_admitted,
    FollowUpsCollected: messages.apply_collected,
    ArtifactStored: artifacts.apply_stored,
    ArtifactsPurged: artifacts.apply_purged,
    ActionPosted: sessions.apply_posted,
    ActionDelivered: sessions.apply_delivered,
    ActionEnded: sessions.apply_ended,
    SessionEndRequested: sessions.apply_end_requested,
}


# ---------------------------------------------------------------------------------------
# execute


def expire_due(state: State, now: int) -> tuple[Event, ...]:
    """Apply every lease expiry due at `now`; return the events."""
    if (next_expiry := state.next_deadline()) is None or next_expiry > now:
        return ()  # the common case, in O(1)
    events = decide(state, ExpireLeases(now=now)).events
    for event in events:
        apply(state, event)
    return events


def execute(state: State, command: Command) -> Decision:
    """Expire what is due at the command's `now`, then decide the command and apply it.

    The returned decision lists the expiry events first, then the command's own.
    """
    expired = expire_due(state, command.now)
    if isinstance(command, ExpireLeases):
        return Decision(events=expired, reply=LeasesExpired(count=leases.count_expired(expired)))
    decision = decide(state, command)
    if decision.accepted:
        for event in decision.events:
            apply(state, event)
    if expired:
        decision = attrs.evolve(decision, events=expired + decision.events)
    return decision


def replay(events: Iterable[Event]) -> State:
    """A fresh state with `events` applied in order."""
    state = State()
    for event in events:
        apply(state, event)
    return state
