"""The expiry timer: expire leases when they fall due, even when no request arrives.

Every command already expires what is due at its `now` (the kernel does it first), so the
timer only matters when the server is idle; without it an idle server would hold a lapsed
lease (and its device) until the next request. It sleeps until `service.next_expiry()`
and then executes `ExpireLeases`.

Re-arming is cheap on the hot path: a renewal only ever moves an expiry *later*, so after
a command the timer is woken only when the earliest expiry moved *earlier* than the one
it sleeps for (a new claim with a short lease). When the earliest expiry moves later, the
timer wakes at the old time, finds nothing due, and goes back to sleep: at most one
spurious wake per lease period.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from amc.core.commands import ExpireLeases
from amc.service import Service

log = logging.getLogger("amc.http.timer")

SLACK_SECONDS = 0.002  # sleep a little past the expiry: loop timers may fire early
# With no lease active the timer still looks again this often: a server that has just taken
# over a shared store (specs/design.md, PostgreSQL) has leases that no command of its own poked.
IDLE_RECHECK_SECONDS = 1.0


class ExpiryTimer:
    def __init__(self, service: Service, expire: Callable[[ExpireLeases], Awaitable[object]]):
        self._service = service
        self._expire = expire  # runs the command through the edge (metrics, wake-ups)
        self._wake = asyncio.Event()
        self._armed: int | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopped = False

    def poke(self) -> None:
        """A command may have changed the earliest expiry; wake the timer only if it moved earlier."""
        upcoming = self._service.next_expiry()
        if upcoming is not None and (self._armed is None or upcoming < self._armed):
            self._wake.set()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="amc-expiry-timer")

    async def stop(self) -> None:
        # The flag as well as the cancel: a cancel that lands as a wait times out can be lost
        # (asyncio.wait_for in Python 3.11), and then the loop must still end at its next turn.
        self._stopped = True
        self._wake.set()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    async def _run(self) -> None:
        while not self._stopped:
            try:
                await self._step()
            except asyncio.CancelledError:
                raise
            except Exception:  # a store error must not kill the timer for good
                log.exception("expiry timer failed; retrying in 1 s")
                await asyncio.sleep(1.0)

    async def _step(self) -> None:
        self._wake.clear()
        upcoming = self._armed = self._service.next_expiry()
        if upcoming is None:
            await self._sleep(IDLE_RECHECK_SECONDS)
            return
        delay = (upcoming - self._service.clock.now()) / 1000
        if delay <= 0:
            await self._expire(ExpireLeases(now=0))
            if self._service.next_expiry() == upcoming:
                await asyncio.sleep(0.01)  # nothing moved: never spin on a store that disagrees
            return
        await self._sleep(delay + SLACK_SECONDS)

    async def _sleep(self, seconds: float) -> None:
        """Until `seconds` pass or the timer is woken (`asyncio.timeout` never swallows a cancel)."""
        try:
            async with asyncio.timeout(seconds):
                await self._wake.wait()
        except TimeoutError:
            pass
