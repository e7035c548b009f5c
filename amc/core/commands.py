"""Commands: what callers ask the kernel to do.

Every command carries `now` (milliseconds) and any id it needs to create, so the kernel
reads no clock and makes no random choice. Commands that callers scope to a tenant carry
`tenant`: a client's tenant, or None for an admin, who acts across tenants.
"""

from __future__ import annotations

from typing import Union

import attrs

from amc.core.lifecycle import MessageState, TaskStatus
from amc.core.records import JSON, Boundary, DeviceSpec, Plan, Requirements, Step, StepOutcome, replace


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
    idle_ms: int | None = None  # Part D: submit a session with this idle timeout (its plan is empty)


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
    sessions: bool = False  # Part D: the host runs sessions; without it no session is assigned


@attrs.frozen(kw_only=True)
class StartAttempt:
    now: int
    host_id: str
    task_id: str
    attempt: int
    lease_id: str
    # The step the host reports running (its progress, PROGRESS/s1): it must be a step of the
    # plan as steered so far. The progress itself is not the kernel's: it records nothing.
    progress_step: str | None = None


@attrs.frozen(kw_only=True)
class RenewLease:
    now: int
    host_id: str
    task_id: str
    attempt: int
    lease_id: str
    progress_step: str | None = None  # as StartAttempt's


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


@attrs.frozen(kw_only=True)
class PostAction:
    """Part D: a caller sends a session its next action (a step, already well formed)."""

    now: int
    task_id: str
    tenant: str | None  # None: an admin
    step: Step


@attrs.frozen(kw_only=True)
class EndSession:
    """Part D: the caller ends a session."""

    now: int
    task_id: str
    tenant: str | None  # None: an admin


@attrs.frozen(kw_only=True)
class PollAction:
    """Part D: the owning host asks for its session's next action."""

    now: int
    host_id: str
    task_id: str
    attempt: int
    lease_id: str
    running: str | None = None  # the action the host is running: not answered again, only news


@attrs.frozen(kw_only=True)
class ReportAction:
    """Part D: the owning host reports how an action it was given ended."""

    now: int
    host_id: str
    task_id: str
    attempt: int
    lease_id: str
    outcome: StepOutcome  # its id is the action's


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
    PostAction,
    EndSession,
    PollAction,
    ReportAction,
]
LeaseCommand = Union[
    StartAttempt, RenewLease, ReportResult, ReleaseAttempt, AcknowledgeMessage, StoreArtifact, PollAction, ReportAction
]


def stamp(command: Command, now: int) -> Command:
    """`command` at `now`. Callers build commands with ``now=0``; a service stamps each with
    its clock when the command's turn comes, so a store's times never go back."""
    return replace(command, now=now)


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
    "post_action": PostAction,
    "end_session": EndSession,
    "poll_action": PollAction,
    "report_action": ReportAction,
}
