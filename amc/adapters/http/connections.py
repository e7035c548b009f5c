"""Guarding the server's connections against slow and abusive clients.

uvicorn bounds only the idle time between two requests of a connection (its keep-alive
timeout), and restarts even that clock at every byte received. A client that opens a
connection and says nothing, trickles its request head a byte at a time (slowloris), or
declares a body it never finishes sending, holds a connection and a file descriptor for as
long as it likes, and enough of them exhaust the server. So every connection here runs
under `GuardedProtocol`, uvicorn's httptools protocol with four bounds
(specs/protocol.md, "Slow and abusive clients"):

- the head of a request (request line and headers) must arrive within `header_timeout` of
  its first byte; a new connection must deliver its first request's head within
  `header_timeout` of opening;
- its body must arrive in full within `body_timeout` of the head;
- between two requests a connection may stay idle `keep_alive_timeout` (uvicorn's own);
- at most `max_connections` connections are open. At the cap, a new connection makes room
  by closing the connection that has been idle the longest (no request in progress: it
  never sent one, is still sending a head, or waits between two requests); when every
  connection has a request in progress, the new one is closed at once, unread.

Closing is all the server does: a timed-out or evicted connection gets no answer (a request
whose head or body never arrived was never read, so it changed nothing), and a handler
waiting for the body sees the client gone. A request being handled is never cut: a long
poll, or a slow store, holds its connection as long as it needs.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

import attrs
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


@attrs.frozen(kw_only=True)
class ConnectionLimits:
    """The bounds above (`amc serve` options); seconds, and a count of connections."""

    header_timeout: float = 10.0
    body_timeout: float = 60.0
    keep_alive_timeout: float = 30.0
    max_connections: int = 2048

    def __attrs_post_init__(self) -> None:
        if min(self.header_timeout, self.body_timeout, self.keep_alive_timeout) <= 0:
            raise ValueError("header-timeout, body-timeout and keep-alive-timeout must be more than 0 seconds")
        if self.max_connections < 1:
            raise ValueError("max-connections must be at least 1")


class ConnectionTable:
    """The open connections of one server, and which of them are idle, longest idle first."""

    def __init__(self, limits: ConnectionLimits):
        self.limits = limits
        self.open: set[GuardedProtocol] = set()
        self._idle: dict[GuardedProtocol, None] = {}  # insertion order: idle since longest first
        self.evicted = 0
        self.refused = 0
        self.timed_out = 0

    def admit(self, connection: GuardedProtocol) -> bool:
        """Take a new connection, closing the longest idle one at the cap; False: no room."""
        if len(self.open) >= self.limits.max_connections:
            if not self._idle:
                self.refused += 1
                return False
            oldest = next(iter(self._idle))
            self.forget(oldest)
            self.evicted += 1
            oldest.transport.abort()
        self.open.add(connection)
        self._idle[connection] = None
        return True

    def busy(self, connection: GuardedProtocol) -> None:
        self._idle.pop(connection, None)

    def idle(self, connection: GuardedProtocol) -> None:
        if connection in self.open:
            self._idle.pop(connection, None)
            self._idle[connection] = None  # to the end: idle since now

    def forget(self, connection: GuardedProtocol) -> None:
        self.open.discard(connection)
        self._idle.pop(connection, None)


class GuardedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the bounds of its server's `ConnectionTable`.

    Made per server by `guarded_protocol`, which sets `table`.
    """

    table: ClassVar[ConnectionTable]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._admitted = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if not self.table.admit(self):
            transport.abort()
            return
        self._admitted = True
        self._arm(self.table.limits.header_timeout)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self.table.forget(self)
        super().connection_lost(exc)

    # -- the phases of a request, as the parser and the cycle report them -----------------

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._deadline is None:  # the first byte of a request after an idle spell
            self._arm(self.table.limits.header_timeout)

    def on_headers_complete(self) -> None:
        self._disarm()
        self.table.busy(self)
        super().on_headers_complete()
        self._arm(self.table.limits.body_timeout)  # disarmed by the body's end, often at once

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()

    def on_response_complete(self) -> None:
        pipelined = bool(self.pipeline)  # uvicorn starts the next request at once: still busy
        super().on_response_complete()
        if self._admitted and not pipelined and not self.transport.is_closing():
            self.table.idle(self)  # uvicorn's keep-alive timeout runs from here

    # -- the deadline ------------------------------------------------------------------------

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        """The head or the body did not arrive in time: close the connection, unanswered."""
        self._deadline = None
        self.table.timed_out += 1
        self.transport.abort()  # a handler waiting for the body then sees the client gone


def guarded_protocol(limits: ConnectionLimits) -> type[GuardedProtocol]:
    """A protocol class for one server: its connections share one table."""
    return type("GuardedProtocol", (GuardedProtocol,), {"table": ConnectionTable(limits)})
