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
with the grant (`Attempt.ask_lease`, one handler for both), and the acknowledgements it decides go to the `Acknowledger`, which sends
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
import logging
from typing import Any

import attrs
import orjson

from amc.core.execution import FinalReport

from .acks import Acknowledger, Sent
from .attempt import LEASE_REFUSALS, Attempt
from .client import Rejected, Uncertain
from .evidence import Evidence, Upload
from .renewer import Renewer
from .runner import runner_for
from .wire import release_body, result_body

log = logging.getLogger("amc.agent.worker")


@attrs.define
class AttemptRecord:
    """What happened to one attempt, as this host saw it (for logs, tests and benchmarks)."""

    task_id: str
    attempt: int
    device: str
    body: dict[str, Any]  # the report (result or release) that was sent, decoded
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
    """Runs one claimed attempt on its device.

    Args:
        attempt: the attempt, as the host made it from the claim's answer.
        keep_artifacts: keep the attempt's files after they are uploaded (else the
            executor's directory is temporary and removed when the attempt ends).
    """

    def __init__(self, attempt: Attempt, *, keep_artifacts: bool = False):
        self.attempt = attempt
        self.acks = Acknowledger(attempt)
        self.evidence = Evidence(attempt, settled=self.acks.flush, keep=keep_artifacts)

    async def run(self) -> AttemptRecord:
        try:
            return await self._run()
        finally:
            self.attempt.executor.abandon_recording()  # torn down before its end: no chain outlives it
            self.evidence.close()  # whatever happened, no temporary file outlives the attempt

    async def _run(self) -> AttemptRecord:
        attempt = self.attempt
        a, execution, label = attempt.assignment, attempt.execution, attempt.label
        log.info("%s: assigned (%d step(s), lease %.3g s)", label, len(execution.outline), a.lease_ms / 1000)
        started = await self._start()
        renewer = None
        background = []
        if started is not None:
            renewer = Renewer(attempt, last_grant=started)
            background.append(asyncio.create_task(renewer.run(), name=f"renew {label}"))
            background.append(asyncio.create_task(self.acks.run(), name=f"acknowledge {label}"))
            for task in background:
                task.add_done_callback(self._helper_ended)
        try:
            runner = runner_for(a.plan)(attempt, evidence=self.evidence, on_boundary=self.acks.collect)
            await runner.run()
            conclusion = execution.conclusion()
            if isinstance(conclusion, FinalReport):
                body = result_body(a.lease_id, conclusion)
            else:
                log.info("%s: releasing the attempt (%s: %s)", label, conclusion.reason, conclusion.detail)
                body = release_body(a.lease_id, conclusion)
            record = AttemptRecord(
                task_id=a.task_id,
                attempt=a.attempt,
                device=a.device,
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

    def _helper_ended(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            # A bug of ours. Renewer: the lease is no longer renewed, and the Execution will
            # see it expire at the next step boundary at the latest. Acknowledger: what it had
            # not sent is lost, and the report goes out without waiting for it.
            log.error("%s: %s failed", self.attempt.label, task.get_name(), exc_info=task.exception())

    async def _start(self) -> float | None:
        """Acknowledge the start until it is granted (`Attempt.ask_lease`), refused, or a stop
        arrives: the local time the granted request was sent, or None if not granted."""
        attempt = self.attempt
        execution, clock = attempt.execution, attempt.clock
        delay = attempt.backoff[0]
        while True:
            sent = await attempt.ask_lease("start")
            if sent is not None:
                return sent
            execution.tick(clock.now())
            if execution.stop is not None:  # the start was refused for the lease, or the lease ran out
                attempt.changed()
                return None
            pause = min(delay, max(0.0, clock.seconds_until(execution.lease_expires_at)))
            try:
                await asyncio.wait_for(attempt.stop_signal.wait(), pause)
            except TimeoutError:
                pass
            if execution.stop is not None:  # e.g. the host began to stop: no step will run
                return None
            delay = min(delay * 2, attempt.backoff[1])

    async def _report(self, body: bytes, record: AttemptRecord, release: bool) -> None:
        """Send the result (or the release) until a definite answer."""
        attempt = self.attempt
        a, label = attempt.assignment, attempt.label
        send = attempt.channel.release if release else attempt.channel.report
        delay = attempt.backoff[0]
        while True:
            record.tries += 1
            try:
                await send(a.task_id, a.attempt, body)
            except Rejected as error:
                record.answer, record.code = error.status, error.code
                if error.status in LEASE_REFUSALS and release:
                    # What a release is for, giving the attempt back, has happened already (a
                    # session the server ended as the host stopped, say): nothing was lost.
                    log.info("%s: nothing to release: the attempt had already ended (%s)", label, error)
                elif error.status in LEASE_REFUSALS:
                    log.warning(
                        "%s: report %s refused (%s): the attempt is over for this host", label, record.status, error
                    )
                else:
                    log.error("%s: report %s refused (%s); not retrying an identical body", label, record.status, error)
                return
            except Uncertain as error:
                log.warning("%s: report %s got no answer (%s); retrying in %.2g s", label, record.status, error, delay)
            else:
                record.answer = 200
                log.info("%s: %s", label, "released" if release else f"reported {record.status}")
                return
            delay = await attempt.retry_after(delay)
