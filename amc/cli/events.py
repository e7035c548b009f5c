"""Reading the server's event stream, `GET /v1/events` (specs/protocol.md Part E), from the CLI.

`SseParser` turns the lines of a ``text/event-stream`` into `ServerEvent`s, by the HTML
standard's rules (comments ignored, ``id:`` kept as the last event id, an event dispatched
at a blank line). `LiveEvents` keeps one stream open in a background thread: it hands every
event to a callback, and after a dropped connection it reconnects with ``Last-Event-ID``,
so the server either replays what was missed or sends ``reset`` ("read again").

No read waits for ever (BOUNDED/s1): the server sends a keep-alive comment after
`KEEPALIVE_SECONDS` without an event (or the interval its `Amc-Keep-Alive` header says), so
a connection silent for twice that long is dead (a leader that froze, a cut the kernel
never heard of) and is dropped by a watchdog beside the reading thread. A dropped
connection moves the reader to the next server of its list at once (a killed leader's
standby takes over there); only a whole round of servers without a stream waits before
the next round.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from amc.leader import Endpoints

if TYPE_CHECKING:
    import httpx

KEEPALIVE_SECONDS = 15.0  # the protocol's keep-alive interval (EVENTS/s6), unless the server says its own
KEEPALIVE_HEADER = "Amc-Keep-Alive"  # where a server says its interval, in seconds
# Twice the interval without a line (not even a keep-alive): the connection counts as dead (BOUNDED/s1).
SILENCE_FACTOR = 2.0
CONNECT_SECONDS = 5.0  # a connection not made in this long counts as refused
LIVED_SECONDS = 1.0  # a stream dropped after this long is reconnected at once; a shorter one waits
RETRY_SECONDS = (0.2, 0.5, 1.0, 2.0)  # the waits between rounds of reconnection, the last repeated


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
    """The events of the leader among some servers, read in a background thread, reconnecting
    (to the next server) when dropped.

    `start` connects in the background; `streams` turns True once a stream was open, and
    stays False on a server without one (a 404 on `/v1/events`: an older server, to be
    polled instead; the reader then ends). `open` is True while a stream is open now: a
    caller polls while it is not, since a stream being re-established tells it nothing.
    Every event goes to `on_event`, on the reader thread. A reconnection sends the last event
    id it saw; a connection opened without an id (the first one, or one after a drop that
    came before any event) begins with a reset made here, since what happened before it is
    not in the stream. A server of another run (the new leader) answers the id with a reset.

    Args:
        urls: the servers' base URLs, in the order to try them (`amc.leader.parse_urls`).
        token: a client or admin token.
        on_event: called with each `ServerEvent`.
        first: the URL to try first (the one that answered as the leader last).
    """

    def __init__(
        self, urls: Iterable[str], token: str, on_event: Callable[[ServerEvent], None], first: str | None = None
    ):
        import httpx

        self._on_event = on_event
        self._parser = SseParser()
        self._stopped = threading.Event()
        self._response: httpx.Response | None = None
        self._lock = threading.Lock()
        self.endpoints = Endpoints(urls)  # its own: the reader thread is the only one to touch it
        if first is not None and first in self.endpoints.urls:
            self.endpoints.answered(first)
        self.streams = False  # a server has an event stream
        self.open = False  # a stream is open now
        self.drops = 0  # connections dropped as silent (for tests and logs)
        self._silence = SILENCE_FACTOR * KEEPALIVE_SECONDS  # of the stream open now
        self._heard_at = time.monotonic()  # when its latest line arrived
        self._opened_at = 0.0  # when it opened
        # The watchdog drops a silent stream; this bounds the wait for the response's head.
        timeout = httpx.Timeout(CONNECT_SECONDS, read=SILENCE_FACTOR * KEEPALIVE_SECONDS)
        headers = {"Authorization": f"Bearer {token}", "Accept": "text/event-stream"}
        self._http = httpx.Client(timeout=timeout, headers=headers)
        self._thread = threading.Thread(target=self._run, name="amc-live-events", daemon=True)
        self._watchdog = threading.Thread(target=self._watch_silence, name="amc-live-silence", daemon=True)

    def start(self) -> LiveEvents:
        """Connect and read in the background (see `streams`)."""
        self._thread.start()
        self._watchdog.start()
        return self

    def _watch_silence(self) -> None:
        """Drop the open stream once it was silent for `_silence` seconds: the reading thread
        is blocked in a read that only a shutdown of its socket ends."""
        while not self._stopped.wait(min(1.0, self._silence / 4)):
            with self._lock:
                response = self._response if self.open else None
                silent = time.monotonic() - self._heard_at > self._silence
            if response is not None and silent:
                self.drops += 1
                interrupt_read(response)

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

        misses = 0  # connections in a row that opened no stream
        while not self._stopped.is_set():
            url = self.endpoints.current
            try:
                outcome = self._read_once(url)
            except (httpx.HTTPError, OSError, RuntimeError):
                outcome = "missed"  # down, cut, silent too long, or closed under us by `close`
            self.open = False
            if outcome == "absent" or self._stopped.is_set():
                return  # no stream there (404): the caller polls
            # Dropped or never opened: the next server at once (a standby may lead by now).
            # A stream that ended as soon as it opened counts as never opened.
            self.endpoints.passed_over(url)
            lived = outcome == "dropped" and time.monotonic() - self._opened_at > LIVED_SECONDS
            misses = 0 if lived else misses + 1
            if misses and misses % len(self.endpoints.urls) == 0:
                rounds = misses // len(self.endpoints.urls)
                self._stopped.wait(RETRY_SECONDS[min(rounds - 1, len(RETRY_SECONDS) - 1)])

    def _read_once(self, url: str) -> str:
        """One connection to `url`, read until it ends: "dropped" if a stream was open,
        "absent" if the server has none (404, and none was ever open), else "missed"."""
        import httpx

        headers = {} if self._parser.last_id is None else {"Last-Event-ID": self._parser.last_id}
        with self._http.stream("GET", url + "/v1/events", headers=headers) as response:
            if response.status_code == 404 and not self.streams:
                return "absent"  # an older server, before any stream: the reader ends
            if response.status_code != 200:  # a standby (503), or another refusal
                return "missed"
            with self._lock:
                if self._stopped.is_set():
                    return "missed"
                self._response = response
                self._silence = SILENCE_FACTOR * _interval(response.headers.get(KEEPALIVE_HEADER))
                self._heard_at = self._opened_at = time.monotonic()
            self.endpoints.answered(url)
            parser = SseParser()
            parser.last_id = self._parser.last_id
            self._parser = parser  # a half-read event of a dropped connection is not kept
            if parser.last_id is None:
                # Nothing to resume from: the server cannot tell what came before, so read
                # again, as a reset says.
                self._on_event(ServerEvent("reset", "{}", None))
            self.streams = self.open = True
            try:
                for line in response.iter_lines():
                    self._heard_at = time.monotonic()
                    event = parser.feed(line)
                    if event is not None:
                        self._on_event(event)
            except (httpx.HTTPError, OSError):
                pass  # cut or silent: a drop like an end
            finally:
                with self._lock:
                    self.open, self._response = False, None
            return "dropped"


def _interval(value: str | None) -> float:
    """The keep-alive interval a server said, in seconds; the protocol's when it said none
    (or nonsense)."""
    try:
        seconds = float(value) if value is not None else KEEPALIVE_SECONDS
    except ValueError:
        return KEEPALIVE_SECONDS
    return seconds if 0 < seconds <= 3600 else KEEPALIVE_SECONDS


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
