"""Events: what happened. `apply` folds them into the state; the store logs them.

Each event carries `at`, the time it happened, and enough data for `apply` to rebuild
the state without consulting anything else: replaying a log from empty is exact.
"""

from __future__ import annotations

from typing import Union

import attrs

from amc.core.lifecycle import MessageState, TaskStatus
from amc.core.records import JSON, Artifact, Boundary, DeviceSpec, FollowUp, Plan, Requirements, StepOutcome


@attrs.frozen(kw_only=True)
class TaskSubmitted:
    at: int
    task_id: str
    tenant: str
    plan: Plan
    requirements: Requirements
    priority: int
    max_attempts: int
    labels: dict[str, str]
    idempotency_key: str | None
    follow_up_of: str | None = None  # a successor made of collected follow-ups
    collected: tuple[FollowUp, ...] = ()


@attrs.frozen(kw_only=True)
class HostRegistered:
    at: int
    host_id: str
    devices: tuple[DeviceSpec, ...]


@attrs.frozen(kw_only=True)
class TaskAssigned:
    at: int
    task_id: str
    attempt: int
    host_id: str
    device: str
    lease_id: str
    lease_ms: int
    lease_expires_at: int


@attrs.frozen(kw_only=True)
class AttemptStarted:
    at: int
    task_id: str
    attempt: int
    lease_expires_at: int


@attrs.frozen(kw_only=True)
class LeaseRenewed:
    at: int
    task_id: str
    attempt: int
    lease_expires_at: int


@attrs.frozen(kw_only=True)
class LeaseExtended:
    """A repeated start: the lease is extended, but it is not counted as a renewal."""

    at: int
    task_id: str
    attempt: int
    lease_expires_at: int


@attrs.frozen(kw_only=True)
class CancellationRequested:
    at: int
    task_id: str
    attempt: int | None  # None: the task was queued
    reason: str | None


@attrs.frozen(kw_only=True)
class CancellationDelivered:
    at: int
    task_id: str
    attempt: int


@attrs.frozen(kw_only=True)
class LeaseExpired:
    """`at` is the lease's expiry time, which is also the attempt's `ended_at`."""

    at: int
    task_id: str
    attempt: int


@attrs.frozen(kw_only=True)
class AttemptReleased:
    """The owning host gave the attempt back; `at` is the attempt's `ended_at`. The task's
    `TaskRequeued` or `TaskEnded` follows, as after a `LeaseExpired`."""

    at: int
    task_id: str
    attempt: int
    reason: str | None
    steps: tuple[StepOutcome, ...] | None = None


@attrs.frozen(kw_only=True)
class TaskRequeued:
    at: int
    task_id: str


@attrs.frozen(kw_only=True)
class TaskEnded:
    at: int
    task_id: str
    status: TaskStatus  # done | failed | cancelled
    # reported | cancelled_while_queued | lease_expired_with_cancellation | released_with_cancellation
    # | attempts_exhausted
    reason: str
    attempt: int | None
    metadata: dict[str, JSON] = attrs.field(factory=dict)
    steps: tuple[StepOutcome, ...] | None = None


@attrs.frozen(kw_only=True)
class MessagePosted:
    at: int
    task_id: str
    message_id: str
    intent: str
    text: str | None
    data: dict[str, JSON] | None


@attrs.frozen(kw_only=True)
class MessagesDelivered:
    """A start or renewal response carried these queued messages to `attempt` for the first time."""

    at: int
    task_id: str
    attempt: int
    message_ids: tuple[str, ...]


@attrs.frozen(kw_only=True)
class MessageAcknowledged:
    at: int
    task_id: str
    attempt: int
    message_id: str
    state: MessageState  # admitted | completed | rejected
    boundary: Boundary | None = None
    detail: str | None = None


@attrs.frozen(kw_only=True)
class MessageApplied:
    """The server applied a pause or resume itself, because the task was queued (hold, release)."""

    at: int
    task_id: str
    message_id: str


@attrs.frozen(kw_only=True)
class MessagesNotAdmitted:
    """The attempt (or the task) ended before these messages were applied."""

    at: int
    task_id: str
    message_ids: tuple[str, ...]
    # Why, one sentence per message id; empty in the logs written before messages said why
    # (their replay leaves `detail` null, as those stores recorded it).
    details: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class FollowUpsCollected:
    """The task ended done: its waiting follow-ups went into one successor task (whose own
    `TaskSubmitted` follows)."""

    at: int
    task_id: str
    successor_id: str
    message_ids: tuple[str, ...]


@attrs.frozen(kw_only=True)
class ArtifactStored:
    at: int
    task_id: str
    artifact: Artifact


@attrs.frozen(kw_only=True)
class ArtifactsPurged:
    """The artifacts of an ended task were dropped; the event keeps what they were."""

    at: int
    task_id: str
    artifacts: tuple[Artifact, ...]


Event = Union[
    TaskSubmitted,
    HostRegistered,
    TaskAssigned,
    AttemptStarted,
    LeaseRenewed,
    LeaseExtended,
    CancellationRequested,
    CancellationDelivered,
    LeaseExpired,
    AttemptReleased,
    TaskRequeued,
    TaskEnded,
    MessagePosted,
    MessagesDelivered,
    MessageAcknowledged,
    MessageApplied,
    MessagesNotAdmitted,
    FollowUpsCollected,
    ArtifactStored,
    ArtifactsPurged,
]
