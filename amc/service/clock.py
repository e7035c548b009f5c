"""The clocks a service stamps commands with: wall time that never goes back, or a manual
clock that moves only when told to."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> int:
        """Milliseconds since the epoch; never less than an earlier answer."""


class SystemClock:
    """Wall time, but never earlier than `floor` (the last time a store recorded)."""

    def __init__(self, floor: int = 0):
        self._last = floor

    def now(self) -> int:
        self._last = max(self._last, time.time_ns() // 1_000_000)
        return self._last


class ManualClock:
    """A clock that moves only when told to (tests, conformance runs)."""

    def __init__(self, start: int):
        self._now = start

    def now(self) -> int:
        return self._now

    def advance(self, ms: int) -> int:
        if ms <= 0:
            raise ValueError("a clock only moves forward")
        self._now += ms
        return self._now
