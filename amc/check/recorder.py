"""The recording layer: an httpx transport that notes what a client asked and what it was told.

Wrap a client's transport in `RecordingTransport` (async) or `SyncRecordingTransport` and every
request of the kinds the checker reads (`kind_of`) appends one JSON line to a `HistoryFile`:

    {"client": "h3", "kind": "renew", "method": "POST", "path": "/v1/tasks/t1/attempts/2/renew",
     "request": {"lease_id": "..."}, "t0": 812.301, "t1": 812.309, "w0": 1764.., "w1": 1764..,
     "status": 200, "answer": {"lease_expires_at": "...", "status": "dispatched", ...}}

``t0``/``t1`` are the client's monotonic clock when the request was handed to the transport
and when its answer was in (its body read); ``w0``/``w1`` the wall clock at the same moments.
``status`` is None when no answer came (a refused or cut connection, a timeout): the request's
outcome is unknown, and ``error`` says why. The first line of a file is a header naming the
machine's boot (monotonic clocks compare across processes of one boot only).

Only the fields the checker reads are kept from bodies (`_KEPT`), so a line stays small. The
answer of a recorded request is read in full before the client sees it; they are small JSON
documents. Requests of other kinds (uploads, listings, health) pass through untouched.
"""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

# (method, path pattern) -> kind. The ids are path segments, never containing "/".
_KINDS: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("POST", re.compile(r"^/v1/hosts/(?P<host>[^/]+)/claim$"), "claim"),
    ("POST", re.compile(r"^/v1/tasks/(?P<task>[^/]+)/attempts/(?P<attempt>\d+)/start$"), "start"),
    ("POST", re.compile(r"^/v1/tasks/(?P<task>[^/]+)/attempts/(?P<attempt>\d+)/renew$"), "renew"),
    ("POST", re.compile(r"^/v1/tasks/(?P<task>[^/]+)/attempts/(?P<attempt>\d+)/result$"), "result"),
    ("POST", re.compile(r"^/v1/tasks/(?P<task>[^/]+)/attempts/(?P<attempt>\d+)/release$"), "release"),
    ("POST", re.compile(r"^/v1/tasks$"), "submit"),
    ("POST", re.compile(r"^/v1/tasks/(?P<task>[^/]+)/cancel$"), "cancel"),
    ("POST", re.compile(r"^/v1/tasks/(?P<task>[^/]+)/end$"), "end"),
    ("POST", re.compile(r"^/v1/tasks/(?P<task>[^/]+)/messages$"), "message"),
    ("GET", re.compile(r"^/v1/tasks/(?P<task>[^/]+)$"), "read"),
)
# The request and answer fields the checker reads; the rest of a body is dropped.
_KEPT_REQUEST = ("lease_id", "status", "devices", "idempotency_key")
_KEPT_ANSWER = (
    "id",
    "task_id",
    "attempt",
    "lease_id",
    "lease_expires_at",
    "lease_seconds",
    "device",
    "status",
    "tenant",
    "code",
)


def kind_of(method: str, path: str) -> tuple[str, dict[str, str]] | None:
    """The recorded kind of a request and the ids its path names, or None when it is not recorded."""
    for want, pattern, kind in _KINDS:
        if method == want and (found := pattern.match(path)):
            return kind, found.groupdict()
    return None


def boot_id() -> str:
    """This boot of this machine: monotonic clocks of two processes compare only within one."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return f"pid-{os.getpid()}"  # no shared monotonic clock known: the checker uses wall time


class HistoryFile:
    """An append-only file of JSON lines, shared by every client of one process (thread-safe).

    Each line is written whole with one `write` on an unbuffered file opened for appending, so
    lines of several processes appending to one file do not interleave either."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "ab", buffering=0)  # noqa: SIM115 (closed by close())
        self._lock = threading.Lock()
        self.append({"kind": "header", "boot": boot_id(), "pid": os.getpid()})

    def append(self, record: dict[str, Any]) -> None:
        line = orjson.dumps(record) + b"\n"
        with self._lock:
            self._file.write(line)

    def close(self) -> None:
        with self._lock:
            self._file.close()


class _Note:
    """One request under way: what it is and when it began."""

    def __init__(self, client: str, request: httpx.Request, kind: str, ids: dict[str, str]):
        self.record: dict[str, Any] = {
            "client": client,
            "kind": kind,
            "method": request.method,
            "path": request.url.path,
            **{key: value for key, value in ids.items() if value is not None},
            "request": _kept(request.content, _KEPT_REQUEST) if request.method == "POST" else {},
            "t0": time.monotonic(),
            "w0": time.time(),
        }

    def answered(self, response: httpx.Response) -> dict[str, Any]:
        body = response.content
        return self._ended(status=response.status_code, answer=_kept(body, _KEPT_ANSWER, attempts=True))

    def failed(self, error: BaseException) -> dict[str, Any]:
        return self._ended(status=None, error=f"{type(error).__name__}: {error}"[:300])

    def _ended(self, **fields: Any) -> dict[str, Any]:
        self.record.update(t1=time.monotonic(), w1=time.time(), **fields)
        return self.record


def _kept(body: bytes, fields: tuple[str, ...], attempts: bool = False) -> dict[str, Any]:
    """The named fields of a JSON object body (and, for a task, how many attempts it has)."""
    if not body or body[:1] != b"{":
        return {}
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return {}
    kept = {key: data[key] for key in fields if key in data}
    if attempts and isinstance(data.get("attempts"), list):
        kept["attempts"] = len(data["attempts"])
        kept["cancellation"] = data.get("cancellation") is not None
    return kept


class RecordingTransport(httpx.AsyncBaseTransport):
    """An async transport that records the requests the checker reads, then hands them on.

    Args:
        inner: the transport that sends them.
        history: the file the lines go to.
        client: who is asking (a host id, "client-3"); goes into every line.
    """

    def __init__(self, inner: httpx.AsyncBaseTransport, history: HistoryFile, client: str):
        self.inner = inner
        self.history = history
        self.client = client

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        known = kind_of(request.method, request.url.path)
        if known is None:
            return await self.inner.handle_async_request(request)
        note = _Note(self.client, request, *known)
        try:
            response = await self.inner.handle_async_request(request)
            await response.aread()
        except BaseException as error:  # a cancellation too: the request's outcome is unknown
            self.history.append(note.failed(error))
            raise
        self.history.append(note.answered(response))
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


class SyncRecordingTransport(httpx.BaseTransport):
    """`RecordingTransport` for a synchronous client."""

    def __init__(self, inner: httpx.BaseTransport, history: HistoryFile, client: str):
        self.inner = inner
        self.history = history
        self.client = client

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        known = kind_of(request.method, request.url.path)
        if known is None:
            return self.inner.handle_request(request)
        note = _Note(self.client, request, *known)
        try:
            response = self.inner.handle_request(request)
            response.read()
        except BaseException as error:
            self.history.append(note.failed(error))
            raise
        self.history.append(note.answered(response))
        return response

    def close(self) -> None:
        self.inner.close()
