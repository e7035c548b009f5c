"""Keeping one attempt's lease alive, and telling its `Execution` what the renewals said.

Runs beside the step loop from the start answer until the report gets a definite answer
(LEASE-RENEW/s3: an agent that stopped keeps its lease while it reports). Every
`lease_seconds / 3` it renews; each answer goes to the Execution, which decides:

- 200 -> `lease_granted` (a `cancel_requested: true` there is a stop request; the
  messages it carries wait in the Execution for the next step boundary);
- 409 (or 404) -> `lease_refused`: the lease is lost, and no later renewal can revive it;
- no answer -> try again sooner, and `tick` at the lease's expiry, which is lease loss.

A renewal request may not outlive the lease: its deadline is the time left before
`lease_expires_at` on the server's clock as estimated here (see `clock`), so an
unreachable server is noticed at the expiry, not when some socket timeout fires.

Once the Execution holds `lease_lost` there is nothing left to keep alive and the renewer
ends; that is the one rule here, and it follows from the protocol (an expired or replaced
lease is never revived), not from a choice about the attempt.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from amc.core.execution import Execution, StopReason

from .client import ControlPlane, Rejected, Uncertain
from .clock import ServerClock
from .wire import ClaimedAttempt, parse_grant

log = logging.getLogger("amc.agent.renewer")

# A refusal that ends the lease for good: every lease check is a 409; 404 is a task or
# attempt the server no longer knows (a store that was reset).
LEASE_REFUSALS = (404, 409)


class Renewer:
    """Renews one attempt's lease until cancelled or the lease is lost.

    Args:
        server: the control plane client.
        assignment: the attempt (task id, number, lease id, lease length).
        execution: the attempt's decisions; only touched from the event loop.
        clock: the server's clock as estimated for this attempt.
        changed: called after the Execution observed something (a stop may have arrived).
        last_grant: local monotonic time when the latest granted request (the start) was sent.
    """

    def __init__(
        self,
        server: ControlPlane,
        assignment: ClaimedAttempt,
        execution: Execution,
        clock: ServerClock,
        changed: Callable[[], None],
        *,
        last_grant: float,
    ):
        self._server = server
        self._assignment = assignment
        self._execution = execution
        self._clock = clock
        self._changed = changed
        self.interval = assignment.lease_ms / 3000
        # After a failed renewal, try again a few times before the lease would run out.
        self.retry_delay = max(0.05, self.interval / 4)
        self._due = last_grant + self.interval
        self.renewals = 0
        self._cancel_seen = False

    def _lease_lost(self) -> bool:
        return self._execution.stop is StopReason.lease_lost

    async def run(self) -> None:
        where = f"{self._assignment.task_id}/{self._assignment.attempt}"
        while not self._lease_lost():
            expiry = self._execution.lease_expires_at
            wake = min(self._due - time.monotonic(), self._clock.seconds_until(expiry))
            if wake > 0:
                await asyncio.sleep(wake)
            self._execution.tick(self._clock.now())
            if self._lease_lost():
                log.warning("%s: no renewal succeeded before the lease expired", where)
                self._changed()
                return
            if time.monotonic() < self._due:
                continue
            await self._renew(where)

    async def _renew(self, where: str) -> None:
        a = self._assignment
        sent = time.monotonic()
        try:
            data = await self._server.renew(
                a.task_id,
                a.attempt,
                a.lease_id,
                deadline=self._clock.seconds_until(self._execution.lease_expires_at),
                progress=self._execution.progress,
            )
            grant = parse_grant(data)
        except Rejected as error:
            if error.status in LEASE_REFUSALS:
                # An attempt that ended (a session the server ended, or a result that crossed
                # this renewal) is over, not lost: worth a warning only when it was taken away.
                level = logging.INFO if error.code == "lease_ended" else logging.WARNING
                log.log(level, "%s: renewal refused (%s): the lease is over", where, error)
                self._execution.lease_refused(error.code)
                self._changed()
                return
            log.warning("%s: renewal refused (%s); trying again", where, error)
            self._due = time.monotonic() + self.retry_delay
            return
        except (Uncertain, ValueError, KeyError, TypeError) as error:
            log.warning("%s: renewal got no answer (%s); trying again", where, error)
            self._due = time.monotonic() + self.retry_delay
            return
        self._clock.observe(grant.lease_expires_at - a.lease_ms, sent)
        self._execution.lease_granted(self._clock.now(), grant.lease_expires_at, grant.cancel_requested, grant.messages)
        self.renewals += 1
        if grant.cancel_requested and not self._cancel_seen:
            self._cancel_seen = True
            log.info("%s: cancellation requested", where)
        self._changed()
        self._due = sent + self.interval
