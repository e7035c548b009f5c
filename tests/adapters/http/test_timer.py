"""The expiry timer stops when the server does, even when a cancel is lost on the way.

In Python 3.11, `asyncio.wait_for` can swallow a cancel that lands as its wait times out;
the timer then ran on and the server's shutdown waited for it for ever (seen in CI as a
lifespan that never ended). The timer's own stop flag ends its loop at the next turn.
"""

from __future__ import annotations

import asyncio

from amc.adapters.http.timer import ExpiryTimer
from amc.service import ManualClock, MemoryService


def test_the_timer_stops_even_when_its_cancel_is_swallowed():
    async def scenario() -> None:
        timer = ExpiryTimer(MemoryService(ManualClock(0)), lambda command: asyncio.sleep(0))
        sleep = timer._sleep
        swallowed = []

        async def sleep_that_loses_one_cancel(seconds: float) -> None:
            try:
                await sleep(0.05)
            except asyncio.CancelledError:
                if not swallowed:  # as wait_for may: the cancel is turned into a timeout
                    swallowed.append(True)
                    return
                raise

        timer._sleep = sleep_that_loses_one_cancel  # type: ignore[method-assign]
        timer.start()
        await asyncio.sleep(0.1)
        stopping = asyncio.ensure_future(timer.stop())
        done, _ = await asyncio.wait({stopping}, timeout=1)  # no second cancel to rescue it
        assert swallowed and stopping in done

    asyncio.run(scenario())
