"""One attempt, from the claim's answer to a definite answer to its report.

    start (retried until granted, refused, or the lease runs out)
      -> the renewer, in the background, every lease_seconds / 3
      -> the runner: steps, as the Execution decides (paused: waiting for a resume or a stop),
         each step's evidence uploaded before the next starts (`evidence`)
      -> the report, computed once by the Execution: a result, or a release when the
         host stopped or lost the device (the task is then not this host's to judge)
      -> every message acknowledgement answered (`Acknowledger.flush`)
      -> the report sent until a definite answer
      -> the renewer stops

All decisions are the `Execution`'s (amc.core.execution); this module only does the IO and
hands it what was observed: the messages the start and renewal answers carry go to it
with the grant, and the acknowledgements it decides go to the `Acknowledger`, which sends
them beside the run. The acknowledgements are flushed before the result because the server
checks the result's steps against the steering edits it recorded as admitted. The
Execution is touched from the event loop only, so it needs no lock: the blocking device
calls run in threads and come back to the loop.

The report is retried with the identical bytes (AGENT-RETRY) until the server answers:
2xx settles the attempt; a 4xx is an answer too (409: the attempt is over for this host,
e.g. the lease expired and the task was requeued; logged, not retried). Meanwhile the
renewer keeps the lease, so a slow report does not let the lease run out (LEASE-RENEW/s3).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import random
import time

import attrs
import orjson

from amc.adapters.adb.executor import AdbExecutor
from amc.core.execution import Execution, FinalReport, StopReason

from .acks import Acknowledger, Sent
from .client import ControlPlane, Rejected, Uncertain
from .clock import ServerClock
from .evidence import Evidence, Upload
from .renewer import LEASE_REFUSALS, Renewer
from .runner import runner_for
from .wire import ClaimedAttempt, parse_grant, release_body, result_body

log = logging.getLogger("amc.agent.worker")


@attrs.define
class AttemptRecord:
    """What happened to one attempt, as this host saw it (for logs, tests and benchmarks)."""

    task_id: str
    attempt: int
    device: str
    body: dict  # the report (result or release) that was sent, decoded
    answer: int | None = None  # the HTTP status that settled the report
    code: str | None = None  # the problem code of a refused report
    tries: int = 0  # how many times the report was sent
    renewals: int = 0
    acknowledgements: list[Sent] = attrs.Factory(list)  # in the order sent
    uploads: list[Upload] = attrs.Factory(list)  # the artifacts, in the order sent

    @property
    def released(self) -> bool:
        return "status" not in self.body

    @property
    def status(self) -> str:
        """The reported status, or ``released`` for a release."""
        return "released" if self.released else self.body["status"]


class AttemptRun:
    """Runs one assignment on one device.

    Args:
        assignment: the claim's answer.
        received_at: local monotonic time when the claim's answer arrived.
        server: the control plane client.
        executor: the device's executor (its artifacts directory is this attempt's).
        pool: threads for the blocking device calls.
        backoff: first and longest pause between report retries, in seconds.
        keep_artifacts: keep the attempt's files after they are uploaded (else the
            executor's directory is temporary and removed when the attempt ends).
    """

    def __init__(
        self,
        assignment: ClaimedAttempt,
        received_at: float,
        server: ControlPlane,
        executor: AdbExecutor,
        pool: concurrent.futures.Executor,
        backoff: tuple[float, float] = (0.1, 5.0),
        keep_artifacts: bool = False,
    ):
        self.assignment = assignment
        self.server = server
        self.executor = executor
        self.pool = pool
        self.backoff = backoff
        self.label = f"{assignment.task_id}/{assignment.attempt}@{assignment.device}"
        self.clock = ServerClock(assignment.granted_at, received_at)
        self.execution = Execution(assignment.plan, assignment.lease_expires_at)
        self.stop_signal = asyncio.Event()  # set once there is a stop to act on
        self.wake = asyncio.Event()  # set whenever the Execution observed something
        self.acks = Acknowledger(server, assignment, self.execution, self.changed, backoff, self.label)
        self.evidence = Evidence(
            server,
            assignment,
            self.execution,
            self.changed,
            self.acks.flush,
            executor.artifacts_dir,
            keep_artifacts,
            backoff,
            self.label,
        )

    def changed(self) -> None:
        """The Execution observed something: wake a paused runner, and interrupt a step if
        there is a stop to act on."""
        self.wake.set()
        if self.execution.stop is not None:
            self.stop_signal.set()

    def stop(self, reason: StopReason, detail: str) -> None:
        """Ask the attempt to stop (e.g. the host is shutting down); the Execution decides
        whether the running step is interrupted or the stop waits for the next boundary."""
        self.execution.request_stop(reason, detail)
        self.changed()

    async def run(self) -> AttemptRecord:
        try:
            return await self._run()
        finally:
            self.evidence.close()  # whatever happened, no temporary file outlives the attempt

    async def _run(self) -> AttemptRecord:
        log.info(
            "%s: assigned (%d step(s), lease %.3g s)",
            self.label,
            len(self.execution.outline),
            self.assignment.lease_ms / 1000,
        )
        started = await self._start()
        renewer = None
        background = []
        if started is not None:
            renewer = Renewer(
                self.server, self.assignment, self.execution, self.clock, self.changed, last_grant=started
            )
            background.append(asyncio.create_task(renewer.run(), name=f"renew {self.label}"))
            background.append(asyncio.create_task(self.acks.run(), name=f"acknowledge {self.label}"))
            for task in background:
                task.add_done_callback(self._helper_ended)
        try:
            runner = runner_for(self.assignment.plan)(
                self.execution,
                self.executor,
                self.clock,
                self.pool,
                self.stop_signal,
                self.wake,
                self.acks.collect,
                self.evidence,
                self.label,
            )
            await runner.run()
            conclusion = self.execution.conclusion()
            if isinstance(conclusion, FinalReport):
                body = result_body(self.assignment.lease_id, conclusion)
            else:
                log.info("%s: releasing the attempt (%s: %s)", self.label, conclusion.reason, conclusion.detail)
                body = release_body(self.assignment.lease_id, conclusion)
            record = AttemptRecord(
                task_id=self.assignment.task_id,
                attempt=self.assignment.attempt,
                device=self.assignment.device,
                body=orjson.loads(body),
                acknowledgements=self.acks.sent,
                uploads=self.evidence.uploads,
            )
            if started is not None:
                await self.acks.flush()
            await self._report(body, record, release=not isinstance(conclusion, FinalReport))
        finally:
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
        record.renewals = renewer.renewals if renewer is not None else 0
        return record

    def _helper_ended(self, task: asyncio.Task) -> None:
        if not task.cancelled() and task.exception() is not None:
            # A bug of ours. Renewer: the lease is no longer renewed, and the Execution will
            # see it expire at the next step boundary at the latest. Acknowledger: what it had
            # not sent is lost, and the report goes out without waiting for it.
            log.error("%s: %s failed", self.label, task.get_name(), exc_info=task.exception())

    async def _start(self) -> float | None:
        """Acknowledge the start; the local time the granted request was sent, or None if not granted."""
        a, execution = self.assignment, self.execution
        delay = self.backoff[0]
        while True:
            sent = time.monotonic()
            try:
                data = await self.server.start(
                    a.task_id,
                    a.attempt,
                    a.lease_id,
                    deadline=self.clock.seconds_until(execution.lease_expires_at),
                    progress=execution.progress,
                )
                grant = parse_grant(data)
            except Rejected as error:
                if error.status in LEASE_REFUSALS:
                    log.warning("%s: start refused (%s): the lease is lost", self.label, error)
                    execution.lease_refused(error.code)
                    self.changed()
                    return None
                log.warning("%s: start refused (%s); trying again", self.label, error)
            except (Uncertain, ValueError, KeyError, TypeError) as error:
                log.warning("%s: start got no answer (%s); trying again", self.label, error)
            else:
                self.clock.observe(grant.lease_expires_at - a.lease_ms, sent)
                execution.lease_granted(
                    self.clock.now(), grant.lease_expires_at, grant.cancel_requested, grant.messages
                )
                self.changed()
                if grant.cancel_requested:
                    log.info("%s: cancellation requested before the first step", self.label)
                return sent
            execution.tick(self.clock.now())
            if execution.stop is not None:
                self.changed()
                return None
            pause = min(delay, max(0.0, self.clock.seconds_until(execution.lease_expires_at)))
            try:
                await asyncio.wait_for(self.stop_signal.wait(), pause)
            except TimeoutError:
                pass
            if execution.stop is not None:  # e.g. the host began to stop: no step will run
                return None
            delay = min(delay * 2, self.backoff[1])

    async def _report(self, body: bytes, record: AttemptRecord, release: bool) -> None:
        """Send the result (or the release) until a definite answer."""
        a = self.assignment
        send = self.server.release if release else self.server.report
        delay = self.backoff[0]
        while True:
            record.tries += 1
            try:
                await send(a.task_id, a.attempt, body)
            except Rejected as error:
                record.answer, record.code = error.status, error.code
                if error.status in LEASE_REFUSALS and release:
                    # What a release is for, giving the attempt back, has happened already (a
                    # session the server ended as the host stopped, say): nothing was lost.
                    log.info("%s: nothing to release: the attempt had already ended (%s)", self.label, error)
                elif error.status in LEASE_REFUSALS:
                    log.warning(
                        "%s: report %s refused (%s): the attempt is over for this host",
                        self.label,
                        record.status,
                        error,
                    )
                else:
                    log.error(
                        "%s: report %s refused (%s); not retrying an identical body", self.label, record.status, error
                    )
                return
            except Uncertain as error:
                log.warning(
                    "%s: report %s got no answer (%s); retrying in %.2g s", self.label, record.status, error, delay
                )
            else:
                record.answer = 200
                log.info("%s: %s", self.label, "released" if release else f"reported {record.status}")
                return
            await asyncio.sleep(delay * random.uniform(0.8, 1.2))  # jitter: hosts do not retry in step
            delay = min(delay * 2, self.backoff[1])
