"""Sending an attempt's message acknowledgements to the control plane, in order, once each.

The `Execution` decides the acknowledgements (``admitted`` with the boundary, ``completed``,
``rejected`` with why) at step boundaries and when it computes the report; `Acknowledger`
takes them from it (`collect`) and posts them one at a time, in the order decided, because
the server accepts a message's states only in order (``admitted`` before ``completed``) and
admits steering edits in the order it receives them, which must be the order the host
applied them.

Like the result, each acknowledgement is sent with identical bytes until a definite answer:
no answer (a lost response, a 5xx) is retried with a backoff, and the server answers a
repeat with 200 and changes nothing. A refusal is final: a lease refusal means the attempt
is over for this host (the Execution is told, as for a refused renewal; the remaining
acknowledgements would be refused too and are dropped); any other refusal is logged.

`flush()` waits until every acknowledgement decided so far has its answer. The worker
calls it before it sends the result, because the server checks the result's steps against
the edits it recorded as admitted.
"""

from __future__ import annotations

import asyncio
import collections
import logging

import attrs

from amc.core.execution import Acknowledgement

from .attempt import LEASE_REFUSALS, Attempt
from .client import Rejected, Uncertain
from .wire import acknowledgement_body

log = logging.getLogger("amc.agent.acks")


@attrs.define
class Sent:
    """One acknowledgement and how the server answered it (for logs and tests)."""

    message_id: str
    state: str
    tries: int = 0
    answer: int | None = None  # the HTTP status that settled it; None: dropped unsent
    code: str | None = None  # the problem code of a refusal


class Acknowledger:
    """Posts one attempt's acknowledgements in order, each until it gets a definite answer.

    Args:
        attempt: the attempt; its Execution, where the acknowledgements are decided, is
            only touched from the event loop.
    """

    def __init__(self, attempt: Attempt):
        self._attempt = attempt
        self._queue: collections.deque[Acknowledgement] = collections.deque()
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self.sent: list[Sent] = []

    def collect(self) -> None:
        """Take what the Execution decided since the last call, and send it."""
        taken = self._attempt.execution.take_acknowledgements()
        if taken:
            self._queue.extend(taken)
            self._idle.clear()
            self._wake.set()

    async def flush(self) -> None:
        """Wait until every acknowledgement decided so far has a definite answer (or was dropped)."""
        self.collect()
        await self._idle.wait()

    async def run(self) -> None:
        """Send until cancelled."""
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                while self._queue:
                    await self._send(self._queue[0])
                    self._queue.popleft()
                self._idle.set()
        finally:
            self._idle.set()  # a sender that ended (cancelled, or a bug of ours) holds no report back

    async def _send(self, ack: Acknowledgement) -> None:
        attempt = self._attempt
        a, label = attempt.assignment, attempt.label
        record = Sent(message_id=ack.message_id, state=ack.state)
        self.sent.append(record)
        body = acknowledgement_body(a.lease_id, ack)
        delay = attempt.backoff[0]
        while not attempt.lease_lost:  # a lost lease refuses every acknowledgement: drop them
            record.tries += 1
            try:
                await attempt.channel.acknowledge(a.task_id, a.attempt, ack.message_id, body)
            except Rejected as error:
                record.answer, record.code = error.status, error.code
                if error.status in LEASE_REFUSALS and error.code.startswith("lease_"):
                    log.warning(
                        "%s: acknowledgement %s %s refused (%s): the lease is lost",
                        label,
                        ack.message_id,
                        ack.state,
                        error,
                    )
                    attempt.lease_refused(error.code)
                else:
                    log.error("%s: acknowledgement %s %s refused (%s)", label, ack.message_id, ack.state, error)
                return
            except Uncertain as error:
                log.warning(
                    "%s: acknowledgement %s %s got no answer (%s); retrying in %.2g s",
                    label,
                    ack.message_id,
                    ack.state,
                    error,
                    delay,
                )
            else:
                record.answer = 200
                log.info("%s: message %s %s%s", label, ack.message_id, ack.state, _where(ack))
                return
            delay = await attempt.retry_after(delay)


def _where(ack: Acknowledgement) -> str:
    if ack.boundary is None:
        return f" ({ack.detail})" if ack.detail else ""
    return f" before step {ack.boundary.before_step}" if ack.boundary.before_step else " after the last step"
