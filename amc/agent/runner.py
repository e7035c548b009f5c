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
import concurrent.futures
import functools
import logging
from collections.abc import Callable
from typing import Any

from amc.adapters.adb.errors import ActionRefused, DeviceUnavailable, Interrupted, StepFailed
from amc.adapters.adb.executor import ActionResult, AdbExecutor
from amc.core.execution import Execution, Pause
from amc.core.records import Plan, Step

from .clock import ServerClock
from .evidence import Evidence

log = logging.getLogger("amc.agent.runner")

INTERRUPT_RETRY_SECONDS = 0.05


class TaskRunner:
    """Runs the steps of one attempt in plan order, as its `Execution` decides.

    Args:
        execution: the attempt's decisions.
        executor: the device's action executor.
        clock: the server's clock estimate (step times are server times).
        pool: the threads that run blocking executor calls.
        stop_signal: set when a stop may have been put on the Execution.
        wake: set whenever the Execution observed something (what a paused run waits for).
        on_boundary: called after each boundary, to send the acknowledgements decided there.
        evidence: stores what each step produced, before the next step starts.
        label: names the attempt in logs.
    """

    def __init__(
        self,
        execution: Execution,
        executor: AdbExecutor,
        clock: ServerClock,
        pool: concurrent.futures.Executor,
        stop_signal: asyncio.Event,
        wake: asyncio.Event,
        on_boundary: Callable[[], None],
        evidence: Evidence,
        label: str,
    ):
        self.execution = execution
        self.executor = executor
        self.clock = clock
        self.pool = pool
        self.stop_signal = stop_signal
        self.wake = wake
        self.on_boundary = on_boundary
        self.evidence = evidence
        self.label = label
        self._pause_logged: Pause | None = None

    async def run(self) -> None:
        """Run until the Execution has finished."""
        while True:
            self.wake.clear()  # before asking: whatever arrives after the answer wakes the wait
            step = self.execution.next_step(self.clock.now())
            self.on_boundary()
            if step is None:
                if self.execution.finished:
                    return
                await self._wait_paused()
                continue
            log.debug("%s: step %s (%s) starts", self.label, step.id, step.action)
            await self._run_step(step)
            outcome = self.execution.outcomes[step.id]
            log.info(
                "%s: step %s %s%s",
                self.label,
                step.id,
                outcome.status,
                f" ({outcome.reason})" if outcome.reason else "",
            )
            self.after_step(step)

    def after_step(self, step: Step) -> None:
        """A step ended (a hook for subclasses)."""

    async def _wait_paused(self) -> None:
        """Paused at a boundary: wait for news, or at most until the lease would expire."""
        pause = self.execution.pauses[-1]
        if pause is not self._pause_logged:
            self._pause_logged = pause
            log.info(
                "%s: paused by message %s before %s",
                self.label,
                pause.message_id,
                f"step {pause.before_step}" if pause.before_step else "the report",
            )
        timeout = max(0.0, self.clock.seconds_until(self.execution.lease_expires_at))
        try:
            await asyncio.wait_for(self.wake.wait(), timeout)
        except TimeoutError:
            pass

    async def _run_step(self, step: Step) -> None:
        loop = asyncio.get_running_loop()
        call = functools.partial(self.executor.run, step.action, step.args, step_id=step.id)
        future = loop.run_in_executor(self.pool, call)
        try:
            await self._supervise(future)
        except asyncio.CancelledError:
            self.executor.interrupt()  # a forced shutdown: leave nothing running on the device
            raise
        now = self.clock.now()
        execution = self.execution
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
            log.exception("%s: step %s raised unexpectedly", self.label, step.id)
            execution.step_lost(now, f"agent error: {type(error).__name__}: {error}")
        else:
            stored = await self.evidence.store(step, result.artifact, result.content_type, result.output)
            execution.step_completed(
                now, output=result.output or None, artifacts=stored.artifacts, reason=stored.missing
            )

    async def _supervise(self, future: asyncio.Future) -> None:
        """Wait for the step; once a stop arrives, interrupt it as the Execution says."""
        stopped = asyncio.ensure_future(self.stop_signal.wait())
        try:
            while not future.done():
                if not stopped.done():
                    await asyncio.wait([future, stopped], return_when=asyncio.FIRST_COMPLETED)
                    continue
                if self.execution.should_interrupt:
                    self.executor.interrupt()
                await asyncio.wait([future], timeout=INTERRUPT_RETRY_SECONDS)
        finally:
            stopped.cancel()


class WorkflowRunner(TaskRunner):
    """Runs a staged plan; a stage whose steps all completed is a checkpoint.

    The Execution records the checkpoints (they go into the report's metadata); the
    runner announces each one as it is reached, so an operator can follow progress.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._announced = 0

    def after_step(self, step: Step) -> None:
        for stage in self.execution.checkpoints[self._announced :]:
            log.info("%s: checkpoint: stage %s completed", self.label, stage)
        self._announced = len(self.execution.checkpoints)


def runner_for(plan: Plan) -> type[TaskRunner]:
    return WorkflowRunner if plan.stages is not None else TaskRunner
