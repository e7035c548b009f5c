"""The control plane's HTTP API as the MCP tools need it, awaitable.

The requests themselves travel through a `Transport`, which the command line provides
(amc.cli.mcp builds it on the CLI's client, which follows the leader among several servers
and knows which requests are safe to send again). This module only names the routes of
specs/protocol.md Parts A to D and runs each blocking request in a worker thread, so that
one tool waiting for an action's outcome never holds up another.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

import anyio.to_thread

# A JSON object: a request's body or query parameters, or the server's answer, read by member name.
Json = dict[str, Any]

# Long polls (an action's outcome) wait on the server at most this long per request
# (specs/protocol.md Part D: wait_seconds is 0..30). The transport is told each request's
# wait, so that its client-side timeout is that wait plus its own margin (BOUNDED/s2): a
# long poll is never cut short, and no other request waits as long as one.
MAX_WAIT_SECONDS = 30.0


class ApiFailure(Exception):
    """A request that did not succeed. `status` is None when no server answered at all.

    `code` is the protocol's machine-readable code (`task_terminal`, `session_ended`, ...),
    or `unreachable`; `message` is one line for a person or a model.
    """

    def __init__(self, message: str, *, status: int | None = None, code: str = "unreachable"):
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code


class Transport(Protocol):
    """Blocking requests to the control plane, with a caller's token; both raise `ApiFailure`."""

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        params: Json | None = None,
        *,
        repeatable: bool | None = None,
        wait: float = 0.0,
    ) -> tuple[int, Any]:
        """The status and decoded JSON; `repeatable` (default: only a GET) says whether the
        request may be sent again after an answer was lost; `wait` is how long the server
        may hold it (a long poll), to be added to the request's timeout."""
        ...

    def read_bytes(self, path: str) -> tuple[str, bytes]:
        """A body that is not JSON (an artifact): its content type and bytes."""
        ...

    def upload_input(self, path: Path) -> tuple[Json, bool]:
        """Upload a local file as an input of the caller's tenant (Part F): the input, and
        whether it was new."""
        ...


def _segment(value: str) -> str:
    return quote(value, safe="")


def artifact_path(task_id: str, artifact_id: str) -> str:
    """The path of an artifact's bytes on the control plane (Part C), for a client to download."""
    return f"/v1/tasks/{_segment(task_id)}/artifacts/{_segment(artifact_id)}"


class Api:
    """The routes the tools use; every method returns the decoded answer or raises `ApiFailure`."""

    def __init__(self, transport: Transport):
        self._transport = transport

    async def _json(
        self,
        method: str,
        path: str,
        body: Any = None,
        params: Json | None = None,
        *,
        repeatable: bool | None = None,
        wait: float = 0.0,
    ) -> tuple[int, Json]:
        # Every route this module names answers a JSON object.
        call = functools.partial(self._transport.request, method, path, body, params, repeatable=repeatable, wait=wait)
        return await anyio.to_thread.run_sync(call)

    # -- Part A -----------------------------------------------------------------------

    async def hosts(self) -> list[Json]:
        hosts: list[Json] = (await self._json("GET", "/v1/hosts"))[1]["hosts"]
        return hosts

    async def submit(self, body: Json) -> Json:
        return (await self._json("POST", "/v1/tasks", body, repeatable=bool(body.get("idempotency_key"))))[1]

    async def task(self, task_id: str) -> Json:
        return (await self._json("GET", f"/v1/tasks/{_segment(task_id)}"))[1]

    async def cancel(self, task_id: str, reason: str | None) -> Json:
        body = {} if reason is None else {"reason": reason}
        # A cancel is idempotent (CANCEL-IDEMPOTENT): safe to send again after a lost answer.
        return (await self._json("POST", f"/v1/tasks/{_segment(task_id)}/cancel", body, repeatable=True))[1]

    # -- Part B -----------------------------------------------------------------------

    async def message(self, task_id: str, intent: str, text: str | None = None, data: Json | None = None) -> Json:
        body: Json = {"intent": intent}
        if text is not None:
            body["text"] = text
        if data is not None:
            body["data"] = data
        return (await self._json("POST", f"/v1/tasks/{_segment(task_id)}/messages", body))[1]

    # -- Part C -----------------------------------------------------------------------

    async def artifacts(self, task_id: str) -> list[Json]:
        artifacts: list[Json] = (await self._json("GET", f"/v1/tasks/{_segment(task_id)}/artifacts"))[1]["artifacts"]
        return artifacts

    async def artifact(self, task_id: str, artifact_id: str) -> tuple[str, bytes]:
        return await anyio.to_thread.run_sync(self._transport.read_bytes, artifact_path(task_id, artifact_id))

    # -- Part D -----------------------------------------------------------------------

    async def post_action(self, task_id: str, step: Json, wait_seconds: float) -> Json:
        """The action as it stands when it ended or `wait_seconds` passed. Posting the same id
        with the same body again only reads the action back, so a lost answer may be retried."""
        path = f"/v1/tasks/{_segment(task_id)}/actions"
        params = {"wait_seconds": _wait(wait_seconds)}
        return (await self._json("POST", path, step, params, repeatable=True, wait=float(_wait(wait_seconds))))[1]

    async def action(self, task_id: str, action_id: str, wait_seconds: float = 0) -> Json:
        path = f"/v1/tasks/{_segment(task_id)}/actions/{_segment(action_id)}"
        wait = _wait(wait_seconds)
        return (await self._json("GET", path, params={"wait_seconds": wait}, wait=float(wait)))[1]

    async def actions(self, task_id: str) -> list[Json]:
        actions: list[Json] = (await self._json("GET", f"/v1/tasks/{_segment(task_id)}/actions"))[1]["actions"]
        return actions

    # -- Part F -----------------------------------------------------------------------

    async def upload_input(self, path: Path) -> Json:
        """The input a local file is, uploaded (a repeat of known bytes is no new upload)."""
        return (await anyio.to_thread.run_sync(self._transport.upload_input, path))[0]

    async def end(self, task_id: str) -> Json:
        # Ending an ended session answers it as it stands and records nothing: repeatable.
        return (await self._json("POST", f"/v1/tasks/{_segment(task_id)}/end", {}, repeatable=True))[1]


def _wait(seconds: float) -> str:
    return f"{max(0.0, min(MAX_WAIT_SECONDS, seconds)):g}"
