"""A simulated device process: one `shell:` call, run in its own thread.

Commands never block in real time directly: they call `write()` and `sleep()`, the only
two places where the outside world can reach them. That is where signals land, which is
how the simulator models specs/adb.md §7:

- `kill()` (from `kill`/`pkill` in another shell call) raises `Killed` at the next
  checkpoint; a sleeping process wakes at once.
- `hangup()` (the client closed the stream, the host sent CLSE, or the link dropped)
  raises `Hangup("SIGHUP")` at once, unless the device keeps silent orphans: then the
  process keeps running and only its next `write()` raises `Hangup("SIGPIPE")`.
- `time_limit()` is what `timeout N cmd` uses: a sleep that crosses the limit raises
  `TimeLimitReached`, which only the matching `timeout` catches.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Protocol


class StreamClosed(Exception):
    """The output stream of a process is gone (raised by sinks, seen as SIGPIPE)."""


class Hangup(Exception):
    """The process lost its stream; args[0] is the signal that models it."""

    @property
    def signal(self) -> str:
        return str(self.args[0])


class Killed(Exception):
    """The process was signalled by kill/pkill or by the simulator shutting down."""

    @property
    def signal(self) -> str:
        return str(self.args[0])


class TimeLimitReached(Exception):
    """A `timeout` limit expired; args[0] identifies which one."""


class OutputSink(Protocol):
    """Where a process's (merged stdout+stderr) bytes go: a socket or an adbd stream."""

    def write(self, data: bytes) -> None:
        """Deliver `data`, or raise StreamClosed."""

    def close(self) -> None:
        """End the stream (EOF / CLSE). Idempotent."""


class SimProcess:
    """The state shared between a process's thread and the threads that signal it."""

    def __init__(self, pid: int, cmdline: str, sink: OutputSink, *, keep_silent_orphans: bool):
        self.pid = pid
        self.cmdline = cmdline
        self.sink = sink
        self.done = threading.Event()
        self._keep_silent_orphans = keep_silent_orphans
        self._cond = threading.Condition()
        self._pending: Exception | None = None
        self._stream_closed = False
        self._limits: list[tuple[float, object]] = []  # (monotonic deadline, token)
        self.bytes_written = 0

    # --- called from other threads -------------------------------------------------

    def kill(self, signal: str = "SIGTERM") -> None:
        with self._cond:
            if self._pending is None or isinstance(self._pending, Hangup):
                self._pending = Killed(signal)
            self._cond.notify_all()

    def hangup(self) -> None:
        """The stream was closed by the other side."""
        with self._cond:
            self._stream_closed = True
            if not self._keep_silent_orphans and self._pending is None:
                self._pending = Hangup("SIGHUP")
            self._cond.notify_all()

    # --- checkpoints, called from the process's own thread -------------------------

    def check(self) -> None:
        """Raise the pending signal, if any."""
        with self._cond:
            self._raise_pending()

    def write(self, data: bytes) -> None:
        if not data:
            return
        with self._cond:
            self._raise_pending()
            if self._stream_closed:
                self._pending = Hangup("SIGPIPE")
                self._raise_pending()
        try:
            self.sink.write(data)
        except StreamClosed:
            with self._cond:
                self._stream_closed = True
                if self._pending is None:
                    self._pending = Hangup("SIGPIPE")
                self._raise_pending()
        self.bytes_written += len(data)

    def sleep(self, seconds: float) -> None:
        end = time.monotonic() + max(0.0, seconds)
        with self._cond:
            while True:
                self._raise_pending()
                now = time.monotonic()
                limit = min(self._limits, default=None, key=lambda item: item[0])
                if limit is not None and limit[0] <= min(now, end):
                    raise TimeLimitReached(limit[1])
                if now >= end:
                    return
                wake = end if limit is None else min(end, limit[0])
                self._cond.wait(wake - now)

    @contextlib.contextmanager
    def time_limit(self, seconds: float) -> Iterator[object]:
        """Bound the sleeps inside the block; yields the token its TimeLimitReached carries."""
        token = object()
        entry = (time.monotonic() + seconds, token)
        with self._cond:
            self._limits.append(entry)
        try:
            yield token
        finally:
            with self._cond:
                self._limits.remove(entry)

    def _raise_pending(self) -> None:
        if self._pending is not None:
            pending = self._pending
            # A hangup is delivered once; a kill keeps firing so that nothing survives it.
            if isinstance(pending, Hangup):
                self._pending = None
            raise pending
