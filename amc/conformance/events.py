"""Reading the optional event stream, `GET /v1/events` (specs/protocol.md Part E), for the
scenarios: one streaming connection read in a thread into a list of events.

Self-contained like the rest of the suite (it ships to implementers without amc's CLI): the
parser keeps to the HTML standard's rules for server-sent events.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx

T = TypeVar("T")


@dataclass(frozen=True)
class Event:
    type: str
    data: str
    id: str | None

    def json(self) -> Any:
        return json.loads(self.data)

    @property
    def seq(self) -> int:
        assert self.id is not None, f"an event without an id: {self}"
        return int(self.id.rpartition("-")[2])

    @property
    def run(self) -> str:
        assert self.id is not None, f"an event without an id: {self}"
        return self.id.rpartition("-")[0]


class EventStream:
    """One reader of the stream with `token`; `response` has its status and headers.

    A 404 means the target has no stream (the part is optional): `absent` is then True.
    """

    def __init__(
        self, base_url: str, token: str, last_event_id: str | None = None, params: dict[str, Any] | None = None
    ):
        headers = {"Authorization": f"Bearer {token}"}
        if last_event_id is not None:
            headers["Last-Event-ID"] = last_event_id
        self._http = httpx.Client(base_url=base_url, timeout=httpx.Timeout(10.0, read=60.0))
        self._context = self._http.stream("GET", "/v1/events", headers=headers, params=params)
        self.response = self._context.__enter__()
        self.events: list[Event] = []
        self.comments: list[str] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, daemon=True)
        if self.response.status_code == 200:
            self._thread.start()
        else:
            self.response.read()

    @property
    def absent(self) -> bool:
        return self.response.status_code == 404

    def _read(self) -> None:
        kind, last_id = "", None
        data: list[str] = []
        try:
            for line in self.response.iter_lines():
                if not line:
                    if data:
                        with self._lock:
                            self.events.append(Event(kind or "message", "\n".join(data), last_id))
                    kind, data = "", []
                    continue
                if line.startswith(":"):
                    with self._lock:
                        self.comments.append(line)
                    continue
                name, _, value = line.partition(":")
                value = value.removeprefix(" ")
                if name == "event":
                    kind = value
                elif name == "data":
                    data.append(value)
                elif name == "id" and "\0" not in value:
                    last_id = value
        except (httpx.HTTPError, OSError, RuntimeError):
            pass  # closed by `close`, or by the server

    def snapshot(self) -> list[Event]:
        with self._lock:
            return list(self.events)

    def tasks(self, *task_ids: str) -> list[dict[str, Any]]:
        """The task views received, in order, of `task_ids` only."""
        views = [e.json() for e in self.snapshot() if e.type == "task"]
        return [v for v in views if v["id"] in task_ids]

    def wait(self, probe: Callable[[EventStream], T], timeout: float = 10.0, what: str = "an event") -> T:
        """probe(self)'s first truthy value; fails after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            value = probe(self)
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} did not arrive within {timeout:g} s; received {self.snapshot()!r}"[:2000])
            time.sleep(0.02)

    def close(self) -> None:
        stream = self.response.extensions.get("network_stream")
        sock = None if stream is None else stream.get_extra_info("socket")
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)  # wakes the reading thread
            except OSError:
                pass
        if self._thread.is_alive():
            self._thread.join(5.0)
        self._context.__exit__(None, None, None)
        self._http.close()
