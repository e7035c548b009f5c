"""Keeping one attempt's lease alive, and telling its `Execution` what the renewals said.

Runs beside the step loop from the start answer until the report gets a definite answer
(LEASE-RENEW/s3: an agent that stopped keeps its lease while it reports). Every
`lease_seconds / 3` it renews (`Attempt.ask_lease`, the grant handler the start uses too);
each answer goes to the Execution, which decides:

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

from .attempt import Attempt

log = logging.getLogger("amc.agent.renewer")


class Renewer:
    """Renews one attempt's lease until cancelled or the lease is lost.

    Args:
        attempt: the attempt; its Execution is only touched from the event loop.
        last_grant: local monotonic time when the latest granted request (the start) was sent.
    """

    def __init__(self, attempt: Attempt, *, last_grant: float):
        self._attempt = attempt
        self.interval = attempt.assignment.lease_ms / 3000
        # After a failed renewal, try again a few times before the lease would run out.
        self.retry_delay = max(0.05, self.interval / 4)
        self._due = last_grant + self.interval
        self.renewals = 0

    async def run(self) -> None:
        attempt = self._attempt
        execution, clock = attempt.execution, attempt.clock
        while not attempt.lease_lost:
            wake = min(self._due - time.monotonic(), clock.seconds_until(execution.lease_expires_at))
            if wake > 0:
                await asyncio.sleep(wake)
            execution.tick(clock.now())
            if attempt.lease_lost:
                log.warning("%s: no renewal succeeded before the lease expired", attempt.label)
                attempt.changed()
                return
            if time.monotonic() < self._due:
                continue
            sent = await attempt.ask_lease("renew")
            if sent is None:  # refused (then the lease is over, and the loop ends) or no answer
                self._due = time.monotonic() + self.retry_delay
            else:
                self.renewals += 1
                self._due = sent + self.interval
