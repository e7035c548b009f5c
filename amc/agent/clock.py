"""The server's clock as seen from this host, without trusting this host's wall clock.

`amc.core.execution.Execution` works in server milliseconds (a lease expires at the server's
`lease_expires_at`), but the host's wall clock may be minutes off. Every start and renewal
answer tells us what the server's clock read when it handled the request: the new
`lease_expires_at` minus the lease length. The server handled it somewhere between our
send and our receive, so pairing that server time with the *send* time on our monotonic
clock over-estimates the server's clock by at most the round trip. Erring that way is the
safe side: the agent believes its lease ends a little before it really does, never after.

A claim is the exception: a long poll may wait up to 30 s before the server handles it,
so its server time is paired with the *receive* time (off by one network latency, in the
unsafe direction, for the instant until the start answer replaces it).

Readings never go backwards, so step times stay ordered when a newer anchor is tighter.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class ServerClock:
    """Estimates the server's time in ms from one (server time, local monotonic time) anchor."""

    def __init__(self, server_ms: int, at: float, monotonic: Callable[[], float] = time.monotonic):
        self._monotonic = monotonic
        self._server_ms = server_ms
        self._at = at
        self._last = server_ms

    def observe(self, server_ms: int, at: float) -> None:
        """The server's clock read `server_ms` at local monotonic time `at` (or later)."""
        self._server_ms, self._at = server_ms, at

    def now(self) -> int:
        estimate = self._server_ms + round((self._monotonic() - self._at) * 1000)
        self._last = max(self._last, estimate)
        return self._last

    def seconds_until(self, server_ms: int) -> float:
        """Local seconds from now until the server's clock reads `server_ms` (may be negative)."""
        return (server_ms - self.now()) / 1000
