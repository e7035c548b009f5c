"""The simulated device log: a bounded ring of entries that actions append to, and the
line formats `logcat -v FORMAT` prints them in.

Entries carry the real clock (logcat lines are timestamps, not state), in UTC, which is the
simulated device's time zone. The ring keeps the newest `CAPACITY` entries, like the
device's fixed-size log buffers; each entry gets a sequence number so a following
`logcat` can print only what is new.
"""

from __future__ import annotations

import collections
import threading
import time

import attrs

CAPACITY = 2000
FORMATS = ("threadtime", "brief", "time", "tag", "process", "raw")
LEVELS = "VDIWEF"


@attrs.frozen(kw_only=True)
class LogEntry:
    seq: int
    time: float
    pid: int
    tid: int
    level: str  # one of LEVELS
    tag: str
    message: str
    buffer: str = "main"  # main or system

    def line(self, fmt: str = "threadtime") -> str:
        """The entry as logcat prints it in `fmt` (one of FORMATS), without the newline."""
        seconds = int(self.time)
        stamp = time.strftime("%m-%d %H:%M:%S", time.gmtime(seconds)) + f".{int((self.time - seconds) * 1000):03d}"
        if fmt == "threadtime":
            return f"{stamp} {self.pid:5d} {self.tid:5d} {self.level} {self.tag:<8}: {self.message}"
        if fmt == "brief":
            return f"{self.level}/{self.tag:<8}({self.pid:5d}): {self.message}"
        if fmt == "time":
            return f"{stamp} {self.level}/{self.tag:<8}({self.pid:5d}): {self.message}"
        if fmt == "tag":
            return f"{self.level}/{self.tag:<8}: {self.message}"
        if fmt == "process":
            return f"{self.level}({self.pid:5d}) {self.message}  ({self.tag})"
        if fmt == "raw":
            return self.message
        raise ValueError(f"unknown logcat format {fmt!r}")


class LogcatRing:
    """A thread-safe ring of the newest `capacity` log entries of one device."""

    def __init__(self, capacity: int = CAPACITY):
        self._lock = threading.Lock()
        self._entries: collections.deque[LogEntry] = collections.deque(maxlen=capacity)
        self._next_seq = 1

    def log(
        self, level: str, tag: str, message: str, *, pid: int, tid: int | None = None, buffer: str = "main"
    ) -> None:
        if level not in LEVELS:
            raise ValueError(f"unknown log level {level!r}")
        with self._lock:
            self._entries.append(
                LogEntry(
                    seq=self._next_seq,
                    time=time.time(),
                    pid=pid,
                    tid=tid or pid,
                    level=level,
                    tag=tag,
                    message=message,
                    buffer=buffer,
                )
            )
            self._next_seq += 1

    def entries(self, after: int = 0) -> list[LogEntry]:
        """The entries still in the ring whose seq is greater than `after`, oldest first."""
        with self._lock:
            return [entry for entry in self._entries if entry.seq > after]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def messages(self) -> list[str]:
        """Just the messages, oldest first (for tests and snapshots)."""
        return [entry.message for entry in self.entries()]
