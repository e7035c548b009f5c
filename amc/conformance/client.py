"""The only way the conformance scenarios reach a server: a small HTTP client.

Nothing here knows how a server is built; it speaks specs/protocol.md over real sockets and
nothing else, so the same scenarios run against any implementation. Every helper takes
``expect=``: a status (``200``, ``204``) or a status and a problem code
(``(409, "lease_foreign")``). A response that differs fails the test with the request and
the response in the message; a problem is checked for its shape (``application/problem+json``,
``type`` = ``urn:amc:problem:<code>``) as well. Helpers return the decoded JSON (None for a
204), so a scenario reads as a script::

    task = acme.submit_task(plan=PLAN, expect=201)
    lease = h1.claim()                                   # a `Lease`
    h1.start(lease)
    acme.cancel(task["id"], expect=202)
    assert h1.renew(lease)["cancel_requested"] is True
    h2.claim(expect=204)
"""

from __future__ import annotations

import datetime as _dt
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Union, overload

import httpx

PLAN: dict[str, Any] = {"steps": [{"id": "open", "action": "launch", "args": {"package": "com.android.settings"}}]}
PLAN_ABC: dict[str, Any] = {"steps": [{"id": s, "action": "wait", "args": {"seconds": 1}} for s in ("a", "b", "c")]}

RUN_ATTRIBUTE = "amc-conformance-run"  # the device attribute and requirement that keep a test's tasks its own

Expect = Union[int, tuple[int, str]]
_UNSET: Any = object()

# ---------------------------------------------------------------------------------------
# Time on the wire

WIRE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)


def ms(text: str) -> int:
    """A wire time (RFC 3339) as integer milliseconds since the epoch."""
    moment = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def wire(milliseconds: int) -> str:
    """Integer milliseconds as the wire form, ``2026-11-29T23:00:00.000Z``."""
    moment = _EPOCH + _dt.timedelta(milliseconds=milliseconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{milliseconds % 1000:03d}Z"


def _wire_times(value: Any, path: str = "") -> list[tuple[str, str]]:
    """Every (path, value) in a JSON document whose member name says it is a time."""
    found = []
    if isinstance(value, dict):
        for key, item in value.items():
            here = f"{path}.{key}" if path else key
            if isinstance(item, str) and (key.endswith("_at") or key == "now"):
                found.append((here, item))
            else:
                found.extend(_wire_times(item, here))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(_wire_times(item, f"{path}[{index}]"))
    return found


# ---------------------------------------------------------------------------------------
# Connections and callers


class Unexpected(AssertionError):
    """A response other than the one the scenario expects."""


class Connection:
    """One keep-alive HTTP connection pool to the target, shared by every caller of a run.

    It also watches every time on the wire: `bad_times` collects the ones that do not have
    the protocol's form (CLOCK/s1 checks that it stays empty).
    """

    def __init__(self, base_url: str, timeout: float = 45.0):
        self.base_url = base_url.rstrip("/")
        self.http = httpx.Client(base_url=self.base_url, timeout=timeout)
        self.bad_times: list[str] = []

    def close(self) -> None:
        self.http.close()

    def caller(self, token: str | None, name: str) -> Caller:
        return Caller(self, token, name)

    def health(self) -> bool:
        try:
            response = self.http.get("/v1/health", timeout=2.0)
        except httpx.HTTPError:
            return False
        return response.status_code == 200

    def note_times(self, method: str, path: str, document: Any) -> None:
        for where, text in _wire_times(document):
            if not WIRE_TIME.match(text):
                self.bad_times.append(f"{method} {path}: {where} = {text!r}")

    def observe(self, observer: Callable[[httpx.Request, httpx.Response], None]) -> None:
        """Call `observer` with every request of this connection and its response, body read.

        For checks that look at the whole wire rather than one scenario (an OpenAPI document's
        validation, see `amc.conformance.openapi_check`). The observer must not raise: it runs
        inside the request, before the scenario sees the answer.
        """

        def hook(response: httpx.Response) -> None:
            response.read()
            observer(response.request, response)

        self.http.event_hooks["response"].append(hook)


class Caller:
    """Requests made with one token (a client, a host or the admin)."""

    def __init__(self, connection: Connection, token: str | None, name: str):
        self.connection = connection
        self.token = token
        self.name = name
        self.tenant: str | None = None  # a client's tenant, when the suite knows it
        self.created: list[str] = []  # ids of the tasks this caller's submits created
        self.last: httpx.Response | None = None

    def __repr__(self) -> str:
        return f"<{self.name}>"

    # -- raw --------------------------------------------------------------------------

    def send(
        self,
        method: str,
        path: str,
        body: Any = _UNSET,
        *,
        content: bytes | None = None,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> httpx.Response:
        """One request, unchecked."""
        sent = dict(headers or {})
        if self.token is not None:
            sent.setdefault("Authorization", f"Bearer {self.token}")
        if body is not _UNSET:
            content = json.dumps(body, allow_nan=False).encode()
            sent.setdefault("Content-Type", "application/json")
        extra: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
        response = self.connection.http.request(method, path, content=content, params=params, headers=sent, **extra)
        self.last = response
        return response

    def call(self, method: str, path: str, body: Any = _UNSET, *, expect: Expect = 200, **options: Any) -> Any:
        """One request whose answer must be `expect`; the decoded JSON (None for no body)."""
        response = self.send(method, path, body, **options)
        status, code = (expect, None) if isinstance(expect, int) else expect
        document = _decode(response)
        self.connection.note_times(method, path, document)
        if response.status_code != status or (code is not None and _code(document) != code):
            wanted = f"{status} {code}" if code else f"{status}"
            sent = "" if body is _UNSET else f" {json.dumps(body)[:300]}"
            raise Unexpected(
                f"{self.name}: {method} {path}{sent}\n  expected {wanted}, got {response.status_code} "
                f"{response.text[:600]}"
            )
        if status >= 400:
            check_problem(response, status, code)
        elif status != 204:
            kind = response.headers.get("content-type", "")
            assert kind.startswith("application/json"), f"{method} {path}: content-type {kind!r}"
        return document

    # -- tasks ------------------------------------------------------------------------

    def submit_task(self, plan: dict[str, Any] | None = None, *, expect: Expect = 201, **fields: Any) -> dict[str, Any]:
        body = {"plan": PLAN if plan is None else plan, **fields}
        task: dict[str, Any] = self.call("POST", "/v1/tasks", body, expect=expect)
        if expect == 201:
            self.created.append(task["id"])
        return task

    def get_task(self, task_id: str, *, expect: Expect = 200) -> dict[str, Any]:
        task: dict[str, Any] = self.call("GET", f"/v1/tasks/{task_id}", expect=expect)
        return task

    def list_tasks(self, *, expect: Expect = 200, **params: Any) -> dict[str, Any]:
        page: dict[str, Any] = self.call("GET", "/v1/tasks", params=params, expect=expect)
        return page

    def all_tasks(self, status: str | None = None) -> list[dict[str, Any]]:
        """Every task this caller may list (following `next`), optionally of one status."""
        tasks: list[dict[str, Any]] = []
        after: str | None = None
        while True:
            params: dict[str, Any] = {"limit": 1000}
            if status is not None:
                params["status"] = status
            if after is not None:
                params["after"] = after
            page = self.list_tasks(**params)
            tasks.extend(page["tasks"])
            after = page["next"]
            if after is None:
                return tasks

    def history(self, task_id: str, *, expect: Expect = 200) -> Any:
        """The task's events (a 200), else the problem document."""
        document = self.call("GET", f"/v1/tasks/{task_id}/history", expect=expect)
        return document["events"] if expect == 200 else document

    def event_types(self, task_id: str) -> list[str]:
        return [event["type"] for event in self.history(task_id)]

    def cancel(
        self, task_id: str, reason: str | None = None, *, expect: Expect = 200, body: Any = _UNSET
    ) -> dict[str, Any]:
        if body is _UNSET:
            body = {} if reason is None else {"reason": reason}
        answer: dict[str, Any] = self.call("POST", f"/v1/tasks/{task_id}/cancel", body, expect=expect)
        return answer

    # -- hosts ------------------------------------------------------------------------

    def register(self, host_id: str, devices: list[Any], *, expect: Expect = 200) -> dict[str, Any]:
        """Replace `host_id`'s inventory; a device is a serial or ``{"serial", "attributes"}``."""
        listed = [{"serial": d, "attributes": {}} if isinstance(d, str) else d for d in devices]
        host: dict[str, Any] = self.call("PUT", f"/v1/hosts/{host_id}", {"devices": listed}, expect=expect)
        return host

    def get_host(self, host_id: str, *, expect: Expect = 200) -> dict[str, Any]:
        host: dict[str, Any] = self.call("GET", f"/v1/hosts/{host_id}", expect=expect)
        return host

    def list_hosts(self, *, expect: Expect = 200) -> dict[str, Any]:
        hosts: dict[str, Any] = self.call("GET", "/v1/hosts", expect=expect)
        return hosts

    def claim(self, host_id: str, *, expect: Expect = 200, timeout: float | None = None, **body: Any) -> Any:
        return self.call("POST", f"/v1/hosts/{host_id}/claim", body, expect=expect, timeout=timeout)

    def start(self, task_id: str, attempt: int, lease_id: Any, *, expect: Expect = 200, **extra: Any) -> dict[str, Any]:
        body = {**_lease_body(lease_id), **extra}
        answer: dict[str, Any] = self.call("POST", f"/v1/tasks/{task_id}/attempts/{attempt}/start", body, expect=expect)
        return answer

    def renew(self, task_id: str, attempt: int, lease_id: Any, *, expect: Expect = 200, **extra: Any) -> dict[str, Any]:
        body = {**_lease_body(lease_id), **extra}
        answer: dict[str, Any] = self.call("POST", f"/v1/tasks/{task_id}/attempts/{attempt}/renew", body, expect=expect)
        return answer

    def report(
        self,
        task_id: str,
        attempt: int,
        lease_id: str,
        status: str,
        *,
        expect: Expect = 200,
        metadata: Any = _UNSET,
        steps: Any = _UNSET,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"lease_id": lease_id, "status": status}
        if metadata is not _UNSET:
            body["metadata"] = metadata
        if steps is not _UNSET:
            body["steps"] = steps
        answer: dict[str, Any] = self.call(
            "POST", f"/v1/tasks/{task_id}/attempts/{attempt}/result", body, expect=expect
        )
        return answer

    def release(
        self,
        task_id: str,
        attempt: int,
        lease_id: str,
        *,
        expect: Expect = 200,
        reason: Any = _UNSET,
        steps: Any = _UNSET,
    ) -> dict[str, Any]:
        """v1.1: give the attempt back (specs/protocol.md "Release: a host gives an attempt back")."""
        body: dict[str, Any] = {"lease_id": lease_id}
        if reason is not _UNSET:
            body["reason"] = reason
        if steps is not _UNSET:
            body["steps"] = steps
        answer: dict[str, Any] = self.call(
            "POST", f"/v1/tasks/{task_id}/attempts/{attempt}/release", body, expect=expect
        )
        return answer

    # -- messages (Part B) --------------------------------------------------------------

    def post_message(
        self,
        task_id: str,
        intent: str | None = None,
        *,
        text: Any = _UNSET,
        data: Any = _UNSET,
        expect: Expect = 201,
        body: Any = _UNSET,
    ) -> dict[str, Any]:
        """Send an intent to a task; `body` replaces the one built from the arguments."""
        if body is _UNSET:
            body = {"intent": intent}
            if text is not _UNSET:
                body["text"] = text
            if data is not _UNSET:
                body["data"] = data
        message: dict[str, Any] = self.call("POST", f"/v1/tasks/{task_id}/messages", body, expect=expect)
        return message

    def messages(self, task_id: str, *, expect: Expect = 200) -> Any:
        """The task's messages (a 200), else the problem document."""
        document = self.call("GET", f"/v1/tasks/{task_id}/messages", expect=expect)
        return document["messages"] if expect == 200 else document

    def get_message(self, task_id: str, message_id: str, *, expect: Expect = 200) -> Any:
        """One message as the task's message list shows it (the protocol lists a task's
        messages; it has no endpoint for a single one). `expect` is the listing's answer."""
        listed = self.messages(task_id, expect=expect)
        if expect != 200:
            return listed
        found = [message for message in listed if message["id"] == message_id]
        assert found, f"{self.name}: the messages of {task_id} hold no {message_id}: {ids(listed)}"
        return found[0]

    def acknowledge(
        self,
        task_id: str,
        attempt: int,
        message_id: str,
        lease_id: Any,
        state: str,
        *,
        expect: Expect = 200,
        **body: Any,
    ) -> dict[str, Any]:
        """The host's acknowledgement of a message; `body` adds `boundary` and `detail`."""
        sent = {**_lease_body(lease_id), "state": state, **body}
        answer: dict[str, Any] = self.call(
            "POST", f"/v1/tasks/{task_id}/attempts/{attempt}/messages/{message_id}", sent, expect=expect
        )
        return answer

    # -- admin ------------------------------------------------------------------------

    def advance_clock(self, seconds: float, *, expect: Expect = 200) -> dict[str, Any]:
        answer: dict[str, Any] = self.call("POST", "/v1/admin/clock", {"advance_seconds": seconds}, expect=expect)
        return answer


# ---------------------------------------------------------------------------------------
# Artifacts (Part C)


def upload_artifact(
    caller: Caller,
    lease: Lease,
    name: str,
    data: bytes,
    *,
    step: str | None,
    content_type: str | None = "application/octet-stream",
    lease_id: Any = _UNSET,
    attempt: int | None = None,
    expect: Expect = 201,
) -> Any:
    """PUT the bytes of an artifact of `lease`'s attempt (the lease in `Amc-Lease-Id`)."""
    headers: dict[str, str] = {}
    sent_lease = lease.lease_id if lease_id is _UNSET else lease_id
    if sent_lease is not None:
        headers["Amc-Lease-Id"] = sent_lease
    if content_type is not None:
        headers["Content-Type"] = content_type
    params = {} if step is None else {"step": step}
    path = f"/v1/tasks/{lease.task_id}/attempts/{attempt or lease.attempt}/artifacts/{name}"
    return caller.call("PUT", path, content=data, params=params, headers=headers, expect=expect)


def list_artifacts(caller: Caller, task_id: str, *, expect: Expect = 200) -> Any:
    answer = caller.call("GET", f"/v1/tasks/{task_id}/artifacts", expect=expect)
    return answer["artifacts"] if expect == 200 else answer


def download_artifact(caller: Caller, task_id: str, artifact_id: str) -> httpx.Response:
    """The bytes of an artifact (a 200, checked to carry its Content-Length and ETag)."""
    response = caller.send("GET", f"/v1/tasks/{task_id}/artifacts/{artifact_id}")
    assert response.status_code == 200, (
        f"{caller.name}: download {artifact_id}: {response.status_code} {response.text[:300]}"
    )
    assert response.headers.get("content-length") == str(len(response.content)), response.headers
    return response


def _lease_body(lease_id: Any) -> dict[str, Any]:
    return {} if lease_id is None else {"lease_id": lease_id}


def _decode(response: httpx.Response) -> Any:
    if response.status_code == 204 or not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        return {"_not_json": response.text[:300]}


def _code(document: Any) -> str | None:
    return document.get("code") if isinstance(document, dict) else None


def check_problem(response: httpx.Response, status: int, code: str | None) -> dict[str, Any]:
    """The problem document of `response`, checked for the shape specs/protocol.md gives it."""
    kind = response.headers.get("content-type", "")
    assert kind.startswith("application/problem+json"), f"a {status} must be application/problem+json, got {kind!r}"
    problem: dict[str, Any] = response.json()
    for member in ("type", "title", "status", "detail", "code"):
        assert member in problem, f"problem without {member!r}: {problem}"
    assert problem["status"] == status, problem
    assert problem["type"] == f"urn:amc:problem:{problem['code']}", problem
    if code is not None:
        assert problem["code"] == code, problem
    return problem


# ---------------------------------------------------------------------------------------
# The host side: the test plays the Host Agent


@dataclass
class Lease:
    """An assignment as the host holds it: what start, renew and result name."""

    task_id: str
    attempt: int
    lease_id: str
    device: str
    lease_seconds: float
    lease_expires_at: str
    cancel_requested: bool
    granted: float = field(default_factory=time.monotonic)  # local time of the response

    @property
    def expires_ms(self) -> int:
        return ms(self.lease_expires_at)

    def extended(self, answer: dict[str, Any]) -> None:
        self.lease_expires_at = answer["lease_expires_at"]
        self.granted = time.monotonic()


class Host:
    """A host token used the way a Host Agent uses it: register, claim, start, renew, report."""

    def __init__(self, caller: Caller, host_id: str):
        self.caller = caller
        self.id = host_id

    def __repr__(self) -> str:
        return f"<host {self.id}>"

    def register(self, *devices: Any, expect: Expect = 200) -> dict[str, Any]:
        return self.caller.register(self.id, list(devices), expect=expect)

    def read(self, *, expect: Expect = 200) -> dict[str, Any]:
        return self.caller.get_host(self.id, expect=expect)

    # A claim expected to succeed gives a Lease; one expected to answer otherwise gives the
    # decoded answer: None for a 204, the problem document of a refusal.
    @overload
    def claim(self, *, expect: Literal[200] = 200, timeout: float | None = None, **body: Any) -> Lease: ...

    @overload
    def claim(self, *, expect: Expect, timeout: float | None = None, **body: Any) -> Lease | dict[str, Any] | None: ...

    def claim(
        self, *, expect: Expect = 200, timeout: float | None = None, **body: Any
    ) -> Lease | dict[str, Any] | None:
        answer = self.caller.claim(self.id, expect=expect, timeout=timeout, **body)
        if expect != 200:
            other: dict[str, Any] | None = answer
            return other
        return Lease(
            task_id=answer["task_id"],
            attempt=answer["attempt"],
            lease_id=answer["lease_id"],
            device=answer["device"],
            lease_seconds=answer["lease_seconds"],
            lease_expires_at=answer["lease_expires_at"],
            cancel_requested=answer["cancel_requested"],
        )

    def start(
        self, lease: Lease, *, expect: Expect = 200, lease_id: Any = _UNSET, attempt: int | None = None, **extra: Any
    ) -> dict[str, Any]:
        """Acknowledge the start; `extra` members go into the body (``progress=...``)."""
        return self._extend(self.caller.start, lease, expect, lease_id, attempt, extra)

    def renew(
        self, lease: Lease, *, expect: Expect = 200, lease_id: Any = _UNSET, attempt: int | None = None, **extra: Any
    ) -> dict[str, Any]:
        """Renew the lease; `extra` members go into the body (``progress=...``)."""
        return self._extend(self.caller.renew, lease, expect, lease_id, attempt, extra)

    def _extend(
        self,
        call: Callable[..., dict[str, Any]],
        lease: Lease,
        expect: Expect,
        lease_id: Any,
        attempt: int | None,
        extra: dict[str, Any],
    ) -> dict[str, Any]:
        """A start or renewal of `lease` (another lease id or attempt number where given);
        a 200 moves the lease's expiry to what the server granted."""
        answer = call(
            lease.task_id,
            attempt or lease.attempt,
            lease.lease_id if lease_id is _UNSET else lease_id,
            expect=expect,
            **extra,
        )
        if expect == 200:
            lease.extended(answer)
        return answer

    def report(
        self,
        lease: Lease,
        status: str,
        *,
        expect: Expect = 200,
        lease_id: Any = _UNSET,
        attempt: int | None = None,
        **body: Any,
    ) -> dict[str, Any]:
        return self.caller.report(
            lease.task_id,
            attempt or lease.attempt,
            lease.lease_id if lease_id is _UNSET else lease_id,
            status,
            expect=expect,
            **body,
        )

    def release(
        self, lease: Lease, *, expect: Expect = 200, lease_id: Any = _UNSET, attempt: int | None = None, **body: Any
    ) -> dict[str, Any]:
        return self.caller.release(
            lease.task_id,
            attempt or lease.attempt,
            lease.lease_id if lease_id is _UNSET else lease_id,
            expect=expect,
            **body,
        )

    def read_task(self, task_id: str, *, expect: Expect = 200) -> dict[str, Any]:
        return self.caller.get_task(task_id, expect=expect)

    def acknowledge(
        self,
        lease: Lease,
        message_id: str,
        state: str,
        *,
        expect: Expect = 200,
        lease_id: Any = _UNSET,
        attempt: int | None = None,
        **body: Any,
    ) -> dict[str, Any]:
        return self.caller.acknowledge(
            lease.task_id,
            attempt or lease.attempt,
            message_id,
            lease.lease_id if lease_id is _UNSET else lease_id,
            state,
            expect=expect,
            **body,
        )

    def admit(
        self, lease: Lease, message_id: str, before_step: str | None, *, expect: Expect = 200, **options: Any
    ) -> dict[str, Any]:
        """Acknowledge `admitted` at the boundary before `before_step` (None: after the last step)."""
        return self.acknowledge(
            lease, message_id, "admitted", boundary={"before_step": before_step}, expect=expect, **options
        )


def plan_of(*step_ids: str) -> dict[str, Any]:
    """A plan of one short `wait` step per id, in that order."""
    return {"steps": [{"id": s, "action": "wait", "args": {"seconds": 1}} for s in step_ids]}


def steps_all(plan: dict[str, Any], status: str = "completed", **extra: Any) -> list[dict[str, Any]]:
    """One step outcome per planned step of `plan`, all with `status`."""
    return [{"id": step["id"], "status": status, **extra} for step in plan["steps"]]


def ran(*step_ids: str, status: str = "completed") -> list[dict[str, Any]]:
    """Step outcomes of steps that ran (completed unless `status` says otherwise)."""
    return [{"id": s, "status": status} for s in step_ids]


def not_started(*step_ids: str, reason: str = "steered") -> list[dict[str, Any]]:
    """Step outcomes of steps that never started, with why (a steer removed them, by default)."""
    return [{"id": s, "status": "not_started", "reason": reason} for s in step_ids]


# The members of a message (specs/protocol.md Part B), as every message endpoint shows it.
MESSAGE_MEMBERS = frozenset(
    {
        "id",
        "intent",
        "text",
        "data",
        "state",
        "created_at",
        "attempt",
        "delivered_at",
        "admitted_at",
        "completed_at",
        "boundary",
        "detail",
    }
)


def as_recorded(host: dict[str, Any]) -> dict[str, Any]:
    """A host without its liveness (`last_seen_at`, `online`), which every request of its own
    token moves, refused or not: what "the host is unchanged" compares."""
    return {key: value for key, value in host.items() if key not in ("last_seen_at", "online")}


def ids(messages: list[dict[str, Any]]) -> list[str]:
    """The ids of messages, in the order given (a start or renewal answer's, a listing's)."""
    return [m["id"] for m in messages]
