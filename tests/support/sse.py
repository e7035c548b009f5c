"""A reader of `GET /v1/events` for the tests: one streaming httpx connection over a real
socket, read in a thread into a list of events (`amc.cli.events.SseParser` parses them).
(`tests.support.http.Caller` reads whole bodies, which a stream never ends.)"""

from __future__ import annotations

import threading
from collections.abc import Callable

import httpx

from amc.cli.events import ServerEvent, SseParser, interrupt_read
from tests.adapters.http.contract import CONTRACT
from tests.support.waiting import eventually


class EventReader:
    """The events of one connection, as they arrive: ``reader.events``, ``reader.lines``.

    Opens at construction and returns once the response headers are in (the server has
    subscribed the reader by then); `response` is the streaming response.
    """

    def __init__(
        self,
        url: str,
        token: str | None,
        *,
        last_event_id: str | None = None,
        params: dict | None = None,
        read_timeout: float = 30.0,
    ):
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        if last_event_id is not None:
            headers["Last-Event-ID"] = last_event_id
        self._http = httpx.Client(base_url=url, timeout=httpx.Timeout(10.0, read=read_timeout))
        self._context = self._http.stream("GET", "/v1/events", headers=headers, params=params)
        self.response = self._context.__enter__()
        self.events: list[ServerEvent] = []
        self.lines: list[str] = []
        self.ended = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, daemon=True)
        # Checked against specs/openapi.yaml like every response of the tests: all of a refusal,
        # the status and content type of a stream (whose body never ends).
        status, content_type = self.response.status_code, self.response.headers.get("content-type", "")
        if status == 200:
            CONTRACT.check("GET", "/v1/events", status, content_type, b"")
            self._thread.start()
        else:
            CONTRACT.check("GET", "/v1/events", status, content_type, self.response.read())
            self.ended.set()

    def _read(self) -> None:
        parser = SseParser()
        try:
            for line in self.response.iter_lines():
                event = parser.feed(line)
                with self._lock:
                    self.lines.append(line)
                    if event is not None:
                        self.events.append(event)
        except (httpx.HTTPError, OSError, RuntimeError):
            pass
        finally:
            self.ended.set()

    # -- looking at what arrived ------------------------------------------------------------

    def snapshot(self) -> list[ServerEvent]:
        with self._lock:
            return list(self.events)

    def of_type(self, kind: str) -> list[ServerEvent]:
        return [e for e in self.snapshot() if e.type == kind]

    def tasks(self, task_id: str | None = None) -> list[dict]:
        """The task views received, in order (only `task_id`'s if given)."""
        views = [e.json() for e in self.of_type("task")]
        return [v for v in views if task_id is None or v["id"] == task_id]

    def hosts(self, host_id: str | None = None) -> list[dict]:
        views = [e.json() for e in self.of_type("host")]
        return [v for v in views if host_id is None or v["id"] == host_id]

    def wait_for(self, probe: Callable[[EventReader], object], timeout: float = 10.0, what: str = "") -> object:
        return eventually(lambda: probe(self), timeout, what=what or "an event")

    def wait_count(self, count: int, timeout: float = 10.0) -> list[ServerEvent]:
        self.wait_for(lambda r: len(r.snapshot()) >= count, timeout, what=f"{count} events")
        return self.snapshot()

    def close(self) -> None:
        interrupt_read(self.response)
        if self._thread.is_alive():
            self._thread.join(5.0)
        self._context.__exit__(None, None, None)
        self._http.close()

    def __enter__(self) -> EventReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def seq(event: ServerEvent) -> int:
    """The number of an event within its run (``<run>-<seq>``)."""
    assert event.id is not None
    return int(event.id.rpartition("-")[2])


def run_of(event: ServerEvent) -> str:
    assert event.id is not None
    return event.id.rpartition("-")[0]
