"""The one HTTP client the tests talk to a server through: one `Caller` per token.

Every request goes over a real socket, and every response is checked against
specs/openapi.yaml (`contract.CONTRACT`) before the test sees it. Helpers take
``expect=`` (a status) and return the decoded JSON, so a scenario reads as a script.
The HTTP, Host Agent and CLI tests all use it. (The conformance suite has a client of
its own, `amc.conformance.client`, because it ships to implementers without our tests.)
"""

from __future__ import annotations

import socket
from typing import Any

import httpx
import orjson

from tests.adapters.http.contract import CONTRACT
from tests.support.plans import PLAN
from tests.support.waiting import eventually

_UNSET = object()
TERMINAL = ("done", "failed", "cancelled")


def http_client(url: str) -> httpx.Client:
    # httpx writes a request's headers and body separately; with Nagle on, the body waits
    # for the server's delayed ACK (milliseconds per request).
    transport = httpx.HTTPTransport(socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
    return httpx.Client(base_url=url, timeout=40, transport=transport)


class Caller:
    def __init__(self, http: httpx.Client, token: str | None, name: str = ""):
        self.http = http
        self.token = token
        self.name = name
        self.last: httpx.Response | None = None

    def __repr__(self) -> str:
        return f"Caller({self.name})"

    # -- raw ------------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = _UNSET,
        content: bytes | None = None,
        params: dict | None = None,
        headers: dict | None = None,
        expect: int | None = None,
    ) -> httpx.Response:
        sent_headers = dict(headers or {})
        if self.token is not None:
            sent_headers.setdefault("Authorization", f"Bearer {self.token}")
        if json is not _UNSET:
            content = orjson.dumps(json)
            sent_headers.setdefault("Content-Type", "application/json")
        response = self.http.request(method, path, content=content, params=params, headers=sent_headers)
        self.last = response
        CONTRACT.check(
            method,
            response.request.url.path,
            response.status_code,
            response.headers.get("content-type", ""),
            response.content,
            content,
        )
        if expect is not None:
            assert response.status_code == expect, (
                f"{method} {path}: expected {expect}, got {response.status_code} {response.text[:500]}"
            )
        return response

    def call(self, method: str, path: str, body: Any = _UNSET, expect: int | None = 200, **kwargs) -> Any:
        response = self.request(method, path, json=body, expect=expect, **kwargs)
        if response.status_code == 204 or not response.content:
            return None
        return response.json()

    # -- tasks ----------------------------------------------------------------------------

    def submit(self, plan: dict | None = None, expect: int = 201, **fields) -> dict:
        return self.call("POST", "/v1/tasks", {"plan": plan or PLAN, **fields}, expect)

    def task(self, task_id: str, expect: int = 200) -> dict:
        return self.call("GET", f"/v1/tasks/{task_id}", expect=expect)

    def tasks(self, expect: int = 200, **params) -> dict:
        return self.call("GET", "/v1/tasks", expect=expect, params=params)

    def history(self, task_id: str, expect: int = 200) -> list[dict] | dict:
        data = self.call("GET", f"/v1/tasks/{task_id}/history", expect=expect)
        return data["events"] if expect == 200 else data

    def types(self, task_id: str) -> list[str]:
        return [e["type"] for e in self.history(task_id)]

    def status(self, task_id: str) -> str:
        return self.task(task_id)["status"]

    def wait_status(self, task_id: str, *statuses: str, timeout: float = 15.0) -> dict:
        """The task once its status is one of `statuses` (by default, any terminal one)."""
        statuses = statuses or TERMINAL
        return eventually(
            lambda: (task := self.task(task_id))["status"] in statuses and task,
            timeout,
            what=f"task {task_id} in {statuses}",
        )

    def cancel(self, task_id: str, reason: str | None = None, expect: int | None = None) -> dict:
        body = {} if reason is None else {"reason": reason}
        return self.call("POST", f"/v1/tasks/{task_id}/cancel", body, expect)

    # -- hosts ----------------------------------------------------------------------------

    def register(self, host_id: str, devices: list, expect: int = 200) -> dict:
        devices = [{"serial": d, "attributes": {}} if isinstance(d, str) else d for d in devices]
        return self.call("PUT", f"/v1/hosts/{host_id}", {"devices": devices}, expect)

    def host(self, host_id: str, expect: int = 200) -> dict:
        return self.call("GET", f"/v1/hosts/{host_id}", expect=expect)

    def hosts(self, expect: int = 200) -> dict:
        return self.call("GET", "/v1/hosts", expect=expect)

    def serials(self, host_id: str) -> list[str]:
        """The serials of the host's devices; none while the host is not registered."""
        host = self.host(host_id, expect=None)
        return [d["serial"] for d in host["devices"]] if self.last.status_code == 200 else []

    def claim(self, host_id: str, expect: int | None = 200, **body) -> dict | None:
        return self.call("POST", f"/v1/hosts/{host_id}/claim", body, expect)

    def start(self, task_id: str, attempt: int, lease_id: str, expect: int = 200) -> dict:
        return self.call("POST", f"/v1/tasks/{task_id}/attempts/{attempt}/start", {"lease_id": lease_id}, expect)

    def renew(self, task_id: str, attempt: int, lease_id: str, expect: int = 200) -> dict:
        return self.call("POST", f"/v1/tasks/{task_id}/attempts/{attempt}/renew", {"lease_id": lease_id}, expect)

    def report(self, task_id: str, attempt: int, lease_id: str, status: str, expect: int = 200, **extra) -> dict:
        body = {"lease_id": lease_id, "status": status, **extra}
        return self.call("POST", f"/v1/tasks/{task_id}/attempts/{attempt}/result", body, expect)

    # -- messages -------------------------------------------------------------------------

    def post_message(self, task_id: str, intent: str, expect: int = 201, **fields) -> dict:
        return self.call("POST", f"/v1/tasks/{task_id}/messages", {"intent": intent, **fields}, expect)

    def messages(self, task_id: str, expect: int = 200) -> list[dict] | dict:
        data = self.call("GET", f"/v1/tasks/{task_id}/messages", expect=expect)
        return data["messages"] if expect == 200 else data

    def message(self, task_id: str, message_id: str, expect: int = 200) -> dict:
        return self.call("GET", f"/v1/tasks/{task_id}/messages/{message_id}", expect=expect)

    def wait_message(self, task_id: str, message_id: str, *states: str, timeout: float = 15.0) -> dict:
        """The message once its state is one of `states`."""
        return eventually(
            lambda: (m := self.message(task_id, message_id))["state"] in states and m,
            timeout,
            what=f"message {message_id} in {states}",
        )

    def acknowledge(
        self, task_id: str, attempt: int, lease_id: str, message_id: str, state: str, expect: int = 200, **extra
    ) -> dict:
        body = {"lease_id": lease_id, "state": state, **extra}
        return self.call("POST", f"/v1/tasks/{task_id}/attempts/{attempt}/messages/{message_id}", body, expect)

    # -- admin ----------------------------------------------------------------------------

    # -- artifacts (Part C) ---------------------------------------------------------------

    def upload(
        self,
        task_id: str,
        attempt: int,
        lease_id: str | None,
        name: str,
        data: bytes,
        step: str | None = "open",
        content_type: str | None = "application/octet-stream",
        expect: int | None = 201,
    ) -> dict:
        headers = {} if lease_id is None else {"Amc-Lease-Id": lease_id}
        if content_type is not None:
            headers["Content-Type"] = content_type
        params = {} if step is None else {"step": step}
        path = f"/v1/tasks/{task_id}/attempts/{attempt}/artifacts/{name}"
        return self.request("PUT", path, content=data, params=params, headers=headers, expect=expect).json()

    def artifacts(self, task_id: str, expect: int = 200) -> list[dict] | dict:
        data = self.call("GET", f"/v1/tasks/{task_id}/artifacts", expect=expect)
        return data["artifacts"] if expect == 200 else data

    def download(self, task_id: str, artifact_id: str, expect: int = 200):
        """The response (its bytes in `.content`)."""
        return self.request("GET", f"/v1/tasks/{task_id}/artifacts/{artifact_id}", expect=expect)

    # -- sessions (Part D) ----------------------------------------------------------------

    def submit_session(self, idle_timeout_seconds: float | None = None, expect: int = 201, **fields) -> dict:
        session = {} if idle_timeout_seconds is None else {"idle_timeout_seconds": idle_timeout_seconds}
        return self.call("POST", "/v1/tasks", {"session": session, **fields}, expect)

    def act(self, task_id: str, action: dict, wait: float | None = None, expect: int = 201) -> dict:
        params = None if wait is None else {"wait_seconds": str(wait)}
        return self.call("POST", f"/v1/tasks/{task_id}/actions", action, expect, params=params)

    def actions(self, task_id: str, expect: int = 200) -> list[dict] | dict:
        data = self.call("GET", f"/v1/tasks/{task_id}/actions", expect=expect)
        return data["actions"] if expect == 200 else data

    def action(self, task_id: str, action_id: str, wait: float | None = None, expect: int = 200) -> dict:
        params = None if wait is None else {"wait_seconds": str(wait)}
        return self.call("GET", f"/v1/tasks/{task_id}/actions/{action_id}", expect=expect, params=params)

    def end(self, task_id: str, expect: int = 200) -> dict:
        return self.call("POST", f"/v1/tasks/{task_id}/end", expect=expect)

    def poll(self, task_id: str, attempt: int, lease_id: str, wait: float = 0, expect: int = 200) -> dict:
        body = {"lease_id": lease_id, "wait_seconds": wait}
        return self.call("POST", f"/v1/tasks/{task_id}/attempts/{attempt}/actions/next", body, expect)

    def report_action(
        self, task_id: str, attempt: int, lease_id: str, action_id: str, status: str, expect: int = 200, **extra
    ) -> dict:
        body = {"lease_id": lease_id, "status": status, **extra}
        return self.call("POST", f"/v1/tasks/{task_id}/attempts/{attempt}/actions/{action_id}", body, expect)

    def advance(self, seconds: float, expect: int = 200) -> dict:
        return self.call("POST", "/v1/admin/clock", {"advance_seconds": seconds}, expect)


def problem(caller: Caller) -> tuple[int, str]:
    """The status and code of the last response, which must be a problem document."""
    response = caller.last
    assert response.headers["content-type"].startswith("application/problem+json"), response.text
    body = response.json()
    assert body["type"] == f"urn:amc:problem:{body['code']}"
    return response.status_code, body["code"]


def hosts_as_recorded(document: dict) -> dict:
    """A `GET /v1/hosts` answer without the hosts' liveness (`last_seen_at`, `online`): what a
    refused request must leave as it was. Liveness is not a record: any request by a host
    token moves it, refused or not (specs/protocol.md, Host liveness)."""
    return {
        "hosts": [{k: v for k, v in host.items() if k not in ("last_seen_at", "online")} for host in document["hosts"]]
    }
