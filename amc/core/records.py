"""The records the kernel keeps: tasks, attempts, hosts, and what hangs off them.

All records are frozen; the kernel replaces a record with `replace` (below) when an event
changes it. Times are integer milliseconds since the Unix epoch (see `amc.core.times`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from amc.core.lifecycle import (
    FINAL_ACTION_STATES,
    ActionState,
    AttemptState,
    CancellationState,
    MessageState,
    StepStatus,
    TaskStatus,
)

JSON = Any  # a value that came from JSON (dict, list, str, int, float, bool, None)


@attrs.frozen(kw_only=True)
class Step:
    id: str
    action: str
    args: dict[str, JSON] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class Stage:
    id: str
    steps: tuple[Step, ...]


@attrs.frozen(kw_only=True)
class Plan:
    """Either `steps` (run in order) or `stages` (named groups with a checkpoint after each)."""

    steps: tuple[Step, ...] | None = None
    stages: tuple[Stage, ...] | None = None
    record: bool = False  # issue 26: the Host Agent records the screen from the first step to the last

    def all_steps(self) -> tuple[Step, ...]:
        if self.steps is not None:
            return self.steps
        return tuple(step for stage in self.stages or () for step in stage.steps)


@attrs.frozen(kw_only=True)
class Requirements:
    """What a device must be to run a task: its serial (if set) and attribute values."""

    serial: str | None = None
    attributes: dict[str, str] = attrs.field(factory=dict)

    def key(self) -> tuple[str | None, tuple[tuple[str, str], ...]]:
        """A hashable identity; tasks with equal keys wait in the same claim queue."""
        return (self.serial, tuple(sorted(self.attributes.items())))

    def matches(self, serial: str, attributes: dict[str, str]) -> bool:
        if self.serial is not None and self.serial != serial:
            return False
        return all(attributes.get(name) == value for name, value in self.attributes.items())


@attrs.frozen(kw_only=True)
class StepOutcome:
    id: str
    status: StepStatus
    reason: str | None = None
    started_at: int | None = None
    ended_at: int | None = None
    output: str | None = None
    artifacts: tuple[str, ...] = ()  # Part C: ids of the artifacts this step's attempt stored for it


@attrs.frozen(kw_only=True)
class Attempt:
    number: int
    host_id: str
    device: str
    lease_id: str
    lease_ms: int
    assigned_at: int
    lease_expires_at: int
    dispatched_at: int | None = None
    renewals: int = 0
    ended_at: int | None = None
    outcome: AttemptState | None = None  # None while active; then one of the final states
    # A release's step outcomes and reason (None otherwise): kept on the attempt, since the
    # task goes on; a repeated release is compared with them.
    steps: tuple[StepOutcome, ...] | None = None
    release_reason: str | None = None

    @property
    def active(self) -> bool:
        return self.outcome is None

    @property
    def state(self) -> AttemptState:
        """This attempt's state in `AttemptLifecycle`."""
        if self.outcome is not None:
            return self.outcome
        return AttemptState.leased if self.dispatched_at is None else AttemptState.running


@attrs.frozen(kw_only=True)
class Cancellation:
    state: CancellationState  # never none: no request is no record
    requested_at: int
    attempt: int | None
    delivered_at: int | None = None
    reason: str | None = None


@attrs.frozen(kw_only=True)
class Result:
    status: TaskStatus  # a final one
    attempt: int | None
    # reported | cancelled_while_queued | lease_expired_with_cancellation | released_with_cancellation
    # | attempts_exhausted
    reason: str
    metadata: dict[str, JSON] = attrs.field(factory=dict)
    steps: tuple[StepOutcome, ...] | None = None
    recorded_at: int = 0


@attrs.frozen(kw_only=True)
class Boundary:
    """Where a host applied a message: before it started `before_step` (None: after the last step)."""

    before_step: str | None


@attrs.frozen(kw_only=True)
class Message:
    """An intent sent to a task (specs/protocol.md Part B); its `state` follows `MessageLifecycle`."""

    id: str
    intent: str  # steer | follow_up | pause | resume
    text: str | None
    data: dict[str, JSON] | None
    state: MessageState
    created_at: int
    attempt: int | None = None  # the attempt it was delivered to
    delivered_at: int | None = None
    admitted_at: int | None = None
    completed_at: int | None = None
    boundary: Boundary | None = None
    detail: str | None = None
    successor: str | None = None  # a follow-up: the task it was collected into

    @property
    def open(self) -> bool:
        """Not yet applied or settled: queued or delivered."""
        return self.state in (MessageState.queued, MessageState.delivered)


@attrs.frozen(kw_only=True)
class FollowUp:
    """A follow-up collected into a successor task: which message asked for what."""

    message_id: str
    text: str | None
    data: dict[str, JSON] | None


@attrs.frozen(kw_only=True)
class Artifact:
    """Evidence a step produced (specs/protocol.md Part C): the metadata only; the bytes are
    in a blob store under `sha256`."""

    id: str
    attempt: int
    step: str
    name: str  # unique within its attempt
    content_type: str
    size: int
    sha256: str
    created_at: int


@attrs.frozen(kw_only=True)
class Action:
    """One action of a session (specs/protocol.md Part D): a step the caller sent, and how it ended."""

    id: str
    seq: int  # 1, 2, ... in posting order: the order the actions run in
    step: Step
    status: ActionState
    posted_at: int
    reason: str | None = None
    attempt: int | None = None  # the attempt it was delivered to
    delivered_at: int | None = None
    started_at: int | None = None
    ended_at: int | None = None
    output: str | None = None
    artifacts: tuple[str, ...] = ()

    @property
    def final(self) -> bool:
        return self.status in FINAL_ACTION_STATES

    @property
    def busy(self) -> bool:
        """Waiting for a host, or with one: what keeps a session from being idle."""
        return not self.final


@attrs.frozen(kw_only=True)
class Session:
    """What makes a task a session: its actions instead of a plan (specs/protocol.md Part D)."""

    idle_ms: int
    end_requested_at: int | None = None
    actions: tuple[Action, ...] = ()  # in posting order
    # When the current attempt last became idle (its claim, or the last action's end); None
    # while an action is busy or no attempt holds the session. See `Task.idle_expires_at`.
    idle_since: int | None = None

    def action(self, action_id: str) -> Action | None:
        for action in self.actions:
            if action.id == action_id:
                return action
        return None

    @property
    def busy(self) -> bool:
        return any(a.busy for a in self.actions)


@attrs.frozen(kw_only=True)
class Task:
    id: str
    tenant: str
    status: TaskStatus
    plan: Plan
    requirements: Requirements
    priority: int
    max_attempts: int
    labels: dict[str, str]
    idempotency_key: str | None
    created_at: int
    updated_at: int
    seq: int  # submission order; claim order among equal priorities, kept across requeues
    attempts: tuple[Attempt, ...] = ()
    cancellation: Cancellation | None = None
    result: Result | None = None
    # Part B. `paused`: admitted steps stop (in flight) or claims skip it (queued: held).
    paused: bool = False
    messages: tuple[Message, ...] = ()  # in posting order
    admissions: tuple[str, ...] = ()  # ids of the messages hosts admitted at a boundary, in order
    follow_up_of: str | None = None
    collected: tuple[FollowUp, ...] = ()
    artifacts: tuple[Artifact, ...] = ()  # Part C, in upload order
    # Part D: a session's actions and idle timeout; None for a plan's task. A session's `plan`
    # is empty (no steps): its steps are its actions, and the wire shows `plan: null`.
    session: Session | None = None

    @property
    def held(self) -> bool:
        return self.paused and self.status == TaskStatus.queued

    @property
    def claimable(self) -> bool:
        return self.status == TaskStatus.queued and not self.paused

    def message(self, message_id: str) -> Message | None:
        for message in self.messages:
            if message.id == message_id:
                return message
        return None

    @property
    def current(self) -> Attempt | None:
        return self.attempts[-1] if self.attempts else None

    @property
    def active_attempt(self) -> Attempt | None:
        current = self.current
        return current if current is not None and current.active else None

    @property
    def cancellation_pending(self) -> bool:
        return self.cancellation is not None and self.cancellation.state == CancellationState.pending

    @property
    def attempts_left(self) -> bool:
        return len(self.attempts) < self.max_attempts

    @property
    def idle_expires_at(self) -> int | None:
        """When a session's active attempt ends as idle, if nothing happens first."""
        session = self.session
        if session is None or session.idle_since is None or self.active_attempt is None or session.busy:
            return None
        if self.cancellation_pending:  # its host's report, or the lease's expiry, ends it
            return None
        return session.idle_since + session.idle_ms


@attrs.frozen(kw_only=True)
class Reservation:
    task_id: str
    attempt: int


@attrs.frozen(kw_only=True)
class DeviceSpec:
    """A device as a host reports it."""

    serial: str
    attributes: dict[str, str] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class Device:
    serial: str
    attributes: dict[str, str]
    online: bool = True
    reservation: Reservation | None = None


@attrs.frozen(kw_only=True)
class Host:
    id: str
    updated_at: int
    devices: tuple[Device, ...] = ()  # in serial order

    def device(self, serial: str) -> Device | None:
        for device in self.devices:
            if device.serial == serial:
                return device
        return None


# ---------------------------------------------------------------------------------------
# replace() and constructor(): building records without attrs' generic machinery.
#
# attrs.evolve looks the class's fields up on every call, and a frozen class's __init__
# assigns each field through a bound `object.__setattr__`; renewals at tens of thousands per
# second spend most of their time there (`replace` saves about 14% of the CPU of a durable
# command, `constructor` about 10% of a store's start-up: bench/RESULTS-records.md). So for
# each record class we generate, once, from its `attrs.fields`, a function that sets the
# slots with their own descriptors, one straight line per field. What it builds is exactly
# what the constructor would (the records have no validators or converters, and every
# field is copied or given), and just as frozen.

_MISSING: Any = object()
_REPLACERS: dict[type, Callable[..., Any]] = {}


def _builder(cls: type, copying: bool) -> Callable[..., Any]:
    """A function that builds a `cls`: from every field by keyword, or (`copying`) as a
    copy of a record `r` with the fields given by keyword."""
    names = [field.name for field in attrs.fields(cls)]
    if copying:
        params = "r, *, " + ", ".join(f"{n}=_MISSING" for n in names)
        values = {n: f"r.{n} if {n} is _MISSING else {n}" for n in names}
    else:
        params = "*, " + ", ".join(names)
        values = {n: n for n in names}
    body = "".join(f"    set_{n}(new, {values[n]})\n" for n in names)
    namespace: dict[str, Any] = {"_MISSING": _MISSING, "cls": cls, "make": object.__new__}
    namespace.update({f"set_{n}": getattr(cls, n).__set__ for n in names})
    source = f"def build({params}):\n    new = make(cls)\n{body}    return new\n"
    exec(compile(source, f"<records: {cls.__name__}>", "exec"), namespace)  # noqa: S102 (generated from attrs.fields)
    built: Callable[..., Any] = namespace["build"]
    return built


def constructor(cls: type) -> Callable[..., Any]:
    """A function that builds a `cls` from every field, by keyword, the way `replace` copies
    one: for decoders that build many records (a store's start-up)."""
    return _builder(cls, copying=False)


R = TypeVar("R")


def _replace(record: R, **changes: Any) -> R:
    """A copy of `record` with `changes`, like `attrs.evolve` but several times cheaper."""
    replacer = _REPLACERS.get(type(record))
    if replacer is None:
        replacer = _REPLACERS[type(record)] = _builder(type(record), copying=True)
    copy: R = replacer(record, **changes)
    return copy


# The type checker sees `attrs.evolve`, whose keywords mypy's attrs plugin checks against the
# record's fields (a misspelt or mistyped field is an error); the program runs `_replace`,
# which builds the same record.
if TYPE_CHECKING:
    from attrs import evolve as replace
else:
    replace = _replace
