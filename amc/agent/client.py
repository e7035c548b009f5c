"""The Host Agent's side of the wire: register, claim, start, renew, acknowledge messages,
upload artifacts, report and release (specs/protocol.md Parts A, B and C, and "Release: a
host gives an attempt back").

Every call ends in exactly one of three ways, because the agent's rules depend on which:

- a 2xx answer: the decoded JSON (None for 204);
- `Rejected`: a definite refusal (a 4xx problem, e.g. 409 `lease_expired`). Asking again
  with the same request would get the same answer;
- `Uncertain`: no definite answer (connection refused or cut, a timeout, a 5xx, 408 or
  429). The request may or may not have taken effect, so only requests that are safe to
  repeat (all of these are, with identical bodies) may be sent again.

A deadline (`asyncio.timeout`) bounds a whole call, not just one socket read, so a lease
renewal can be made to give up exactly when the lease would run out.

Given several server URLs, a call follows the leader (`amc.leader`): it goes on to
the next URL at once when a server refused the connection or answered 503 `not_leader` (the
request did nothing there), and ends `Uncertain` when the request may have been delivered
or no server answered as the leader. Every host request is safe to repeat with an identical
body, so the callers' retries (start, renew, acknowledge, report, release, register, claim)
then go to whichever URL is current: an attempt's renewals keep its lease id on the new
leader.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Literal

import httpx
import orjson

from amc.adapters.adb.discovery import DeviceInfo
from amc.agent.wire import lease_body
from amc.core.execution import RunProgress
from amc.leader import Endpoints, is_standby, never_sent, retry_after

log = logging.getLogger("amc.agent")

# Statuses that say "try again later" rather than "no".
_RETRYABLE_4XX = (408, 429)
# An upload's deadline grows with its size: the call's timeout plus the time to send the
# bytes at this rate, far below any link a host and its control plane share.
MIN_UPLOAD_BYTES_PER_SECOND = 1 << 20
UPLOAD_CHUNK_BYTES = 1 << 16


class Uncertain(Exception):
    """No definite answer arrived; the request may or may not have taken effect."""


class Rejected(Exception):
    """The server answered with a definite refusal (4xx)."""

    def __init__(self, status: int, code: str, detail: str):
        super().__init__(f"{status} {code}: {detail}")
        self.status = status
        self.code = code
        self.detail = detail


class ControlPlane:
    """An async client for one host's calls to the control plane.

    Args:
        server: the base URL, e.g. ``http://127.0.0.1:8000``, or several, comma-separated, of
            servers that share one store (the leader is followed among them).
        token: the host's bearer token; sent in a header, never logged.
        host_id: the host whose endpoints are called.
        timeout: the default deadline of one call, in seconds.
        transport: an httpx transport to use instead of a TCP one (tests).
    """

    def __init__(
        self,
        server: str,
        token: str,
        host_id: str,
        *,
        timeout: float = 10.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ):
        self.host_id = host_id
        self.timeout = timeout
        self.endpoints = Endpoints([server], on_change=_leader_changed)
        self._token = token
        self._shared_transport = transport  # tests: every channel goes through it
        # Built once for all channels: making one loads the system's CA certificates (tens of ms).
        self._tls = httpx.create_ssl_context()
        self._http = self._client()
        self._owns_client = True

    def _client(self) -> httpx.AsyncClient:
        # httpx writes headers and body in separate sends; with Nagle's algorithm on, the
        # body waits for the server's delayed ACK, adding ~40 ms to every request.
        transport = self._shared_transport or httpx.AsyncHTTPTransport(
            verify=self._tls,
            socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)],
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=16),
        )
        return httpx.AsyncClient(
            transport=transport,
            headers={"Authorization": f"Bearer {self._token}", "Content-Type": "application/json"},
            # The overall deadline is ours (asyncio.timeout); this only bounds each phase.
            timeout=httpx.Timeout(None),
        )

    def channel(self) -> ControlPlane:
        """A client for one device's calls: the same servers, the same knowledge of which one
        leads, connections of its own. httpx's pool looks through every connection it holds
        (a system call for each idle one) to place each request, so one pool holding a
        host's claims, session polls and reports for fifty devices spent more CPU than the
        requests; a pool per device holds a handful. Close it with `aclose`."""
        channel = copy.copy(self)
        if self._shared_transport is None:
            channel._http = self._client()
        else:
            channel._owns_client = False  # one client for all, closed by the host's
        return channel

    async def aclose(self) -> None:
        if self._owns_client:
            await self._http.aclose()

    # -- the host's endpoints ---------------------------------------------------------------

    async def find_leader(self) -> bool:
        """Ask the servers' health, once round, so that a new leader is known (and logged) as
        soon as it leads, not only when a long poll sent to it ends; True if one answered."""
        try:
            await self._call("GET", "/v1/health")
        except (Uncertain, Rejected):
            return False
        return True

    async def register(self, devices: list[DeviceInfo]) -> None:
        """Replace this host's inventory (PUT /v1/hosts/{host_id})."""
        body = {"devices": [{"serial": d.serial, "attributes": d.attributes} for d in devices]}
        await self._call("PUT", f"/v1/hosts/{self.host_id}", orjson.dumps(body))

    async def claim(self, serial: str, wait_seconds: float, lease_seconds: float | None) -> dict[str, Any] | None:
        """One long-polling claim for one device: the assignment, or None (204)."""
        body: dict[str, Any] = {"devices": [serial], "wait_seconds": wait_seconds, "sessions": True}
        if lease_seconds is not None:
            body["lease_seconds"] = lease_seconds
        assignment: dict[str, Any] | None = await self._call(
            "POST", f"/v1/hosts/{self.host_id}/claim", orjson.dumps(body), deadline=wait_seconds + self.timeout
        )
        return assignment

    async def lease(
        self,
        kind: Literal["start", "renew"],
        task_id: str,
        attempt: int,
        lease_id: str,
        *,
        deadline: float,
        progress: RunProgress | None = None,
    ) -> dict[str, Any]:
        """Start an attempt or renew its lease (POST .../start or .../renew): the grant."""
        grant: dict[str, Any] = await self._call(
            "POST", f"/v1/tasks/{task_id}/attempts/{attempt}/{kind}", lease_body(lease_id, progress), deadline=deadline
        )
        return grant

    async def acknowledge(self, task_id: str, attempt: int, message_id: str, body: bytes) -> None:
        """Acknowledge a message; `body` is sent byte for byte (a retry must be identical)."""
        await self._call("POST", f"/v1/tasks/{task_id}/attempts/{attempt}/messages/{message_id}", body)

    async def report(self, task_id: str, attempt: int, body: bytes) -> None:
        """Post a terminal report; `body` is sent byte for byte (a retry must be identical)."""
        await self._call("POST", f"/v1/tasks/{task_id}/attempts/{attempt}/result", body)

    async def release(self, task_id: str, attempt: int, body: bytes) -> None:
        """Give an attempt back (the host is stopping, or its device went away); `body` is
        sent byte for byte (a retry must be identical)."""
        await self._call("POST", f"/v1/tasks/{task_id}/attempts/{attempt}/release", body)

    async def poll_action(
        self, task_id: str, attempt: int, lease_id: str, wait_seconds: float, running: str | None = None
    ) -> dict[str, Any]:
        """Part D: the session's next action, or news (a cancel), waiting up to `wait_seconds`."""
        body: dict[str, Any] = {"lease_id": lease_id, "wait_seconds": wait_seconds}
        if running is not None:
            body["running"] = running
        answer: dict[str, Any] = await self._call(
            "POST",
            f"/v1/tasks/{task_id}/attempts/{attempt}/actions/next",
            orjson.dumps(body),
            deadline=wait_seconds + self.timeout,
        )
        return answer

    async def report_action(self, task_id: str, attempt: int, action_id: str, body: bytes) -> None:
        """Part D: an action's outcome; `body` is sent byte for byte (a retry must be identical)."""
        await self._call("POST", f"/v1/tasks/{task_id}/attempts/{attempt}/actions/{action_id}", body)

    async def upload(
        self, task_id: str, attempt: int, lease_id: str, step: str, name: str, path: Path, content_type: str
    ) -> tuple[int, dict[str, Any]]:
        """Store the file at `path` as artifact `name` of `step` (PUT .../artifacts/{name}):
        the status (201 stored, 200 stored before) and the artifact. The bytes are streamed
        from the file, so a retry sends the same bytes."""
        size = path.stat().st_size
        headers = {"Amc-Lease-Id": lease_id, "Content-Type": content_type, "Content-Length": str(size)}
        response = await self._send(
            "PUT",
            f"/v1/tasks/{task_id}/attempts/{attempt}/artifacts/{name}",
            lambda: _chunks(path),  # a stream is read once: a fresh one for each server tried
            params={"step": step},
            headers=headers,
            deadline=self.timeout + size / MIN_UPLOAD_BYTES_PER_SECOND,
        )
        artifact: dict[str, Any] = response.json()
        return response.status_code, artifact

    # -- plumbing ---------------------------------------------------------------------------

    async def _call(
        self, method: str, path: str, content: bytes | None = None, *, deadline: float | None = None
    ) -> Any:
        """The decoded JSON of the leader's 2xx answer (None for 204), or `Rejected` / `Uncertain`."""
        response = await self._send(method, path, lambda: content, deadline=deadline)
        if response.status_code == 204 or not response.content:
            return None
        return response.json()

    async def _send(
        self,
        method: str,
        path: str,
        content: Callable[[], bytes | AsyncIterator[bytes] | None],
        *,
        deadline: float | None = None,
        params: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        """The leader's 2xx answer, or `Rejected` / `Uncertain`; `content()` makes the body
        for each server tried."""
        sending: str | None = None  # the URL a request is out to, while it is
        try:
            async with asyncio.timeout(self.timeout if deadline is None else max(deadline, 0.001)):
                await asyncio.sleep(self.endpoints.wait_seconds())  # no leader lately: a shared pause
                pause_asked = None
                passed: list[str] = []  # why each URL was passed over, for the log
                for url in self.endpoints.round():
                    sending = url
                    try:
                        response = await self._http.request(
                            method, url + path, content=content(), params=params, headers=headers
                        )
                    except httpx.HTTPError as error:
                        if not never_sent(error):
                            raise  # perhaps delivered: below
                        sending = None
                        self.endpoints.passed_over(url)  # refused: the request did nothing there
                        passed.append(f"{url}: {type(error).__name__}: {error}")
                        continue
                    sending = None
                    if is_standby(response.status_code, response.content):
                        self.endpoints.passed_over(url)  # a standby did nothing either
                        passed.append(f"{url}: a standby")
                        pause_asked = max(pause_asked or 0.0, retry_after(response.headers.get("Retry-After")) or 0.0)
                        continue
                    self.endpoints.answered(url)
                    return _checked(method, path, response)
                if self.endpoints.lost_since is None and len(self.endpoints.urls) > 1:
                    log.warning("no server answers as the leader (%s); looking for it", "; ".join(passed))
                self.endpoints.no_leader(pause_asked)
                raise Uncertain(f"{method} {path}: no server answered as the leader ({'; '.join(passed)})")
        except TimeoutError:
            if sending is not None:
                self.endpoints.passed_over(sending)
            raise Uncertain(f"{method} {path}: no answer in time") from None
        except httpx.HTTPError as error:  # reset, cut, protocol errors: perhaps delivered
            if sending is not None:
                self.endpoints.passed_over(sending)
            raise Uncertain(f"{method} {path}: {type(error).__name__}: {error}") from None


def _leader_changed(old: str, new: str) -> None:
    # A change of leader is no outage (LEADER/s3): said once for the host, whose device
    # channels share one `Endpoints`.
    log.warning("leader changed from %s to %s", old, new)


def _checked(method: str, path: str, response: httpx.Response) -> httpx.Response:
    """The leader's answer if it is a 2xx, or the exception that says what it was."""
    status = response.status_code
    if status >= 500 or status in _RETRYABLE_4XX:
        raise Uncertain(f"{method} {path}: {status} {response.text[:200]}")
    if status >= 400:
        code, detail = _problem(response)
        raise Rejected(status, code, detail)
    return response


async def _chunks(path: Path) -> AsyncIterator[bytes]:
    """The file's bytes, read in a thread chunk by chunk (the loop keeps renewing leases)."""
    with open(path, "rb") as file:
        while chunk := await asyncio.to_thread(file.read, UPLOAD_CHUNK_BYTES):
            yield chunk


def _problem(response: httpx.Response) -> tuple[str, str]:
    """The `code` and `detail` of a problem response, or stand-ins when it is not one."""
    try:
        data = response.json()
    except ValueError:
        return "unknown", response.text[:200]
    if not isinstance(data, dict):
        return "unknown", response.text[:200]
    return str(data.get("code", "unknown")), str(data.get("detail", ""))
