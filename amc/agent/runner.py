"""Running a plan's steps on the device: `TaskRunner` (steps) and `WorkflowRunner` (stages).

The loop asks the `Execution` for the next step at every boundary and tells it how each
step ended; it never decides by itself whether to go on. A step runs in a worker thread
(the ADB executor blocks), while the event loop stays free for the renewer. When the
renewer (or a host shutdown) puts a stop on the Execution, `stop_signal` is set, and if
the Execution then says `should_interrupt`, the runner calls `executor.interrupt()`.

That interrupt is repeated until the step returns: the stop can land in the instant
between the Execution marking the step running and the executor registering it, when
`interrupt()` finds nothing to stop and returns False.

At each boundary the Execution also applies the messages it was given (steering edits,
pause, resume) and decides their acknowledgements; `on_boundary` hands those to the
sender. When it answers "no step now" without having finished, the run is paused: the
runner waits for `wake` (set whenever the Execution observed something: a resume, a stop)
and asks again. The renewer keeps the lease meanwhile; the wait is also bounded by the
lease's expiry, so a paused run notices a lost lease even if nothing wakes it.

A step that completed or failed then has its evidence stored (`evidence`): the file of an
observation, an output too long to report inline. Its `now` is taken before, so the
step's `ended_at` is when the device finished, not when the upload did.

How an executor outcome maps onto the Execution (amc.adapters.adb.errors):
`ActionRefused` -> `step_refused`; `Interrupted` -> `step_interrupted`; `DeviceUnavailable`
(the device or its adb server went away mid-step) -> `device_lost`: the step's effect is
unknown, so it is `interrupted`, the run stops, and the attempt is released for another
device; `StepFailed` (also `StepTimedOut`) -> `step_failed`. An unexpected exception is a
bug of ours whose effect on the device is just as unknown: `step_lost` (the task fails,
since another host would run the same code).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from amc.adapters.adb.errors import ActionRefused, AdbError, DeviceUnavailable, Interrupted, StepFailed
from amc.adapters.adb.executor import ActionResult
from amc.adapters.adb.recording import MP4
from amc.core.execution import Pause
from amc.core.records import Plan, Step

from .attempt import Attempt
from .evidence import Evidence, Stored
from .inputs import InputUnavailable

log = logging.getLogger("amc.agent.runner")

INTERRUPT_RETRY_SECONDS = 0.05


class TaskRunner:
    """Runs the steps of one attempt in plan order, as its `Execution` decides.

    Args:
        attempt: the attempt: its Execution, the device's executor, the pool of threads
            for its blocking calls, the server's clock (step times are server times), and
            the events that say a stop may have arrived or the Execution observed something.
        evidence: stores what each step produced, before the next step starts.
        on_boundary: called after each boundary, to send the acknowledgements decided there.
    """

    def __init__(self, attempt: Attempt, *, evidence: Evidence, on_boundary: Callable[[], None]):
        self.attempt = attempt
        self.evidence = evidence
        self.on_boundary = on_boundary
        self._pause_logged: Pause | None = None

    async def run(self) -> None:
        """Run until the Execution has finished; then store a recording still running."""
        attempt = self.attempt
        if attempt.execution.plan.record and not attempt.execution.finished:
            await self._start_recording()
        await self._steps()
        await self._finish_recording()

    async def _steps(self) -> None:
        attempt = self.attempt
        execution, clock, label = attempt.execution, attempt.clock, attempt.label
        while True:
            attempt.wake.clear()  # before asking: whatever arrives after the answer wakes the wait
            step = execution.next_step(clock.now())
            self.on_boundary()
            if step is None:
                if execution.finished:
                    return
                await self._wait_paused()
                continue
            log.debug("%s: step %s (%s) starts", label, step.id, step.action)
            await self._run_step(step)
            outcome = execution.outcomes[step.id]
            log.info(
                "%s: step %s %s%s", label, step.id, outcome.status, f" ({outcome.reason})" if outcome.reason else ""
            )
            self.after_step(step)

    def after_step(self, step: Step) -> None:
        """A step ended (a hook for subclasses)."""

    async def _start_recording(self) -> None:
        """A plan's ``"record": true``: record from before the first step. A device that
        cannot record runs the plan unrecorded; the log says why."""
        attempt = self.attempt
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(attempt.pool, attempt.executor.start_recording)
        except AdbError as error:
            log.warning("%s: the plan asks for a recording, which could not start: %s", attempt.label, error.reason)

    async def _finish_recording(self) -> None:
        """The attempt's end: a recording still running (a plan's ``"record": true``, or a
        `record` start that no stop followed: a cancel, a failed step, a lost lease, a host
        stop) is stopped and stored as artifacts of the last step that started, before the
        report (specs/protocol.md, "Screen recording")."""
        attempt = self.attempt
        execution = attempt.execution
        if attempt.executor.memory.recording is None:
            return
        loop = asyncio.get_running_loop()
        files: tuple[Path, ...] = ()
        problem = None
        try:
            files = await loop.run_in_executor(attempt.pool, attempt.executor.finish_recording)
        except AdbError as error:
            problem = f"recording not stored: {error.reason}"
        step_id = execution.last_started()
        if step_id is None:
            log.warning("%s: a recording ended before any step started; nothing to attach it to", attempt.label)
            return
        stored = Stored()
        if files:
            step = Step(id=step_id, action="record", args={})
            stored = await self.evidence.store(step, files[0], MP4, more=files[1:], what="record-end")
        missing = "; ".join(filter(None, (problem, stored.missing))) or None
        log.info("%s: the attempt's end stored its recording with step %s (%s)", attempt.label, step_id, stored)
        execution.evidence_added(step_id, stored.artifacts, missing)

    async def _wait_paused(self) -> None:
        """Paused at a boundary: wait for news, or at most until the lease would expire."""
        attempt = self.attempt
        pause = attempt.execution.pauses[-1]
        if pause is not self._pause_logged:
            self._pause_logged = pause
            log.info(
                "%s: paused by message %s before %s",
                attempt.label,
                pause.message_id,
                f"step {pause.before_step}" if pause.before_step else "the report",
            )
        timeout = max(0.0, attempt.clock.seconds_until(attempt.execution.lease_expires_at))
        try:
            await asyncio.wait_for(attempt.wake.wait(), timeout)
        except TimeoutError:
            pass

    async def _run_step(self, step: Step) -> None:
        attempt = self.attempt
        executor = attempt.executor
        loop = asyncio.get_running_loop()
        try:
            files = await attempt.local_inputs(step)
        except InputUnavailable as error:
            attempt.execution.step_failed(attempt.clock.now(), f"{error}; nothing was sent to the device")
            return
        call = functools.partial(executor.run, step.action, step.args, step_id=step.id, inputs=files)
        future = loop.run_in_executor(attempt.pool, call)
        try:
            await self._supervise(future)
        except asyncio.CancelledError:
            executor.interrupt()  # a forced shutdown: leave nothing running on the device
            raise
        now = attempt.clock.now()
        execution = attempt.execution
        try:
            result: ActionResult = future.result()
        except ActionRefused as error:
            execution.step_refused(now, error.reason)
        except Interrupted:
            execution.step_interrupted(now)
        except DeviceUnavailable as error:
            execution.device_lost(now, error.reason)
        except StepFailed as error:
            stored = await self.evidence.store(step, output=error.output)
            reason = "; ".join(filter(None, (error.reason, stored.missing)))
            execution.step_failed(now, reason, output=error.output or None, artifacts=stored.artifacts)
        except Exception as error:  # a bug of ours: the step's effect is unknown
            log.exception("%s: step %s raised unexpectedly", attempt.label, step.id)
            execution.step_lost(now, f"agent error: {type(error).__name__}: {error}")
        else:
            stored = await self.evidence.store(
                step, result.artifact, result.content_type, result.output, more=result.more_artifacts
            )
            execution.step_completed(
                now, output=result.output or None, artifacts=stored.artifacts, reason=stored.missing
            )

    async def _supervise(self, future: asyncio.Future[Any]) -> None:
        """Wait for the step; once a stop arrives, interrupt it as the Execution says."""
        attempt = self.attempt
        stopped = asyncio.ensure_future(attempt.stop_signal.wait())
        try:
            while not future.done():
                if not stopped.done():
                    await asyncio.wait([future, stopped], return_when=asyncio.FIRST_COMPLETED)
                    continue
                if attempt.execution.should_interrupt:
                    attempt.executor.interrupt()
                await asyncio.wait([future], timeout=INTERRUPT_RETRY_SECONDS)
        finally:
            stopped.cancel()


class WorkflowRunner(TaskRunner):
    """Runs a staged plan; a stage whose steps all completed is a checkpoint.

    The Execution records the checkpoints (they go into the report's metadata); the
    runner announces each one as it is reached, so an operator can follow progress.
    """

    _announced = 0  # how many of the Execution's checkpoints were announced

    def after_step(self, step: Step) -> None:
        checkpoints = self.attempt.execution.checkpoints
        for stage in checkpoints[self._announced :]:
            log.info("%s: checkpoint: stage %s completed", self.attempt.label, stage)
        self._announced = len(checkpoints)


def runner_for(plan: Plan) -> type[TaskRunner]:
    return WorkflowRunner if plan.stages is not None else TaskRunner
