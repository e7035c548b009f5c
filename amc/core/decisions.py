"""What a decision is, and the checks that every decider shares.

`decide` answers a command with a `Decision`: a `Rejection` (the protocol's error code; the
state is untouched) or the events the command causes and a reply. The checks below are the
protocol's order of lease checks (specs/protocol.md Part A: foreign, unknown, replaced, ended,
expired) and tenant visibility, used by the task, lease and message deciders alike.
"""

from __future__ import annotations

from typing import Union

import attrs

from amc.core.commands import LeaseCommand
from amc.core.errors import Code, Rejection
from amc.core.events import Event
from amc.core.lifecycle import AttemptState
from amc.core.records import Artifact, Attempt, Message, Plan, Task
from amc.core.state import State

# ---------------------------------------------------------------------------------------
# Replies


@attrs.frozen
class Submitted:
    task_id: str
    created: bool  # False: an idempotent retry answered with the existing task


@attrs.frozen
class CancelAccepted:
    task_id: str
    pending: bool  # True: recorded against a running attempt (202); False: settled (200)


@attrs.frozen
class HostUpdated:
    host_id: str


@attrs.frozen
class Assignment:
    task_id: str
    attempt: int
    lease_id: str
    lease_expires_at: int
    lease_ms: int
    device: str
    plan: Plan
    cancel_requested: bool = False
    idle_ms: int | None = None  # Part D: a session's idle timeout; None for a plan


@attrs.frozen
class NoAssignment:
    pass


@attrs.frozen
class LeaseGranted:
    task_id: str
    attempt: int
    status: str
    lease_expires_at: int
    cancel_requested: bool
    messages: tuple[Message, ...] = ()  # every message the host has not acknowledged yet


@attrs.frozen
class MessageAccepted:
    task_id: str
    message_id: str
    successor_id: str | None = None  # a follow-up to a done task started this successor


@attrs.frozen
class AcknowledgementRecorded:
    task_id: str
    message_id: str
    repeated: bool  # True: the message was already in that state; nothing changed


@attrs.frozen
class ResultRecorded:
    task_id: str
    repeated: bool  # True: an identical report was already recorded; nothing changed


@attrs.frozen
class ReleaseRecorded:
    task_id: str
    repeated: bool  # True: an identical release was already recorded; nothing changed


@attrs.frozen
class LeasesExpired:
    count: int


@attrs.frozen
class ArtifactRecorded:
    task_id: str
    artifact: Artifact
    created: bool  # False: the same name and bytes were already recorded (a retried upload)


@attrs.frozen
class ActionAccepted:
    task_id: str
    action_id: str
    created: bool  # False: the identical action was already posted (a retry)


@attrs.frozen
class ActionRecorded:
    task_id: str
    action_id: str
    repeated: bool  # True: the identical outcome was already recorded


@attrs.frozen
class PollAnswer:
    task_id: str
    action_id: str | None  # the action to run now, or None
    cancel_requested: bool = False
    paused: bool = False


@attrs.frozen
class SessionEndAccepted:
    task_id: str


Reply = Union[
    Submitted,
    CancelAccepted,
    HostUpdated,
    Assignment,
    NoAssignment,
    LeaseGranted,
    ResultRecorded,
    ReleaseRecorded,
    MessageAccepted,
    AcknowledgementRecorded,
    LeasesExpired,
    ArtifactRecorded,
    ActionAccepted,
    ActionRecorded,
    PollAnswer,
    SessionEndAccepted,
]


@attrs.frozen(kw_only=True)
class Decision:
    events: tuple[Event, ...] = ()
    reply: Reply | None = None
    rejection: Rejection | None = None

    @property
    def accepted(self) -> bool:
        return self.rejection is None


def reject(code: Code, detail: str) -> Decision:
    return Decision(rejection=Rejection(code, detail))


# ---------------------------------------------------------------------------------------
# Checks


def visible_task(state: State, task_id: str, tenant: str | None) -> Task | None:
    """The task if it exists and `tenant` (None: admin) may see it."""
    task = state.tasks.get(task_id)
    if task is None or (tenant is not None and task.tenant != tenant):
        return None
    return task


def find_attempt(state: State, c: LeaseCommand) -> tuple[Task, Attempt] | Decision:
    """The task and attempt a lease command names, or a not_found decision."""
    task = state.tasks.get(c.task_id)
    if task is None:
        return reject(Code.not_found, f"no task {c.task_id!r}")
    if not 1 <= c.attempt <= len(task.attempts):
        return reject(Code.not_found, f"task {c.task_id!r} has no attempt {c.attempt}")
    return task, task.attempts[c.attempt - 1]


def check_ownership(task: Task, attempt: Attempt, c: LeaseCommand) -> Decision | None:
    """Lease checks 1-3 (specs/protocol.md): foreign, unknown, replaced."""
    return check_holder(attempt, c) or check_current(task, attempt)


def check_holder(attempt: Attempt, c: LeaseCommand) -> Decision | None:
    """Lease checks 1-2: foreign, unknown. A repeated release is recognised after these, since
    its attempt may have been replaced since."""
    if attempt.host_id != c.host_id:
        return reject(Code.lease_foreign, f"attempt {attempt.number} belongs to another host")
    if attempt.lease_id != c.lease_id:
        return reject(Code.lease_unknown, f"lease_id is not the lease of attempt {attempt.number}")
    return None


def check_current(task: Task, attempt: Attempt) -> Decision | None:
    """Lease check 3: replaced."""
    if attempt.number != len(task.attempts):
        return reject(Code.lease_replaced, f"attempt {attempt.number} was replaced by a newer attempt")
    return None


def check_live(attempt: Attempt, now: int) -> Decision | None:
    """Lease checks 4-5: the attempt was not ended by a report (or a release), and its lease
    has not expired."""
    if attempt.outcome not in (None, AttemptState.expired):
        return reject(Code.lease_ended, f"attempt {attempt.number} already ended {attempt.outcome}")
    if attempt.outcome == AttemptState.expired or now >= attempt.lease_expires_at:
        return reject(Code.lease_expired, f"the lease of attempt {attempt.number} expired")
    return None


def check_lease(task: Task, attempt: Attempt, c: LeaseCommand) -> Decision | None:
    """Lease checks 1-5 (specs/protocol.md), in order."""
    return check_ownership(task, attempt, c) or check_live(attempt, c.now)


def live_attempt(state: State, c: LeaseCommand) -> tuple[Task, Attempt] | Decision:
    """The attempt a lease command names, if it passes every lease check."""
    found = find_attempt(state, c)
    if isinstance(found, Decision):
        return found
    refusal = check_lease(*found, c)
    return refusal if refusal is not None else found
