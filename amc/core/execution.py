"""The Host Agent's decisions for one attempt, with no IO: when to stop, and what to report.

The runtime (`amc.agent`) owns the sockets and the device; it tells an `Execution` what
it observed (a lease response and the messages it carried, a refused renewal, the time, a
step's end) and asks it what to do next (run this step, wait, interrupt the running one,
stop, report this, send these acknowledgements). Keeping these decisions here means they
are tested like the kernel, by example and by Hypothesis.

Stopping (seed 001 and specs/protocol.md "Host Agent duties"):

- A start or renewal response with ``cancel_requested: true`` is a stop request for
  reason ``cancelled``. A 409 on renewal, or reaching ``lease_expires_at`` without a
  successful renewal, is ``lease_lost``. A step that fails is ``step_failed``; a step the
  action policy refuses is ``step_refused``; a step whose outcome cannot be known because
  of a bug of the agent's is ``step_lost``; a device that went away is ``device_lost``.
  The first stop reason observed is the one that counts, except that a drain's stop gives
  way to how the step under way ends and to a forced stop (`OVERRIDE_DRAIN`).
- Stops take effect at step boundaries: no step starts after a stop. A step running when
  the stop arrives is interrupted where the runtime can (`should_interrupt`), and is
  recorded ``interrupted`` unless it finished first: never ``completed`` if it did not
  complete, and never ``cancelled``. The one stop that lets the running step finish is
  ``drain_timed_out``: the host stops at the next step boundary, not in the middle of one.

Host stops (specs/protocol.md "Release: a host gives an attempt back"). A host that stops
gives its attempts back instead of judging its tasks, so a redeploy never fails work:

- ``drain_timed_out``: the host is stopping and its drain time ran out (or an attempt was
  assigned while the host was already stopping); the run ends at the next boundary;
- ``forced_stop``: the host is stopping now (a second signal); the running step is
  interrupted;
- ``device_lost``: the device went away under a step (`device_lost`); that step is
  ``interrupted``, since its effect on the device is unknown.

A run that ends with one of these, unless every step still to run completed anyway, ends in
a `Release` (reason ``host_stopping`` or ``device_lost``) rather than a `FinalReport`: the
host gives no verdict on the task, and the server requeues it (or cancels it, or fails it
when its attempts are used up). `conclusion()` says which of the two to send.

Messages (specs/protocol.md Part B). Start and renewal responses carry every message of the
attempt the server has not seen acknowledged, so the same message may arrive many times:
it is recognised by id and taken once. A message taken waits in `pending` until the next
step boundary (`next_step`): nothing changes under a running step. There, in arrival order:

- a ``steer`` with a structured edit is applied with `steering.apply_edit` at the boundary
  (the index of the next step to start); that is the kernel's own function, so host and
  server agree on the edited plan. Applied: acknowledged ``admitted`` with the boundary
  ``{"before_step": <next step id or None>}``. Not applicable (it names a step that already
  started, or one not in the plan): ``rejected`` with the reason. A steer with only text is
  ``rejected``: the scripted runners have no planner to read guidance;
- a ``pause`` stops admitting steps: ``admitted`` at the boundary, with a checkpoint (the
  boundary) kept for the report's metadata. The run is not over; it waits, and a stop
  still ends it. A ``resume`` while paused lets it go on (``admitted``, then ``completed``
  for it and for the pause); a resume with nothing paused is ``rejected``, as is a second
  pause;
- the acknowledgements go into `outbox`, in the order they were decided; the runtime sends
  them in that order (admitted before completed) and before the result. Admitted steers
  are acknowledged ``completed`` when the report is computed.

The plan as edited is `outline` (a `steering.Outline`): steps run in its order, and the
report has one outcome per entry, removed entries included.

Reporting:

- Every step ends with exactly one outcome. A step an edit removed is ``not_started`` with
  reason ``steered``, whatever ended the run; a policy refusal stays ``refused``. Other
  steps that never started are ``not_started`` with the stop's reason (``cancelled``,
  ``lease_lost``, ``previous_step_failed``, ...), or ``paused`` when the run ended while
  paused (the stop is in the metadata).
- The report is ``done`` when every step that was still to run completed (even if a stop
  arrived too late to matter); ``cancelled`` only when the stop came from a cancellation
  request; otherwise ``failed``. It is computed once, so a retry after a lost response
  sends the identical body. A `Release` carries the same truthful steps (never a
  ``failed`` or ``cancelled`` step for a host stop: the steps are completed, interrupted,
  refused or not_started) and is also computed once.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

import attrs

from amc.core import steering
from amc.core.errors import InvalidRequest
from amc.core.lifecycle import MessageState, StepStatus, TaskStatus
from amc.core.records import JSON, Boundary, Message, Plan, Step, StepOutcome


class StopReason(enum.Enum):
    cancelled = "cancelled"
    lease_lost = "lease_lost"
    step_failed = "step_failed"
    step_refused = "step_refused"
    step_lost = "step_lost"
    drain_timed_out = "drain_timed_out"
    forced_stop = "forced_stop"
    device_lost = "device_lost"


# The stops that are the host's own business, not the task's: they end in a release, with
# the release's reason.
RELEASE_REASONS: dict[StopReason, str] = {
    StopReason.drain_timed_out: "host_stopping",
    StopReason.forced_stop: "host_stopping",
    StopReason.device_lost: "device_lost",
}


# A drain that timed out only keeps the next step from starting; the step under way runs to
# its own end. So how that step ends, or a forced stop, replaces it as the reason: a step that
# failed after the drain is the task's own failure (the host stop changed nothing), and a
# forced stop interrupts the step after all.
OVERRIDE_DRAIN = frozenset(
    {
        StopReason.forced_stop,
        StopReason.step_failed,
        StopReason.step_refused,
        StopReason.step_lost,
        StopReason.device_lost,
    }
)

# Why a step that never started did not start, by stop reason (None, not stopped, is absent).
NOT_STARTED_BECAUSE: dict[StopReason | None, str] = {
    StopReason.cancelled: "cancelled",
    StopReason.lease_lost: "lease_lost",
    StopReason.step_failed: "previous_step_failed",
    StopReason.step_refused: "previous_step_refused",
    StopReason.step_lost: "previous_step_lost",
    StopReason.drain_timed_out: "host_stopping",
    StopReason.forced_stop: "host_stopping",
    StopReason.device_lost: "device_lost",
}
PAUSED = "paused"  # the not_started reason of a step still waiting when a paused run ended

NO_PLANNER = (
    "this host runs a scripted plan and has no planner to follow free-form guidance;"
    " send a structured edit in data (skip, insert_after or replace_remaining)"
)


@attrs.frozen
class FinalReport:
    """The terminal report's body, fixed once computed."""

    status: TaskStatus  # done | failed | cancelled
    steps: tuple[StepOutcome, ...]
    metadata: dict[str, JSON]


@attrs.frozen
class Release:
    """The attempt given back (POST .../release): why, and the steps' truthful outcomes."""

    reason: str  # host_stopping | device_lost
    steps: tuple[StepOutcome, ...]
    detail: str | None = None  # for the host's own log


@attrs.frozen
class Acknowledgement:
    """What the host tells the server about one message (POST .../messages/{message_id})."""

    message_id: str
    state: MessageState  # admitted | completed | rejected
    boundary: Boundary | None = None  # admitted: where
    detail: str | None = None  # rejected: why


@attrs.frozen
class RunProgress:
    """What a start or renewal tells the server of the run (specs/protocol.md "Progress")."""

    step: str | None  # the step running now; None between steps
    ended: int  # how many steps have ended in this attempt


@attrs.define
class Pause:
    """A checkpoint: the run paused before `before_step` (None: after the last step)."""

    message_id: str
    before_step: str | None
    resumed_by: str | None = None


class Execution:
    """One attempt's run of a plan, as a sequence of decisions."""

    def __init__(self, plan: Plan, lease_expires_at: int):
        self.plan = plan
        self.outline: steering.Outline = steering.outline_of(plan.all_steps())
        self.lease_expires_at = lease_expires_at
        self.stop: StopReason | None = None
        self.stop_detail: str | None = None
        self.outcomes: dict[str, StepOutcome] = {}
        self.running: Step | None = None
        self._started_at: int | None = None
        # Every outline entry before this index has started or was removed.
        self._position = 0
        self.checkpoints: list[str] = []  # stages finished, in order (WorkflowRunner)
        self.pending: list[Message] = []  # messages taken, waiting for the next boundary
        self._taken: set[str] = set()  # ids of every message taken: a repeat is recognised by id
        self.outbox: list[Acknowledgement] = []  # decided, not yet handed to the runtime
        self.pauses: list[Pause] = []  # checkpoints of the pauses admitted, in order
        self._steers: list[str] = []  # ids of the steers admitted, in order
        self._inserted: dict[str, str] = {}  # step id -> the steer that added it
        self._report: FinalReport | None = None
        self._release: Release | None = None

    # -- what the runtime observed --------------------------------------------------------

    def lease_granted(
        self, now: int, lease_expires_at: int, cancel_requested: bool, messages: Iterable[Message] = ()
    ) -> None:
        """A start or renewal response arrived, carrying `messages`."""
        if now >= self.lease_expires_at:
            self.request_stop(StopReason.lease_lost, "the lease expired before the renewal answered")
            return
        self.lease_expires_at = max(self.lease_expires_at, lease_expires_at)
        if cancel_requested:
            self.request_stop(StopReason.cancelled, "a cancellation was requested")
        for message in messages:
            if message.id not in self._taken:
                self._taken.add(message.id)
                self.pending.append(message)

    def lease_refused(self, code: str) -> None:
        """A renewal was answered 409 (lease_expired, lease_replaced, ...)."""
        self.request_stop(StopReason.lease_lost, f"the renewal was refused: {code}")

    def tick(self, now: int) -> None:
        """Time passed; a lease not renewed by its expiry is lost."""
        if now >= self.lease_expires_at:
            self.request_stop(StopReason.lease_lost, "no renewal succeeded before the lease expired")

    def request_stop(self, reason: StopReason, detail: str | None = None) -> None:
        """Stop for `reason` unless already stopping; see OVERRIDE_DRAIN."""
        overrides = self.stop is StopReason.drain_timed_out and reason in OVERRIDE_DRAIN
        if self.stop is None or overrides:
            self.stop, self.stop_detail = reason, detail

    @property
    def should_interrupt(self) -> bool:
        """A stop arrived while a step runs: interrupt it where the action allows (a drain
        that timed out lets the running step finish: it stops at the next boundary)."""
        return self.stop is not None and self.stop is not StopReason.drain_timed_out and self.running is not None

    @property
    def paused(self) -> bool:
        return bool(self.pauses) and self.pauses[-1].resumed_by is None

    @property
    def progress(self) -> RunProgress:
        """The running step and how many steps ended: sent with every start and renewal."""
        return RunProgress(step=None if self.running is None else self.running.id, ended=len(self.outcomes))

    def take_acknowledgements(self) -> list[Acknowledgement]:
        """The acknowledgements decided since the last call, in the order to send them."""
        taken, self.outbox = self.outbox, []
        return taken

    # -- step boundaries ------------------------------------------------------------------

    def next_step(self, now: int) -> Step | None:
        """At a boundary: the step to start now, or None when there is none to start:
        the run is over (`finished`), or it is paused until something changes."""
        assert self.running is None, "a step is still running"
        self.tick(now)
        if self.stop is not None:
            return None
        while self.pending:
            self._admit(self.pending.pop(0))
        index = self._boundary()
        if self.paused or index == len(self.outline):
            return None
        self._position = index + 1
        self.running, self._started_at = self.outline[index].step, now
        return self.running

    def _boundary(self) -> int:
        """The outline index of the next step to start (the end when there is none)."""
        index = self._position
        while index < len(self.outline) and self.outline[index].removed_by is not None:
            index += 1
        return index

    def _admit(self, message: Message) -> None:
        """Apply one message at this boundary, or say why not."""
        index = self._boundary()
        boundary = Boundary(before_step=self.outline[index].step.id if index < len(self.outline) else None)
        if message.intent == "steer":
            why_not = self._steer(message, index)
            if why_not is None:
                self._acknowledge(message.id, MessageState.admitted, boundary=boundary)
            else:
                self._acknowledge(message.id, MessageState.rejected, detail=why_not)
        elif message.intent == "pause":
            if self.paused:
                self._acknowledge(
                    message.id,
                    MessageState.rejected,
                    detail=f"the run is already paused by message {self.pauses[-1].message_id}",
                )
            else:
                self.pauses.append(Pause(message_id=message.id, before_step=boundary.before_step))
                self._acknowledge(message.id, MessageState.admitted, boundary=boundary)
        elif message.intent == "resume":
            if not self.paused:
                self._acknowledge(message.id, MessageState.rejected, detail="the run is not paused")
            else:
                pause = self.pauses[-1]
                pause.resumed_by = message.id
                self._acknowledge(message.id, MessageState.admitted, boundary=boundary)
                self._acknowledge(message.id, MessageState.completed)
                self._acknowledge(pause.message_id, MessageState.completed)
        else:
            self._acknowledge(
                message.id, MessageState.rejected, detail=f"a host does not apply {message.intent} messages"
            )

    def _steer(self, message: Message, index: int) -> str | None:
        """Apply a steer's edit at outline index `index`; None, or why it cannot be applied."""
        try:
            edit = steering.parse_edit(message.data)
        except InvalidRequest as error:
            return f"the edit is not valid: {error.detail}"
        if edit is None:
            return NO_PLANNER
        if self.plan.stages is not None:
            return "structured edits apply to plans of steps; this plan runs stages"
        edited = steering.apply_edit(self.outline, edit, index, message.id)
        if isinstance(edited, str):
            return edited
        known = {entry.step.id for entry in self.outline}
        self._inserted.update((entry.step.id, message.id) for entry in edited if entry.step.id not in known)
        self.outline = edited
        self._steers.append(message.id)
        return None

    def _acknowledge(
        self, message_id: str, state: MessageState, boundary: Boundary | None = None, detail: str | None = None
    ) -> None:
        self.outbox.append(Acknowledgement(message_id=message_id, state=state, boundary=boundary, detail=detail))

    # -- steps ------------------------------------------------------------------------------

    def step_completed(
        self, now: int, output: str | None = None, artifacts: tuple[str, ...] = (), reason: str | None = None
    ) -> None:
        """The running step succeeded; `artifacts` are the ids of its stored evidence, and
        `reason` may say what evidence could not be stored."""
        self._end_step(StepStatus.completed, now, reason=reason, output=output, artifacts=artifacts)

    def step_failed(self, now: int, reason: str, output: str | None = None, artifacts: tuple[str, ...] = ()) -> None:
        self._end_step(StepStatus.failed, now, reason=reason, output=output, artifacts=artifacts)
        self.request_stop(StopReason.step_failed, reason)

    def step_refused(self, now: int, reason: str) -> None:
        self._end_step(StepStatus.refused, now, reason=reason)
        self.request_stop(StopReason.step_refused, reason)

    def step_lost(self, now: int, reason: str) -> None:
        """The running step's outcome is unknown (its device went away): it is
        ``interrupted``, never ``completed`` or ``failed``, and the run stops."""
        self.request_stop(StopReason.step_lost, reason)
        self._end_step(StepStatus.interrupted, now, reason=reason)

    def device_lost(self, now: int, reason: str) -> None:
        """The device went away under the running step: the step's effect is unknown, so it
        is ``interrupted``; the run stops and ends in a release (another device may run it)."""
        self.request_stop(StopReason.device_lost, reason)
        self._end_step(StepStatus.interrupted, now, reason=reason)

    def step_interrupted(self, now: int, reason: str | None = None) -> None:
        """The running step was stopped, or its outcome is unknown."""
        self._end_step(StepStatus.interrupted, now, reason=reason or NOT_STARTED_BECAUSE.get(self.stop, "unknown"))

    def _end_step(
        self,
        status: StepStatus,
        now: int,
        reason: str | None = None,
        output: str | None = None,
        artifacts: tuple[str, ...] = (),
    ) -> None:
        step = self.running
        assert step is not None, "no step is running"
        self.outcomes[step.id] = StepOutcome(
            id=step.id,
            status=status,
            reason=reason,
            started_at=self._started_at,
            ended_at=now,
            output=output,
            artifacts=artifacts,
        )
        self.running = None
        self._checkpoint(step)

    def evidence_added(self, step_id: str, artifacts: tuple[str, ...], missing: str | None = None) -> None:
        """Evidence of an ended step stored after it ended (issue 26: the recording the
        attempt's end stopped); its outcome lists the ids and, in `reason`, what was not
        stored. Before the report only: the report is fixed once computed."""
        outcome = self.outcomes[step_id]
        assert self._report is None and self._release is None, "the report was computed already"
        reason = "; ".join(filter(None, (outcome.reason, missing))) or None
        self.outcomes[step_id] = attrs.evolve(outcome, artifacts=outcome.artifacts + artifacts, reason=reason)

    def last_started(self) -> str | None:
        """The id of the step that started last (the outcomes are recorded as steps end)."""
        started = [outcome for outcome in self.outcomes.values() if outcome.started_at is not None]
        return started[-1].id if started else None

    def _checkpoint(self, step: Step) -> None:
        for stage in self.plan.stages or ():
            if stage.steps[-1].id == step.id and all(
                self.outcomes.get(s.id) and self.outcomes[s.id].status == StepStatus.completed for s in stage.steps
            ):
                self.checkpoints.append(stage.id)

    # -- the end ----------------------------------------------------------------------------

    @property
    def finished(self) -> bool:
        """Nothing more will run: stopped, or every step done and not paused."""
        if self.running is not None:
            return False
        return self.stop is not None or (not self.paused and self._boundary() == len(self.outline))

    @property
    def releases(self) -> bool:
        """The run ends in a release: the host stopped (or lost its device) before every
        step still to run completed."""
        assert self.finished, "the run has not reached its end"
        return self.stop in RELEASE_REASONS and not self._all_completed(self._steps())

    def conclusion(self) -> FinalReport | Release:
        """What to send at the end: the terminal report, or the release."""
        return self.release() if self.releases else self.report()

    def report(self) -> FinalReport:
        """The terminal report; the same object every time it is asked for.

        Computing it settles the attempt's steering: every admitted steer is acknowledged
        ``completed`` (its edit is what the report shows)."""
        assert self.finished, "the run has not reached its end"
        assert not self.releases, "a host stop ends in a release, never in a verdict on the task"
        if self._report is None:
            steps = self._steps()
            if self._all_completed(steps):
                status = TaskStatus.done  # it finished before any stop could take effect
            elif self.stop is StopReason.cancelled:
                status = TaskStatus.cancelled
            else:
                status = TaskStatus.failed
            self._report = FinalReport(status=status, steps=steps, metadata=self._metadata())
            self._settle_steers()
        return self._report

    def release(self) -> Release:
        """The release; the same object every time it is asked for. Like the report, it
        settles the steering: its steps show every admitted edit."""
        assert self.releases, "only a host stop ends in a release"
        if self._release is None:
            assert self.stop is not None
            self._release = Release(reason=RELEASE_REASONS[self.stop], steps=self._steps(), detail=self.stop_detail)
            self._settle_steers()
        return self._release

    def _steps(self) -> tuple[StepOutcome, ...]:
        # A paused run that ends says so in its steps, unless the host stopped: then what
        # kept the steps from starting is the host, whatever happens to the pause next.
        paused = self.paused and self.stop not in RELEASE_REASONS
        reason = PAUSED if paused else NOT_STARTED_BECAUSE.get(self.stop, "not_reached")
        return tuple(self._outcome(entry, reason) for entry in self.outline)

    def _all_completed(self, steps: tuple[StepOutcome, ...]) -> bool:
        live = [outcome for outcome, entry in zip(steps, self.outline) if entry.removed_by is None]
        return all(outcome.status == StepStatus.completed for outcome in live)

    def _settle_steers(self) -> None:
        for message_id in self._steers:
            self._acknowledge(message_id, MessageState.completed)

    def _outcome(self, entry: steering.Entry, reason: str) -> StepOutcome:
        outcome = self.outcomes.get(entry.step.id)
        if outcome is not None:
            return outcome
        if entry.removed_by is not None:
            return StepOutcome(id=entry.step.id, status=StepStatus.not_started, reason=steering.STEERED)
        return StepOutcome(id=entry.step.id, status=StepStatus.not_started, reason=reason)

    def _metadata(self) -> dict[str, JSON]:
        metadata: dict[str, JSON] = {}
        if self.stop is not None:
            metadata["stop_reason"] = self.stop.value
            metadata["stop_detail"] = self.stop_detail
        if self.plan.stages is not None:
            metadata["checkpoints"] = list(self.checkpoints)
        if self.pauses:
            metadata["pauses"] = [
                {"message_id": p.message_id, "before_step": p.before_step, "resumed_by": p.resumed_by}
                for p in self.pauses
            ]
        steered = {entry.step.id: entry.removed_by for entry in self.outline if entry.removed_by is not None}
        steered.update(self._inserted)
        if steered:  # which message removed or added each step: outcomes stay attributable
            metadata["steered_steps"] = {e.step.id: steered[e.step.id] for e in self.outline if e.step.id in steered}
        return metadata
