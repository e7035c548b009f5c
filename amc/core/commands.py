"""Commands: what callers ask the kernel to do.

Every command carries `now` (milliseconds) and any id it needs to create, so the kernel
reads no clock and makes no random choice. Commands that callers scope to a tenant carry
`tenant`: a client's tenant, or None for an admin, who acts across tenants.
"""

from __future__ import annotations

from typing import Union

import attrs

from amc.core.lifecycle import MessageState, TaskStatus
from amc.core.records import JSON, Boundary, DeviceSpec, Plan, Requirements, StepOutcome


@attrs.frozen(kw_only=True)
class SubmitTask:
    now: int
    task_id: str  # the id to give the task if this submission creates one
    tenant: str
    plan: Plan
    requirements: Requirements = attrs.field(factory=Requirements)
    priority: int = 0
    max_attempts: int = 3
    labels: dict[str, str] = attrs.field(factory=dict)
    idempotency_key: str | None = None


@attrs.frozen(kw_only=True)
class CancelTask:
    now: int
    task_id: str
    tenant: str | None  # None: an admin
    reason: str | None = None


@attrs.frozen(kw_only=True)
class RegisterHost:
    now: int
    host_id: str
    devices: tuple[DeviceSpec, ...]


@attrs.frozen(kw_only=True)
class ClaimTask:
    now: int
    host_id: str
    lease_id: str  # the lease id to issue if this claim gets an assignment
    lease_ms: int
    devices: tuple[str, ...] | None = None  # restrict to these serials


@attrs.frozen(kw_only=True)
class StartAttempt:
    now: int
    host_id: str
    task_id: str
    attempt: int
    lease_id: str


@attrs.frozen(kw_only=True)
class RenewLease:
    now: int
    host_id: str
    task_id: str
    attempt: int
    lease_id: str


@attrs.frozen(kw_only=True)
class ReportResult:
    now: int
    host_id: str
    task_id: str
    attempt: int
    lease_id: str
    status: TaskStatus  # done | failed | cancelled
    metadata: dict[str, JSON] = attrs.field(factory=dict)
    steps: tuple[StepOutcome, ...] | None = None


@attrs.frozen(kw_only=True)
class ReleaseAttempt:
    """The owning host gives its attempt back without a verdict on the task (it is stopping,
    or its device went away); the task goes on as after a lease expiry."""

    now: int
    host_id: str
    task_id: str
    attempt: int
    lease_id: str
    reason: str | None = None
    steps: tuple[StepOutcome, ...] | None = None


@attrs.frozen(kw_only=True)
class PostMessage:
    """A steer, follow-up, pause or resume sent to a task (specs/protocol.md Part B)."""

    now: int
    task_id: str
    tenant: str | None  # None: an admin
    message_id: str  # the id to give the message
    intent: str  # steer | follow_up | pause | resume
    text: str | None = None
    data: dict[str, JSON] | None = None


@attrs.frozen(kw_only=True)
class AcknowledgeMessage:
    """The owning host says how far it got with a message it was given."""

    now: int
    host_id: str
    task_id: str
    attempt: int
    lease_id: str
    message_id: str
    state: MessageState  # admitted | completed | rejected
    boundary: Boundary | None = None
    detail: str | None = None


@attrs.frozen(kw_only=True)
class ExpireLeases:
    """Apply every lease expiry due at `now`; sent by the clock, not by a caller."""

    now: int


@attrs.frozen(kw_only=True)
class StoreArtifact:
    """The owning host stored evidence of a step (specs/protocol.md Part C); its bytes are
    already durable in a blob store under `sha256`."""

    now: int
    host_id: str
    task_id: str
    attempt: int
    lease_id: str
    artifact_id: str  # the id to give the artifact if this creates one
    step: str
    name: str
    content_type: str
    size: int
    sha256: str
    max_task_bytes: int  # the task's artifacts together may not pass this


@attrs.frozen(kw_only=True)
class PurgeArtifacts:
    """An operator drops the artifacts of a task that ended (`amc store gc --older-than`,
    specs/protocol.md Part C): their records go, so their bytes are unreferenced and the
    blob store's gc removes them. Sent by the store tooling, never by a caller over HTTP."""

    now: int
    task_id: str


Command = Union[
    SubmitTask,
    CancelTask,
    RegisterHost,
    ClaimTask,
    StartAttempt,
    RenewLease,
    ReportResult,
    ReleaseAttempt,
    PostMessage,
    AcknowledgeMessage,
    ExpireLeases,
    StoreArtifact,
    PurgeArtifacts,
]
LeaseCommand = Union[StartAttempt, RenewLease, ReportResult, ReleaseAttempt, AcknowledgeMessage, StoreArtifact]

# Each command's stable name: the store's log tags commands with it and metrics label them
# with it, so it is part of the storage format. Add names, never change one.
NAMES: dict[str, type[Command]] = {
    "submit_task": SubmitTask,
    "cancel_task": CancelTask,
    "register_host": RegisterHost,
    "claim_task": ClaimTask,
    "start_attempt": StartAttempt,
    "renew_lease": RenewLease,
    "report_result": ReportResult,
    "post_message": PostMessage,
    "acknowledge_message": AcknowledgeMessage,
    "expire_leases": ExpireLeases,
    "release_attempt": ReleaseAttempt,
    "store_artifact": StoreArtifact,
    "purge_artifacts": PurgeArtifacts,
}
