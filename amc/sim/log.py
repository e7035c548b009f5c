"""The per-device record of every command a simulated device received, in order.

Tests assert on it ("tapped at 540,1200, then typed ..."), so each entry keeps the exact
command string, when it started and ended, and how it ended:

- `running`: still going (or a silent orphan nobody killed yet);
- `completed`: it finished by itself (`exit_status` says how);
- `interrupted`: its stream was closed under it (SIGHUP on close, or SIGPIPE on its next
  write in the raw-shell model; `signal` says which), or the device disconnected;
- `killed`: `kill`/`pkill` from another shell call, or the simulator shutting down.

Entries are plain JSON so another process can read them through the `host:amc-sim-log`
service (see `smart_socket`).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import attrs

ENDS = ("running", "completed", "interrupted", "killed")


@attrs.frozen(kw_only=True)
class CommandRecord:
    """A snapshot of one command (a `shell:` call or one sync request) on one device."""

    seq: int
    serial: str
    service: str  # "shell" or "sync"
    command: str
    via: str  # "server" (smart-socket front end) or "adbd" (device protocol front end)
    pid: int | None
    started_at: float
    ended_at: float | None
    end: str
    exit_status: int | None
    signal: str | None
    output_bytes: int

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CommandRecord:
        return cls(**data)


class CommandLog:
    """A thread-safe, append-only list of command records for one device."""

    def __init__(self, serial: str):
        self._serial = serial
        self._lock = threading.Lock()
        self._entries: list[dict[str, Any]] = []

    def begin(self, *, service: str, command: str, via: str, pid: int | None = None) -> int:
        """Record that a command started; return its sequence number (1-based)."""
        with self._lock:
            seq = len(self._entries) + 1
            self._entries.append(
                {
                    "seq": seq,
                    "serial": self._serial,
                    "service": service,
                    "command": command,
                    "via": via,
                    "pid": pid,
                    "started_at": time.time(),
                    "ended_at": None,
                    "end": "running",
                    "exit_status": None,
                    "signal": None,
                    "output_bytes": 0,
                }
            )
            return seq

    def add_output(self, seq: int, count: int) -> None:
        with self._lock:
            self._entries[seq - 1]["output_bytes"] += count

    def finish(self, seq: int, *, end: str, exit_status: int | None = None, signal: str | None = None) -> None:
        """Record how a command ended. Only the first call counts: an end is final."""
        if end not in ENDS[1:]:
            raise ValueError(f"unknown end {end!r}")
        with self._lock:
            entry = self._entries[seq - 1]
            if entry["end"] != "running":
                return
            entry.update(end=end, exit_status=exit_status, signal=signal, ended_at=time.time())

    def records(self) -> list[CommandRecord]:
        with self._lock:
            return [CommandRecord(**entry) for entry in self._entries]
