"""The Host Agent's decisions for one attempt, with no IO: when to stop, and what to report.

The runtime (`amc.agent`) owns the sockets and the device; it tells an `Execution` what
it observed (a lease response, a refused renewal, the time, a step's end) and asks it what
to do next (run this step, interrupt the running one, stop, report this). Keeping these
decisions here means they are tested like the kernel, by example and by Hypothesis.

Rules (seed 001 and PROTOCOL.md "Host Agent duties"):

- A start or renewal response with ``cancel_requested: true`` is a stop request for
  reason ``cancelled``. A 409 on renewal, or reaching ``lease_expires_at`` without a
  successful renewal, is ``lease_lost``. A step that fails is ``step_failed``; a step the
  action policy refuses is ``step_refused``; a step whose outcome cannot be known (its
  device went away mid-step) is ``step_lost``; a host shutting down is ``host_stopping``.
  The first stop reason observed is the one that counts.
- Stops take effect at step boundaries: no step starts after a stop. A step running when
  the stop arrives is interrupted where the runtime can (`should_interrupt`), and is
  recorded ``interrupted`` unless it finished first: never ``completed`` if it did not
  complete, and never ``cancelled``.
- Every planned step ends with exactly one outcome. Steps that never started are
  ``not_started`` with the stop's reason (``cancelled``, ``lease_lost``,
  ``previous_step_failed``, ...).
- The report is ``done`` when every step completed (even if a stop arrived too late to
  matter); ``cancelled`` only when the stop came from a cancellation request; otherwise
  ``failed``. It is computed once, so a retry after a
  lost response sends the identical body.
"""

from __future__ import annotations

import enum

import attrs

from amc.core.records import JSON, Plan, Step, StepOutcome


class StopReason(enum.Enum):
    cancelled = "cancelled"
    lease_lost = "lease_lost"
    step_failed = "step_failed"
    step_refused = "step_refused"
    step_lost = "step_lost"
    host_stopping = "host_stopping"


# Why a step that never started did not start, by stop reason.
NOT_STARTED_BECAUSE = {
    StopReason.cancelled: "cancelled",
    StopReason.lease_lost: "lease_lost",
    StopReason.step_failed: "previous_step_failed",
    StopReason.step_refused: "previous_step_refused",
    StopReason.step_lost: "previous_step_lost",
    StopReason.host_stopping: "host_stopping",
}


@attrs.frozen
class Report:
    """The terminal report's body, fixed once computed."""

    status: str  # done | failed | cancelled
    steps: tuple[StepOutcome, ...]
    metadata: dict[str, JSON]


class Execution:
    """One attempt's run of a plan, as a sequence of decisions."""

    def __init__(self, plan: Plan, lease_expires_at: int):
        self.plan = plan
        self.steps: tuple[Step, ...] = plan.all_steps()
        self.lease_expires_at = lease_expires_at
        self.stop: StopReason | None = None
        self.stop_detail: str | None = None
        self.outcomes: dict[str, StepOutcome] = {}
        self.running: Step | None = None
        self._started_at: int | None = None
        self._next = 0
        self.checkpoints: list[str] = []  # stages finished, in order (WorkflowRunner)
        self._report: Report | None = None

    # -- what the runtime observed --------------------------------------------------------

    def lease_granted(self, now: int, lease_expires_at: int, cancel_requested: bool) -> None:
        """A start or renewal response arrived."""
        if now >= self.lease_expires_at:
            self.request_stop(StopReason.lease_lost, "the lease expired before the renewal answered")
            return
        self.lease_expires_at = max(self.lease_expires_at, lease_expires_at)
        if cancel_requested:
            self.request_stop(StopReason.cancelled, "a cancellation was requested")

    def lease_refused(self, code: str) -> None:
        """A renewal was answered 409 (lease_expired, lease_replaced, ...)."""
        self.request_stop(StopReason.lease_lost, f"the renewal was refused: {code}")

    def tick(self, now: int) -> None:
        """Time passed; a lease not renewed by its expiry is lost."""
        if now >= self.lease_expires_at:
            self.request_stop(StopReason.lease_lost, "no renewal succeeded before the lease expired")

    def request_stop(self, reason: StopReason, detail: str | None = None) -> None:
        if self.stop is None:
            self.stop, self.stop_detail = reason, detail

    @property
    def should_interrupt(self) -> bool:
        """A stop arrived while a step runs: interrupt it where the action allows."""
        return self.stop is not None and self.running is not None

    # -- step boundaries ------------------------------------------------------------------

    def next_step(self, now: int) -> Step | None:
        """At a boundary: the step to start now, or None when the run is over."""
        assert self.running is None, "a step is still running"
        self.tick(now)
        if self.stop is not None or self._next >= len(self.steps):
            return None
        self.running, self._started_at = self.steps[self._next], now
        self._next += 1
        return self.running

    def step_completed(self, now: int, output: str | None = None) -> None:
        self._end_step("completed", now, output=output)

    def step_failed(self, now: int, reason: str, output: str | None = None) -> None:
        self._end_step("failed", now, reason=reason, output=output)
        self.request_stop(StopReason.step_failed, reason)

    def step_refused(self, now: int, reason: str) -> None:
        self._end_step("refused", now, reason=reason)
        self.request_stop(StopReason.step_refused, reason)

    def step_lost(self, now: int, reason: str) -> None:
        """The running step's outcome is unknown (its device went away): it is
        ``interrupted``, never ``completed`` or ``failed``, and the run stops."""
        self.request_stop(StopReason.step_lost, reason)
        self._end_step("interrupted", now, reason=reason)

    def step_interrupted(self, now: int, reason: str | None = None) -> None:
        """The running step was stopped, or its outcome is unknown."""
        self._end_step("interrupted", now, reason=reason or NOT_STARTED_BECAUSE.get(self.stop, "unknown"))

    def _end_step(self, status: str, now: int, reason: str | None = None, output: str | None = None) -> None:
        step = self.running
        assert step is not None, "no step is running"
        self.outcomes[step.id] = StepOutcome(
            id=step.id, status=status, reason=reason, started_at=self._started_at, ended_at=now, output=output
        )
        self.running = None
        self._checkpoint(step)

    def _checkpoint(self, step: Step) -> None:
        for stage in self.plan.stages or ():
            if stage.steps[-1].id == step.id and all(
                self.outcomes.get(s.id) and self.outcomes[s.id].status == "completed" for s in stage.steps
            ):
                self.checkpoints.append(stage.id)

    # -- the end ----------------------------------------------------------------------------

    @property
    def finished(self) -> bool:
        return self.running is None and (self.stop is not None or self._next >= len(self.steps))

    def report(self) -> Report:
        """The terminal report; the same object every time it is asked for."""
        assert self.finished, "the run has not reached its end"
        if self._report is None:
            reason = NOT_STARTED_BECAUSE.get(self.stop, "not_reached")
            steps = tuple(
                self.outcomes.get(step.id) or StepOutcome(id=step.id, status="not_started", reason=reason)
                for step in self.steps
            )
            if all(outcome.status == "completed" for outcome in steps):
                status = "done"  # it finished before any stop could take effect
            elif self.stop is StopReason.cancelled:
                status = "cancelled"
            else:
                status = "failed"
            metadata: dict[str, JSON] = {}
            if self.stop is not None:
                metadata["stop_reason"] = self.stop.value
                metadata["stop_detail"] = self.stop_detail
            if self.plan.stages is not None:
                metadata["checkpoints"] = list(self.checkpoints)
            self._report = Report(status=status, steps=steps, metadata=metadata)
        return self._report
