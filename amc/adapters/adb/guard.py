"""Wall-clock deadlines and interrupts for blocking ppadb calls.

ppadb has no deadlines: its host calls and `screencap()` block forever on a silent
server, and `shell(timeout=)` is only an idle timeout (specs/adb.md §1.6). Closing the
socket is the only way to stop a call, and it is also how a shell command is
interrupted (§7). So every action runs under a `Stopper`:

- `BoundedClient.create_connection` registers each ppadb connection it opens with the
  stopper that is current in this thread (a context variable);
- `trip(reason)` (from a deadline timer or from another thread's `interrupt()`) shuts
  down every registered socket, which wakes a blocked recv at once, and shuts down any
  connection opened later;
- the action, seeing `stopper.reason` set, raises the matching error instead of trusting
  whatever the interrupted ppadb call returned;
- when the action ends, every registered socket is closed, including those that ppadb
  leaks on its error paths.

`shutdown()` (not `close()`) is used across threads: it wakes the reader without racing
on the file descriptor, and ppadb's own `close()` then sends the RST.
"""

from __future__ import annotations

import contextlib
import contextvars
import socket
import threading
from collections.abc import Iterator

DEADLINE = "deadline"
INTERRUPT = "interrupt"

_current: contextvars.ContextVar[Stopper | None] = contextvars.ContextVar("amc_adb_stopper", default=None)


def current_stopper() -> Stopper | None:
    """The stopper of the action running in this thread, if any."""
    return _current.get()


class Stopper:
    """Cuts the connections of one action on interrupt or when its deadline passes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._tripped = threading.Event()
        self._timer: threading.Timer | None = None
        self.reason: str | None = None

    @property
    def tripped(self) -> bool:
        return self._tripped.is_set()

    def track(self, sock: socket.socket) -> None:
        """Register a connection's socket; a stopper that already tripped cuts it at once."""
        with self._lock:
            self._sockets.append(sock)
            tripped = self.tripped
        if tripped:
            _shutdown(sock)

    def trip(self, reason: str) -> None:
        """Stop the action now; the first reason is the one that counts."""
        with self._lock:
            if self.reason is None:
                self.reason = reason
            self._tripped.set()
            sockets = list(self._sockets)
        for sock in sockets:
            _shutdown(sock)

    def set_deadline(self, seconds: float | None) -> None:
        """Trip with DEADLINE after `seconds` of wall-clock time (None: no deadline)."""
        if seconds is None:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer = threading.Timer(max(0.0, seconds), self.trip, (DEADLINE,))
        self._timer.daemon = True
        self._timer.start()

    def wait(self, seconds: float) -> bool:
        """Sleep up to `seconds`; True if the stopper tripped meanwhile."""
        return self._tripped.wait(seconds)

    @contextlib.contextmanager
    def active(self) -> Iterator[Stopper]:
        """Make this the current stopper of the thread for the block; cancel the timer after."""
        token = _current.set(self)
        try:
            yield self
        finally:
            _current.reset(token)
            if self._timer is not None:
                self._timer.cancel()
            self._close_all()

    def _close_all(self) -> None:
        # ppadb leaves a connection open when a request FAILs or its read is cut short;
        # the action is over, so nothing else can be using these sockets.
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            sock.close()


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already closed by its owner
