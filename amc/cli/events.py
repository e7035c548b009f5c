"""Reading the server's event stream, `GET /v1/events` (specs/protocol.md Part E), from the CLI.

`SseParser` turns the lines of a ``text/event-stream`` into `ServerEvent`s, by the HTML
standard's rules (comments ignored, ``id:`` kept as the last event id, an event dispatched
at a blank line). `LiveEvents` keeps one stream open in a background thread: it hands every
event to a callback, and after a dropped connection it reconnects with ``Last-Event-ID``,
so the server either replays what was missed or sends ``reset`` ("read again").
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx

KEEPALIVE_SECONDS = 15.0  # the protocol's keep-alive interval
SILENCE_SECONDS = 3 * KEEPALIVE_SECONDS  # this long without a byte, a connection counts as dead
RETRY_SECONDS = (0.2, 0.5, 1.0, 2.0)  # the waits between reconnection attempts, the last repeated


@dataclass(frozen=True)
class ServerEvent:
    type: str  # "task", "host", "reset" (or "message" for an event without a type)
    data: str
    id: str | None  # the last event id when it was dispatched

    def json(self) -> Any:
        return json.loads(self.data)


class SseParser:
    """Server-sent events from the lines of a stream (without their line ends)."""

    def __init__(self) -> None:
        self.last_id: str | None = None
        self._type = ""
        self._data: list[str] = []

    def feed(self, line: str) -> ServerEvent | None:
        """The event a blank line completes, else None."""
        if not line:
            if not self._data:
                self._type = ""
                return None
            event = ServerEvent(self._type or "message", "\n".join(self._data), self.last_id)
            self._type, self._data = "", []
            return event
        if line.startswith(":"):
            return None  # a comment: the keep-alive
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            self._type = value
        elif name == "data":
            self._data.append(value)
        elif name == "id" and "\0" not in value:
            self.last_id = value
        return None


class LiveEvents:
    """The events of one server, read in a background thread, reconnecting when dropped.

    `start` connects in the background; `streams` turns True once the stream is open, and
    stays False on a server without one (a 404 on `/v1/events`: an older server, to be
    polled instead; the reader then ends). Every event goes to `on_event`, on the reader
    thread. A reconnection sends the last event id it saw; a connection opened without an
    id (the first one, or one after a drop that came before any event) begins with a reset
    made here, since what happened before it is not in the stream.

    Args:
        url: the server's base URL.
        token: a client or admin token.
        on_event: called with each `ServerEvent`.
    """

    def __init__(self, url: str, token: str, on_event: Callable[[ServerEvent], None]):
        import httpx

        self._on_event = on_event
        self._parser = SseParser()
        self._stopped = threading.Event()
        self._response: httpx.Response | None = None
        self._lock = threading.Lock()
        self.streams = False  # the server has an event stream
        timeout = httpx.Timeout(10.0, read=SILENCE_SECONDS)
        headers = {"Authorization": f"Bearer {token}", "Accept": "text/event-stream"}
        self._http = httpx.Client(base_url=url.rstrip("/"), timeout=timeout, headers=headers)
        self._thread = threading.Thread(target=self._run, name="amc-live-events", daemon=True)

    def start(self) -> LiveEvents:
        """Connect and read in the background (see `streams`)."""
        self._thread.start()
        return self

    def close(self) -> None:
        self._stopped.set()
        with self._lock:
            if self._response is not None:
                interrupt_read(self._response)
        self._thread.join(5.0)
        self._http.close()

    def __enter__(self) -> LiveEvents:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _run(self) -> None:
        import httpx

        failures = 0
        while not self._stopped.is_set():
            try:
                failures = 0 if self._read_once() else failures + 1
            except (httpx.HTTPError, OSError, RuntimeError):
                failures += 1  # down, cut, or closed under us by `close`
            if not self.streams or self._stopped.is_set():
                return
            self._stopped.wait(RETRY_SECONDS[min(failures, len(RETRY_SECONDS) - 1)])

    def _read_once(self) -> bool:
        """One connection, read until it ends; True if it was open."""
        headers = {} if self._parser.last_id is None else {"Last-Event-ID": self._parser.last_id}
        with self._http.stream("GET", "/v1/events", headers=headers) as response:
            if response.status_code != 200:  # before the first stream (a 404: none here), the reader ends
                return False
            with self._lock:
                if self._stopped.is_set():
                    return False
                self._response = response
            parser = SseParser()
            parser.last_id = self._parser.last_id
            self._parser = parser  # a half-read event of a dropped connection is not kept
            if parser.last_id is None:
                # Nothing to resume from: the server cannot tell what came before, so read
                # again, as a reset says.
                self._on_event(ServerEvent("reset", "{}", None))
            self.streams = True
            for line in response.iter_lines():
                event = parser.feed(line)
                if event is not None:
                    self._on_event(event)
            return True


def interrupt_read(response: httpx.Response) -> None:
    """End a read that another thread is blocked in: closing the response object does not
    wake a `recv` in progress, shutting the socket down does."""
    stream = response.extensions.get("network_stream")
    sock = None if stream is None else stream.get_extra_info("socket")
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # already closed
