"""When a screen has settled: a watch fed with fingerprints of successive dumps.

The caller owns the clock and the device. It takes a dump, hands its fingerprint and the time
to `SettleWatch.sample`, and gets one of three verdicts:

- `Settled(fingerprint)`: one fingerprint has held long enough. With `quiet == 0` that is two
  consecutive samples agreeing; with `quiet > 0` it is samples of one fingerprint spanning at
  least `quiet` seconds (so at least two of them, the first and one `quiet` later).
- `Pending(sample_at)`: sample again at `sample_at` (one `interval` on, never past the deadline,
  so a caller that follows it is decided by `started_at + timeout`).
- `TimedOut(reason)`: the deadline came first.

A decided watch keeps its verdict: later samples return it again.

Times are floats in seconds from the caller's monotonic clock; they must not go backwards.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class Settled:
    """The screen held still; `fingerprint` is what it showed."""

    fingerprint: str


@attrs.frozen
class Pending:
    """Not decided yet: take the next sample at `sample_at`."""

    sample_at: float


@attrs.frozen
class TimedOut:
    """The deadline passed before the screen held still; `reason` says so in one sentence."""

    reason: str


Verdict = Settled | Pending | TimedOut


class SettleWatch:
    """Decides from (time, fingerprint) samples whether the screen has settled; see the module docstring."""

    def __init__(self, *, quiet: float, timeout: float, started_at: float, interval: float = 0.1) -> None:
        if quiet < 0 or timeout < 0 or interval <= 0:
            raise ValueError("quiet and timeout must be at least 0 and interval above 0")
        self.quiet = quiet
        self.timeout = timeout
        self.interval = interval
        self.deadline = started_at + timeout
        self._run: str | None = None  # the fingerprint of the latest samples ...
        self._run_since = 0.0  # ... held since this sample's time ...
        self._run_length = 0  # ... over this many samples
        self._last_at: float | None = None
        self._samples = 0
        self._changes = 0
        self._verdict: Settled | TimedOut | None = None

    def sample(self, at: float, fingerprint: str) -> Verdict:
        """The verdict after one more dump, taken at `at`, showing `fingerprint`.

        Raises:
            ValueError: `at` is earlier than the previous sample's.
        """
        if self._verdict is not None:
            return self._verdict
        if self._last_at is not None and at < self._last_at:
            raise ValueError(f"samples must come in time order: {at} is before {self._last_at}")
        self._last_at = at
        self._samples += 1
        if fingerprint == self._run:
            self._run_length += 1
        else:
            self._changes += self._run is not None
            self._run, self._run_since, self._run_length = fingerprint, at, 1
        if self._run_length >= 2 and at - self._run_since >= self.quiet:
            self._verdict = Settled(fingerprint)
            return self._verdict
        if at >= self.deadline:
            self._verdict = TimedOut(self._reason())
            return self._verdict
        return Pending(min(at + self.interval, self.deadline))

    def _reason(self) -> str:
        held = "no two dumps in a row agreed" if self.quiet == 0 else f"it never stayed unchanged for {self.quiet:g} s"
        changes = "once" if self._changes == 1 else f"{self._changes} times"
        dumps = "1 dump" if self._samples == 1 else f"{self._samples} dumps"
        return f"the screen did not settle within {self.timeout:g} s: {held} (it changed {changes} in {dumps})"
