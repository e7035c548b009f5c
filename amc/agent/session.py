"""One session attempt (specs/protocol.md Part D): actions as the caller sends them.

    start (as for a plan) -> the renewer, in the background
      -> loop: long-poll `actions/next`; run the action the server hands out; store its
         evidence (step = the action id); report its outcome at once, until a definite answer
      -> a cancel: the running action is interrupted (`interrupted`), then the result `cancelled`
      -> lease loss (a 409 on a poll, a renewal or a report): stop, report nothing more; this
         is also how the server's end of the session (`session_ended`, `session_idle`) arrives
      -> the host stopping or the device gone: release the attempt

While an action runs, a second poll names it as `running`: the server answers it only with
a cancel, so a cancel reaches the device at once, not at the next renewal. The `Execution`
of the plan runner keeps this attempt's lease and stop state (its plan is empty): the
renewer, the evidence uploads and the host's stop all speak to it as for a plan.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
from typing import Any

import orjson

from amc.adapters.adb.errors import ActionRefused, AdbError, DeviceUnavailable, Interrupted, StepFailed
from amc.adapters.adb.executor import ActionResult
from amc.adapters.adb.recording import MP4
from amc.core.execution import RELEASE_REASONS, StopReason
from amc.core.records import Step
from amc.core.times import to_rfc3339

from .attempt import LEASE_REFUSALS
from .client import Rejected, Uncertain
from .inputs import InputUnavailable
from .renewer import Renewer
from .runner import INTERRUPT_RETRY_SECONDS
from .wire import INLINE_OUTPUT_CHARS
from .worker import AttemptRecord, AttemptRun

log = logging.getLogger("amc.agent.session")

POLL_SECONDS = 20.0  # one long poll's wait; well under a host timeout
WATCH_AFTER_SECONDS = 0.2  # an action running longer than this is watched for a cancel by a poll


def _forget(call: asyncio.Future[Any]) -> None:
    if not call.cancelled():
        call.exception()


class SessionRun(AttemptRun):
    """Runs one session attempt; see the module docstring."""

    async def run(self) -> AttemptRecord:
        attempt = self.attempt
        a, label = attempt.assignment, attempt.label
        log.info("%s: session assigned (lease %.3g s)", label, a.lease_ms / 1000)
        record = AttemptRecord(task_id=a.task_id, attempt=a.attempt, device=a.device, body={})
        self.outcomes: dict[str, bytes] = {}  # action id -> the outcome body reported (a redelivery is not rerun)
        started = await self._start()
        renewer = None
        background: list[asyncio.Task[None]] = []
        if started is not None:
            renewer = Renewer(attempt, last_grant=started)
            background.append(asyncio.create_task(renewer.run(), name=f"renew {label}"))
        self.last_action: str | None = None
        try:
            if started is not None:
                await self._serve()
            await self._store_recording()
            await self._conclude(record)
        finally:
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            attempt.executor.abandon_recording()  # torn down before its end: no chain outlives it
            self.evidence.close()
        record.renewals = renewer.renewals if renewer is not None else 0
        record.uploads = self.evidence.uploads
        return record

    # -- the loop ---------------------------------------------------------------------------

    async def _serve(self) -> None:
        """Poll and run actions until a stop (cancel, lease loss, the host stopping)."""
        attempt = self.attempt
        execution, outcomes = attempt.execution, self.outcomes
        while execution.stop is None:
            answer = await self._poll(running=None)
            if answer is None:
                continue
            if answer.get("cancel_requested"):
                attempt.stop(StopReason.cancelled, "a cancellation was requested")
            action = answer.get("action")
            if action is None:
                continue
            step = Step(id=action["id"], action=action["action"], args=action.get("args") or {})
            if step.id in outcomes:  # our report's answer was lost: send it again, never rerun
                await self._report_action(step.id, outcomes[step.id])
            elif execution.stop is None:
                await self._run_action(step)
            else:  # delivered as a stop arrived: it never started
                await self._report_action(step.id, self._outcome_body("not_started", reason=self._stop_words()))

    async def _poll(self, running: str | None) -> dict[str, Any] | None:
        """One long poll, given up when a stop arrives; None when it had no answer."""
        attempt = self.attempt
        a = attempt.assignment
        call = asyncio.ensure_future(
            attempt.channel.poll_action(a.task_id, a.attempt, a.lease_id, POLL_SECONDS, running=running)
        )
        stopped = asyncio.ensure_future(attempt.stop_signal.wait())
        try:
            await asyncio.wait([call, stopped], return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:  # the action it watched ended: this poll is not wanted
            call.add_done_callback(_forget)
            call.cancel()
            raise
        finally:
            stopped.cancel()
        if not call.done():
            call.add_done_callback(_forget)  # its answer, if it still comes, is no longer wanted
            call.cancel()
            return None
        try:
            return call.result()
        except Rejected as error:
            if error.status in LEASE_REFUSALS:
                log.info("%s: the session's attempt is over (%s)", attempt.label, error)
                attempt.lease_refused(error.code)
            else:
                log.error("%s: poll refused (%s)", attempt.label, error)
                await asyncio.sleep(attempt.backoff[0])
        except Uncertain as error:
            log.warning("%s: poll got no answer (%s)", attempt.label, error)
            await asyncio.sleep(attempt.backoff[0] * random.uniform(0.8, 1.2))
        return None

    async def _run_action(self, step: Step) -> None:
        attempt = self.attempt
        clock, executor, label = attempt.clock, attempt.executor, attempt.label
        loop = asyncio.get_running_loop()
        started_at = clock.now()
        try:
            files = await attempt.local_inputs(step)
        except InputUnavailable as error:
            body = self._outcome_body("failed", reason=f"{error}; nothing was sent to the device")
            self.outcomes[step.id] = body
            await self._report_action(step.id, body)
            return
        call = functools.partial(executor.run, step.action, step.args, step_id=step.id, inputs=files)
        future = loop.run_in_executor(attempt.pool, call)
        watcher = asyncio.ensure_future(self._watch(step.id, future))
        try:
            await asyncio.wait([future])
        except asyncio.CancelledError:
            executor.interrupt()  # a forced shutdown: leave nothing running on the device
            raise
        finally:
            watcher.cancel()
        ended_at = clock.now()
        times: dict[str, Any] = {"started_at": to_rfc3339(started_at), "ended_at": to_rfc3339(ended_at)}
        try:
            result: ActionResult = future.result()
        except ActionRefused as error:  # the action policy's refusal, never passed off as anything else
            body = self._outcome_body("refused", reason=error.reason)
        except Interrupted:
            body = self._outcome_body("interrupted", reason=f"stopped while running: {self._stop_words()}", **times)
        except DeviceUnavailable as error:
            attempt.stop(StopReason.device_lost, error.reason)
            body = self._outcome_body("interrupted", reason=f"the device went away: {error.reason}", **times)
        except StepFailed as error:
            stored = await self.evidence.store(step, output=error.output)
            reason = "; ".join(filter(None, (error.reason, stored.missing)))
            body = self._outcome_body("failed", reason=reason, output=error.output, artifacts=stored.artifacts, **times)
        except Exception as error:  # a bug of ours: the action's effect is unknown
            log.exception("%s: action %s raised unexpectedly", label, step.id)
            body = self._outcome_body("interrupted", reason=f"agent error: {type(error).__name__}: {error}", **times)
        else:
            stored = await self.evidence.store(
                step, result.artifact, result.content_type, result.output, more=result.more_artifacts
            )
            body = self._outcome_body(
                "completed", reason=stored.missing, output=result.output, artifacts=stored.artifacts, **times
            )
        self.outcomes[step.id] = body
        self.last_action = step.id
        log.info("%s: action %s (%s) %s", label, step.id, step.action, orjson.loads(body)["status"])
        await self._report_action(step.id, body)

    async def _watch(self, action_id: str, future: asyncio.Future[ActionResult]) -> None:
        """While `action_id` runs: learn of a cancel (a poll naming it `running`, or a renewal)
        and interrupt it, again until it returns."""
        # Most actions (a tap, a dump) end within a few ms: a second poll for them would only
        # double the requests and be cut off; a cancel arriving meanwhile waits for the action.
        await asyncio.wait([future], timeout=WATCH_AFTER_SECONDS)
        attempt = self.attempt
        execution = attempt.execution
        while not future.done():
            if execution.stop is not None and execution.stop is not StopReason.drain_timed_out:
                attempt.executor.interrupt()
                await asyncio.sleep(INTERRUPT_RETRY_SECONDS)
                continue
            answer = await self._poll(running=action_id)
            if answer is not None and answer.get("cancel_requested"):
                attempt.stop(StopReason.cancelled, "a cancellation was requested")

    def _stop_words(self) -> str:
        execution = self.attempt.execution
        stop = execution.stop
        if stop is StopReason.cancelled:
            return "cancelled"
        return f"{stop.value if stop else 'stopped'}: {execution.stop_detail or ''}".rstrip(": ")

    def _outcome_body(
        self,
        status: str,
        *,
        reason: str | None = None,
        output: str | None = None,
        artifacts: tuple[str, ...] = (),
        started_at: str | None = None,
        ended_at: str | None = None,
    ) -> bytes:
        body: dict[str, Any] = {"lease_id": self.attempt.assignment.lease_id, "status": status}
        for name, value in (("reason", reason), ("started_at", started_at), ("ended_at", ended_at)):
            if value is not None:
                body[name] = value
        if output:
            body["output"] = output[-INLINE_OUTPUT_CHARS:]  # the whole of a longer one is an artifact
        if artifacts:
            body["artifacts"] = list(artifacts)
        return orjson.dumps(body)

    async def _report_action(self, action_id: str, body: bytes) -> None:
        """Send an action's outcome until a definite answer (the identical bytes each time)."""
        attempt = self.attempt
        a, label = attempt.assignment, attempt.label
        delay = attempt.backoff[0]
        while True:
            try:
                await attempt.channel.report_action(a.task_id, a.attempt, action_id, body)
                return
            except Rejected as error:
                if error.status in LEASE_REFUSALS:
                    log.warning("%s: outcome of %s refused (%s): the attempt is over", label, action_id, error)
                    attempt.lease_refused(error.code)
                else:
                    log.error("%s: outcome of %s refused (%s)", label, action_id, error)
                return
            except Uncertain as error:
                log.warning("%s: outcome of %s got no answer (%s); retrying", label, action_id, error)
            delay = await attempt.retry_after(delay)

    # -- the end ----------------------------------------------------------------------------

    async def _store_recording(self) -> None:
        """A recording still running when the session stops is stopped and stored as artifacts
        of the session's last action (its outcome, already reported, does not list them; the
        task's artifacts do). After lease loss, the usual end of a session, the server takes
        no more uploads: a caller stops its recording with a `record` stop action."""
        attempt = self.attempt
        if attempt.executor.memory.recording is None:
            return
        try:
            files = await asyncio.get_running_loop().run_in_executor(attempt.pool, attempt.executor.finish_recording)
        except AdbError as error:
            log.warning("%s: the session's recording could not be fetched: %s", attempt.label, error.reason)
            return
        if not files or self.last_action is None or attempt.lease_lost:
            log.warning("%s: the session's recording is not stored (its lease is over or no action ran)", attempt.label)
            return
        step = Step(id=self.last_action, action="record", args={})
        stored = await self.evidence.store(step, files[0], MP4, more=files[1:], what="record-end")
        log.info("%s: the session's recording stored with action %s: %s", attempt.label, self.last_action, stored)

    async def _conclude(self, record: AttemptRecord) -> None:
        """The report a stop calls for: `cancelled` for a cancel, a release when the host stops
        or lost the device, nothing after lease loss (the attempt is no longer this host's)."""
        attempt = self.attempt
        stop = attempt.execution.stop
        lease_id = attempt.assignment.lease_id
        if stop is StopReason.cancelled:
            body = orjson.dumps({"lease_id": lease_id, "status": "cancelled"})
            release = False
        elif stop in RELEASE_REASONS:
            body = orjson.dumps({"lease_id": lease_id, "reason": RELEASE_REASONS[stop]})
            release = True
        else:
            log.info("%s: session over (%s)", attempt.label, attempt.execution.stop_detail)
            return
        record.body = orjson.loads(body)
        await self._report(body, record, release=release)
