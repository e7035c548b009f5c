"""The ASGI application: specs/protocol.md's endpoints over a `Service`.

Every endpoint follows the protocol's order of checks and does nothing else:

    size (413) -> authentication (401) -> authorization (403/404) -> the resource exists
    (404) -> the body is valid (400) -> the kernel decides (409 or success)

It decodes (`bodies`), builds a command with ``now=0`` (the service stamps it) and fresh
ids, runs it through `Api.decide`, and encodes the reply (`wire`). No rule of an
operation is decided here; a refused request never reaches the kernel, or the kernel
refuses it and changes nothing.

Around the commands the app keeps time moving (`timer`), wakes long-polling claims
(`longpoll`), counts what happens (`metrics`) and streams every committed change to the
readers of `GET /v1/events` (`eventstream`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import orjson
from starlette.applications import Starlette
from starlette.convertors import Convertor, register_url_convertor
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match, Route

from amc.adapters.http import access, bodies, wire
from amc.adapters.http.artifacts import ArtifactRoutes
from amc.adapters.http.auth import Authenticator, Principal
from amc.adapters.http.console import Console
from amc.adapters.http.eventstream import EventStream, EventStreamResponse
from amc.adapters.http.liveness import HostLiveness, Progress, ProgressBoard
from amc.adapters.http.longpoll import ClaimWaits, TaskSignals, WorkSignal
from amc.adapters.http.metrics import CONTENT_TYPE, Metrics
from amc.adapters.http.problems import (
    EXCEPTION_HANDLERS,
    Problem,
    forbidden,
    invalid,
    not_found,
    on_http,
    on_problem,
    unauthorized,
)
from amc.adapters.http.settings import Settings
from amc.adapters.http.standby import StandbyGate
from amc.adapters.http.timer import ExpiryTimer
from amc.core.commands import (
    AcknowledgeMessage,
    CancelTask,
    ClaimTask,
    Command,
    EndSession,
    ExpireLeases,
    PollAction,
    PostAction,
    PostMessage,
    RegisterHost,
    ReleaseAttempt,
    RenewLease,
    ReportAction,
    ReportResult,
    StartAttempt,
    SubmitTask,
)
from amc.core.decisions import (
    AcknowledgementRecorded,
    ActionAccepted,
    ActionRecorded,
    Assignment,
    CancelAccepted,
    Decision,
    HostUpdated,
    LeaseGranted,
    MessageAccepted,
    PollAnswer,
    ReleaseRecorded,
    ResultRecorded,
    SessionEndAccepted,
    Submitted,
)
from amc.core.errors import InvalidRequest
from amc.core.events import ActionEnded, TaskAssigned
from amc.core.lifecycle import MessageState, TaskStatus
from amc.core.records import Action, Boundary, DeviceSpec, Host, Message, Requirements, Task
from amc.core.times import to_rfc3339
from amc.core.waiting import Waiting, waiting
from amc.service import BlobStore, MemoryBlobStore, NoManualClock, Service, StorageUnavailable, TaskQuery

log = logging.getLogger("amc.http")

T = TypeVar("T")
R = TypeVar("R")

JSON_TYPE = "application/json"


def json_response(data: Any, status: int = 200, headers: dict | None = None) -> Response:
    return Response(orjson.dumps(data), status_code=status, media_type=JSON_TYPE, headers=headers)


def _too_large(limit: int) -> Problem:
    return Problem("payload_too_large", f"request bodies are limited to {limit} bytes")


class AttemptNumber(Convertor):
    """An attempt number in a path, written canonically: ``1``, ``2``, ... (no sign, no leading
    zero). Any other spelling (``01``, ``+1``) names no attempt, so no route matches it: 404."""

    regex = "[1-9][0-9]{0,17}"

    def convert(self, value: str) -> int:
        return int(value)

    def to_string(self, value: int) -> str:
        return str(value)


register_url_convertor("attempt", AttemptNumber())


def new_task_id() -> str:
    return "t_" + secrets.token_hex(10)


def new_lease_id() -> str:
    return "l_" + secrets.token_hex(16)


def new_message_id() -> str:
    return "m_" + secrets.token_hex(10)


class Api:
    """The endpoints of one server, bound to its service, settings, tokens and metrics."""

    def __init__(self, service: Service, settings: Settings, tokens: Authenticator, metrics: Metrics, blobs: BlobStore):
        self.service = service
        self.settings = settings
        self.tokens = tokens
        self.metrics = metrics
        self.signal = WorkSignal()
        self.claim_waits = ClaimWaits(settings.max_waiting_claims, settings.max_waiting_claims_per_host)
        self.task_signals = TaskSignals()  # Part D: polls and waits on one task
        self.timer = ExpiryTimer(service, self.run)
        self.liveness = HostLiveness(service.clock, round(settings.host_timeout_seconds * 1000))
        self.progress = ProgressBoard()
        self.artifacts = ArtifactRoutes(self, blobs)
        self.events = EventStream(self.task_view, self.host_view, self.liveness.online, settings.events)

    # -- around every command -------------------------------------------------------------

    async def run(self, command: Command) -> Decision:
        """Execute `command`, count it, and tell the long polls and the timer what changed."""
        started = time.perf_counter()
        decision = await self.service.execute(command)
        outcome = "accepted" if decision.rejection is None else decision.rejection.code.name
        self.metrics.command(type(command), outcome, time.perf_counter() - started)
        if decision.events:
            self.signal.notify_if_waking(decision.events)
            self.task_signals.notify(decision.events)
            # Only a new lease can make the earliest expiry earlier: a start or a renewal
            # moves its lease later, and an expiry or a report removes one.
            # A session's idle deadline likewise only comes nearer by a claim or an action's end.
            if any(isinstance(event, (TaskAssigned, ActionEnded)) for event in decision.events):
                self.timer.poke()
        return decision

    async def decide(self, command: Command, expected: type[R]) -> R:
        """The kernel's reply to `command`, which is an `expected`, or its rejection raised as a problem."""
        decision = await self.run(command)
        if decision.rejection is not None:
            raise Problem(decision.rejection.code.name, decision.rejection.detail)
        reply = decision.reply
        assert isinstance(reply, expected), f"{type(command).__name__} was answered {reply!r}"
        return reply

    def _task(self, task_id: str) -> Task:
        """A task a command was just accepted for, which therefore exists."""
        task = self.service.task(task_id)
        assert task is not None, f"task {task_id!r} is gone after an accepted command"
        return task

    def _host(self, host_id: str) -> Host:
        """A host that was just registered, which therefore exists."""
        host = self.service.host(host_id)
        assert host is not None, f"host {host_id!r} is gone after its registration"
        return host

    async def catch_up(self) -> None:
        """Apply due expiries before a read, so no read shows a lapsed lease as active.

        When the store cannot take the expiries (a full disk), the read is still served,
        from the durable state: reads go on while writes are refused, and the expiries are
        applied by the first read or timer tick after space comes back."""
        due = self.service.next_expiry()
        if due is not None and due <= self.service.clock.now():
            try:
                await self.run(ExpireLeases(now=0))
            except StorageUnavailable as error:
                log.warning("due lease expiries could not be stored before a read: %s", error)

    def drain(self) -> None:
        """The server is stopping: let every waiting claim and poll answer now, and end every event stream."""
        self.signal.close()
        self.task_signals.close()
        self.events.close()

    # -- the first checks of every request -------------------------------------------------

    async def begin(self, request: Request) -> tuple[Principal, bytes]:
        """Size (413), then authentication (401): the body bytes and the caller."""
        raw = await self._read_body(request)
        principal = self.tokens.authenticate(request.headers.get("authorization"))
        if principal is None:
            raise unauthorized()
        if principal.role == "host":  # any authenticated request of a host shows it alive
            self.liveness.seen(principal.host)
        return principal, raw

    async def unrouted(self, request: Request, exc: HTTPException) -> Response:
        """No route took the request: an unknown path (404) or a method its path lacks (405).

        Size and authentication come first here too (authentication before routing), so a
        caller without a valid token learns nothing about which paths exist. A 405 names in
        `Allow` every method of that path, gathered from all the routes that share it.
        """
        if exc.status_code in (404, 405):
            declared = request.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > self.settings.limits.max_body_bytes:
                return await on_problem(request, _too_large(self.settings.limits.max_body_bytes))
            principal = self.tokens.authenticate(request.headers.get("authorization"))
            if principal is None:
                return await on_problem(request, unauthorized())
            if principal.role == "host":
                self.liveness.seen(principal.host)
        if exc.status_code == 405:
            allowed = {
                method
                for route in request.app.router.routes
                if route.matches(request.scope)[0] is not Match.NONE
                for method in route.methods or ()
            }
            exc = HTTPException(405, headers={"Allow": ", ".join(sorted(allowed))})
        return await on_http(request, exc)

    async def _read_body(self, request: Request) -> bytes:
        limit = self.settings.limits.max_body_bytes
        declared = request.headers.get("content-length")
        if declared is not None:
            if not declared.isdigit():
                raise invalid("Content-Length: not a number")
            if int(declared) > limit:
                raise _too_large(limit)
            return await request.body()  # the HTTP server holds it to the declared length
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:  # a chunked body without a length: count as it arrives
                raise _too_large(limit)
            chunks.append(chunk)
        return b"".join(chunks)

    # -- views with what the server knows of the moment -------------------------------------

    def task_view(
        self, task: Task, hosts: list[Host] | None = None, reasons: dict[tuple, Waiting | None] | None = None
    ) -> dict[str, Any]:
        """A task with its attempts' progress and, when queued, why it waits (`hosts`: the
        registered hosts, when the caller already read them; `reasons`: the answers already
        worked out for this read, by what they depend on)."""
        why = None
        if task.status == TaskStatus.queued:
            # Why a task waits depends only on its requirements and whether it is held, and
            # working it out passes over every device: a page of tasks that share their
            # requirements (the usual case) pays for one pass, not one per task.
            requirements = task.requirements
            key = (requirements.serial, tuple(sorted(requirements.attributes.items())), task.held)
            if reasons is not None and key in reasons:
                why = reasons[key]
            else:
                why = waiting(task, self.service.hosts() if hosts is None else hosts, self.liveness.online)
                if reasons is not None:
                    reasons[key] = why
        return wire.task_view(task, progress=self.progress.of, waiting=why)

    def host_view(self, host: Host) -> dict[str, Any]:
        return wire.host_view(host, self.liveness.last_seen(host.id), self.liveness.online(host.id))

    # -- open endpoints -------------------------------------------------------------------

    async def health(self, request: Request) -> Response:
        return json_response({"status": "ok"})

    async def metrics_text(self, request: Request) -> Response:
        await self.catch_up()
        return Response(self.metrics.exposition(), media_type=CONTENT_TYPE)

    # -- tasks ----------------------------------------------------------------------------

    async def submit(self, request: Request) -> Response:
        principal, raw = await self.begin(request)
        access.require_role(principal, "client", "admin")
        body, plan = bodies.decode_submit(raw, self.settings.limits, may_name_tenant=principal.role == "admin")
        idle_ms = bodies.session_idle_ms(body)
        tenant = principal.tenant if principal.role == "client" else (body.tenant or "default")
        assert tenant is not None  # a client token always names its tenant
        command = SubmitTask(
            now=0,
            task_id=new_task_id(),
            tenant=tenant,
            plan=plan,
            requirements=Requirements(serial=body.requirements.serial, attributes=body.requirements.attributes),
            priority=body.priority,
            max_attempts=body.max_attempts,
            labels=body.labels,
            idempotency_key=body.idempotency_key,
            idle_ms=idle_ms,
        )
        reply = await self.decide(command, Submitted)
        task = self._task(reply.task_id)
        status = 201 if reply.created else 200
        return json_response(self.task_view(task), status, headers={"Location": f"/v1/tasks/{task.id}"})

    async def get_task(self, request: Request) -> Response:
        principal, _ = await self.begin(request)
        await self.catch_up()
        task_id = request.path_params["task_id"]
        task = access.visible_task(principal, self.service.task(task_id), task_id)
        return json_response(self.task_view(task))

    async def list_tasks(self, request: Request) -> Response:
        principal, _ = await self.begin(request)
        access.require_role(principal, "client", "admin")
        query = bodies.decode_list_query(request.query_params, self.settings.limits)
        await self.catch_up()
        try:
            page = self.service.tasks(
                TaskQuery(
                    limit=query.limit,
                    tenant=principal.scope,
                    status=query.status,
                    after=query.after,
                    newest_first=query.newest_first,
                    label=query.label,
                )
            )
        except (ValueError, TypeError, KeyError):
            raise invalid("after: not a cursor from this server") from None
        # Read the hosts once for the page, if any of its tasks is queued.
        hosts = self.service.hosts() if any(t.status == TaskStatus.queued for t in page.tasks) else []
        reasons: dict[tuple, Waiting | None] = {}
        return json_response({"tasks": [self.task_view(t, hosts, reasons) for t in page.tasks], "next": page.next})

    async def history(self, request: Request) -> Response:
        principal, _ = await self.begin(request)
        access.require_role(principal, "client", "admin")
        await self.catch_up()
        task_id = request.path_params["task_id"]
        access.visible_task(principal, self.service.task(task_id), task_id)
        return json_response(wire.history_view(self.service.history(task_id)))

    async def cancel(self, request: Request) -> Response:
        principal, raw = await self.begin(request)
        access.require_role(principal, "client", "admin")
        task_id = request.path_params["task_id"]
        access.visible_task(principal, self.service.task(task_id), task_id)
        body = bodies.decode_cancel(raw, self.settings.limits)
        reply = await self.decide(
            CancelTask(now=0, task_id=task_id, tenant=principal.scope, reason=body.reason), CancelAccepted
        )
        return json_response(self.task_view(self._task(task_id)), 202 if reply.pending else 200)

    # -- messages -------------------------------------------------------------------------

    async def post_message(self, request: Request) -> Response:
        principal, raw = await self.begin(request)
        access.require_role(principal, "client", "admin")
        task_id = request.path_params["task_id"]
        access.visible_task(principal, self.service.task(task_id), task_id)
        message_id = new_message_id()
        body = bodies.decode_message(raw, self.settings.limits, message_id)
        command = PostMessage(
            now=0,
            task_id=task_id,
            tenant=principal.scope,
            message_id=message_id,
            intent=body.intent,
            text=body.text,
            data=body.data,
        )
        reply = await self.decide(command, MessageAccepted)
        message = _message_of(self._task(task_id), reply.message_id)
        location = f"/v1/tasks/{task_id}/messages/{message.id}"
        return json_response(wire.message_view(message), 201, headers={"Location": location})

    async def list_messages(self, request: Request) -> Response:
        task = await self._readable_task(request)
        return json_response({"messages": [wire.message_view(m) for m in task.messages]})

    async def get_message(self, request: Request) -> Response:
        task = await self._readable_task(request)
        return json_response(wire.message_view(_message_of(task, request.path_params["message_id"])))

    async def _readable_task(self, request: Request) -> Task:
        """The task whose messages a client of its tenant or an admin reads (like its history)."""
        principal, _ = await self.begin(request)
        access.require_role(principal, "client", "admin")
        await self.catch_up()
        task_id = request.path_params["task_id"]
        return access.visible_task(principal, self.service.task(task_id), task_id)

    # -- hosts ----------------------------------------------------------------------------

    async def put_host(self, request: Request) -> Response:
        principal, raw = await self.begin(request)
        host_id = request.path_params["host_id"]
        access.require_host_or_admin(principal, host_id)
        body = bodies.decode_inventory(raw, self.settings.limits)
        if not host_id or len(host_id) > self.settings.limits.max_id_length:
            raise invalid(f"host_id: must be 1-{self.settings.limits.max_id_length} characters")
        devices = tuple(DeviceSpec(serial=d.serial, attributes=d.attributes) for d in body.devices)
        await self.decide(RegisterHost(now=0, host_id=host_id, devices=devices), HostUpdated)
        return json_response(self.host_view(self._host(host_id)))

    async def list_hosts(self, request: Request) -> Response:
        principal, _ = await self.begin(request)
        await self.catch_up()
        if principal.role == "host":  # a host reads only itself: its own entry, once it registered
            own = self.service.host(principal.host)
            hosts = [] if own is None else [own]
        else:
            hosts = self.service.hosts()
        return json_response({"hosts": [self.host_view(h) for h in hosts]})

    async def get_host(self, request: Request) -> Response:
        principal, _ = await self.begin(request)
        host_id = request.path_params["host_id"]
        if principal.role == "host" and principal.host != host_id:
            raise forbidden("a host reads only itself")
        await self.catch_up()
        host = self.service.host(host_id)
        if host is None:
            raise not_found(f"no host {host_id!r}")
        return json_response(self.host_view(host))

    # -- the event stream (Part E) ----------------------------------------------------------

    async def stream_events(self, request: Request) -> Response:
        principal, _ = await self.begin(request)
        access.require_role(principal, "client", "admin")
        last = request.headers.get("last-event-id") or request.query_params.get("last_event_id")
        return EventStreamResponse(self.events.subscribe(principal.scope, last))

    # -- the host agent's side ------------------------------------------------------------

    async def claim(self, request: Request) -> Response:
        principal, raw = await self.begin(request)
        host_id = request.path_params["host_id"]
        access.require_host(principal, host_id)
        body, lease_ms = bodies.decode_claim(raw, self.settings)
        devices = None if body.devices is None else tuple(body.devices)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + body.wait_seconds
        kind = (host_id, devices, body.sessions)  # claims of one kind find the same work (see longpoll)
        reply, _ = await self._claim_once(kind, lease_ms)
        if reply is not None:
            return reply
        if body.wait_seconds <= 0 or self.signal.closed:
            return Response(status_code=204)
        if not self.claim_waits.enter(host_id):
            # Too many claims wait already: this one waits out its time unwoken, and claims
            # once more at its end (a flood of them costs a sleep each).
            await self.signal.sleep(deadline - loop.time())
            if await request.is_disconnected():
                return Response(status_code=204)
            reply, _ = await self._claim_once(kind, lease_ms)
            return reply or Response(status_code=204)
        try:
            async with self.signal.first_of(kind, deadline - loop.time()) as first:
                if not first:  # its time ran out behind the others of its kind
                    return Response(status_code=204)
                if await request.is_disconnected():  # gone while in line: take nothing for it
                    return Response(status_code=204)
                while True:
                    reply, generation = await self._claim_once(kind, lease_ms)  # work may have come meanwhile
                    if reply is not None:
                        return reply
                    remaining = deadline - loop.time()
                    if remaining <= 0 or self.signal.closed:
                        return Response(status_code=204)
                    await self.signal.wait(generation, remaining)
                    if await request.is_disconnected():  # nobody would read an assignment now
                        return Response(status_code=204)
        finally:
            self.claim_waits.leave(host_id)

    async def _claim_once(
        self, kind: tuple[str, tuple[str, ...] | None, bool], lease_ms: int
    ) -> tuple[Response | None, int]:
        """One claim of `kind` (host, devices, whether it takes sessions): the assignment's
        response, or None; and the generation read before it (see longpoll). A kind known to
        find nothing is not asked."""
        generation = self.signal.generation
        if self.signal.known_empty(kind):
            return None, generation
        host_id, devices, sessions = kind
        command = ClaimTask(
            now=0, host_id=host_id, lease_id=new_lease_id(), lease_ms=lease_ms, devices=devices, sessions=sessions
        )
        reply = await self.decide(command, object)  # an Assignment or a NoAssignment
        if isinstance(reply, Assignment):
            return json_response(wire.assignment_view(reply)), generation
        self.signal.found_nothing(kind, generation)
        return None, generation

    def _attempt_target(self, request: Request) -> tuple[Task, str, int]:
        """The task and attempt number a lease request names; 404 if either does not exist."""
        task_id = request.path_params["task_id"]
        number = request.path_params["attempt"]
        task = self.service.task(task_id)
        if task is None:
            raise not_found(f"no task {task_id!r}")
        if not 1 <= number <= len(task.attempts):
            raise not_found(f"task {task_id!r} has no attempt {number}")
        return task, task_id, number

    async def _lease_request(self, request: Request, decode: Callable[[bytes], T]) -> tuple[Principal, T, str, int]:
        """The caller, the decoded body, and the task and attempt a start, renewal or result names.

        A missing task or attempt (404) comes before a bad body (400). The kernel refuses a
        well-formed command for a missing task or attempt first, with the same 404, so the
        task is looked up here only when the body is bad: a renewal reads no record.
        """
        principal, raw = await self.begin(request)
        access.require_role(principal, "host")
        try:
            body = decode(raw)
        except (InvalidRequest, Problem):
            self._attempt_target(request)
            raise
        return principal, body, request.path_params["task_id"], request.path_params["attempt"]

    async def start(self, request: Request) -> Response:
        return await self._lease_grant(request, StartAttempt)

    async def renew(self, request: Request) -> Response:
        return await self._lease_grant(request, RenewLease)

    async def _lease_grant(self, request: Request, kind: type[StartAttempt] | type[RenewLease]) -> Response:
        """A start or a renewal: the kernel checks the lease and the reported step; the
        progress itself is kept here once the lease is granted."""
        principal, body, task_id, number = await self._lease_request(request, bodies.decode_lease)
        command = kind(
            now=0,
            host_id=principal.host,
            task_id=task_id,
            attempt=number,
            lease_id=body.lease_id,
            progress_step=body.progress.step if body.progress is not None else None,
        )
        granted = await self.decide(command, LeaseGranted)
        self._record_progress(body, task_id, number)
        return json_response(wire.lease_view(granted))

    def _record_progress(self, body: bodies.LeaseBody, task_id: str, number: int) -> None:
        if body.progress is not None:
            self.progress.record(task_id, number, Progress(step=body.progress.step, ended=body.progress.ended))

    async def result(self, request: Request) -> Response:
        decode = functools.partial(bodies.decode_result, limits=self.settings.limits)
        principal, (body, steps), task_id, number = await self._lease_request(request, decode)
        command = ReportResult(
            now=0,
            host_id=principal.host,
            task_id=task_id,
            attempt=number,
            lease_id=body.lease_id,
            status=TaskStatus(body.status),
            metadata=body.metadata,
            steps=steps,
        )
        await self.decide(command, ResultRecorded)
        return json_response(self.task_view(self._task(task_id)))

    async def release(self, request: Request) -> Response:
        decode = functools.partial(bodies.decode_release, limits=self.settings.limits)
        principal, (body, steps), task_id, number = await self._lease_request(request, decode)
        command = ReleaseAttempt(
            now=0,
            host_id=principal.host,
            task_id=task_id,
            attempt=number,
            lease_id=body.lease_id,
            reason=body.reason,
            steps=steps,
        )
        await self.decide(command, ReleaseRecorded)
        return json_response(self.task_view(self._task(task_id)))

    async def acknowledge(self, request: Request) -> Response:
        principal, raw = await self.begin(request)
        access.require_role(principal, "host")
        task, task_id, number = self._attempt_target(request)  # the message must exist too (404)
        message_id = _message_of(task, request.path_params["message_id"]).id
        body = bodies.decode_acknowledgement(raw, self.settings.limits)
        command = AcknowledgeMessage(
            now=0,
            host_id=principal.host,
            task_id=task_id,
            attempt=number,
            lease_id=body.lease_id,
            message_id=message_id,
            state=MessageState(body.state),
            boundary=None if body.boundary is None else Boundary(before_step=body.boundary.before_step),
            detail=body.detail,
        )
        await self.decide(command, AcknowledgementRecorded)
        return json_response(wire.message_view(_message_of(self._task(task_id), message_id)))

    # -- sessions (Part D) ------------------------------------------------------------------

    async def post_action(self, request: Request) -> Response:
        principal, raw = await self.begin(request)
        access.require_role(principal, "client", "admin")
        task_id = request.path_params["task_id"]
        access.visible_task(principal, self.service.task(task_id), task_id)
        wait = bodies.decode_wait(request.query_params, self.settings.limits)
        step = bodies.decode_action(raw, self.settings.limits)
        reply = await self.decide(PostAction(now=0, task_id=task_id, tenant=principal.scope, step=step), ActionAccepted)
        action = await self._action_when_ended(task_id, reply.action_id, wait)
        location = f"/v1/tasks/{task_id}/actions/{action.id}"
        return json_response(wire.action_view(action), 201 if reply.created else 200, headers={"Location": location})

    async def list_actions(self, request: Request) -> Response:
        task = await self._session_task(request)
        assert task.session is not None
        return json_response({"actions": [wire.action_view(a) for a in task.session.actions]})

    async def get_action(self, request: Request) -> Response:
        task = await self._session_task(request)
        action_id = request.path_params["action_id"]
        _action_of(task, action_id)
        wait = bodies.decode_wait(request.query_params, self.settings.limits)
        return json_response(wire.action_view(await self._action_when_ended(task.id, action_id, wait)))

    async def _session_task(self, request: Request) -> Task:
        """A session whoever may read the task reads (a plan's task: 409 `not_a_session`)."""
        principal, _ = await self.begin(request)
        await self.catch_up()
        task_id = request.path_params["task_id"]
        task = access.visible_task(principal, self.service.task(task_id), task_id)
        if task.session is None:
            raise Problem("not_a_session", f"task {task_id!r} runs a plan; it has no actions")
        return task

    async def _action_when_ended(self, task_id: str, action_id: str, wait: float) -> Action:
        """The action as it stands once it ended, or when `wait` seconds have passed."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        while True:
            event = self.task_signals.watch(task_id)  # before the read: see TaskSignals
            await self.catch_up()
            action = _action_of(self._task(task_id), action_id)
            remaining = deadline - loop.time()
            if action.final or remaining <= 0 or self.task_signals.closed:
                return action
            await self.task_signals.wait(event, min(remaining, self._next_deadline_in()))

    def _next_deadline_in(self) -> float:
        """Seconds until the next lease expiry or idle end (which the timer applies), at least 1 ms."""
        due = self.service.next_expiry()
        if due is None:
            return 3600.0
        return max((due - self.service.clock.now()) / 1000, 0.001)

    async def end_session(self, request: Request) -> Response:
        principal, raw = await self.begin(request)
        access.require_role(principal, "client", "admin")
        task_id = request.path_params["task_id"]
        access.visible_task(principal, self.service.task(task_id), task_id)
        bodies.decode_end(raw)
        await self.decide(EndSession(now=0, task_id=task_id, tenant=principal.scope), SessionEndAccepted)
        return json_response(self.task_view(self._task(task_id)))

    async def poll_action(self, request: Request) -> Response:
        decode = functools.partial(bodies.decode_poll, limits=self.settings.limits)
        principal, body, task_id, number = await self._lease_request(request, decode)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + body.wait_seconds
        while True:
            event = self.task_signals.watch(task_id)  # before deciding: see TaskSignals
            command = PollAction(
                now=0,
                host_id=principal.host,
                task_id=task_id,
                attempt=number,
                lease_id=body.lease_id,
                running=body.running,
            )
            reply = await self.decide(command, PollAnswer)
            remaining = deadline - loop.time()
            nothing = reply.action_id is None and not reply.cancel_requested
            if not nothing or remaining <= 0 or self.task_signals.closed:
                return json_response(wire.poll_view(reply, self._task(task_id)))
            await self.task_signals.wait(event, min(remaining, self._next_deadline_in()))
            if await request.is_disconnected():
                return json_response(wire.poll_view(reply, self._task(task_id)))

    async def report_action(self, request: Request) -> Response:
        principal, raw = await self.begin(request)
        access.require_role(principal, "host")
        task, task_id, number = self._attempt_target(request)
        if task.session is None:
            raise Problem("not_a_session", f"task {task_id!r} runs a plan; it has no actions")
        action_id = _action_of(task, request.path_params["action_id"]).id
        body, outcome = bodies.decode_action_report(raw, self.settings.limits, action_id)
        command = ReportAction(
            now=0, host_id=principal.host, task_id=task_id, attempt=number, lease_id=body.lease_id, outcome=outcome
        )
        await self.decide(command, ActionRecorded)
        return json_response(wire.action_view(_action_of(self._task(task_id), action_id)))

    # -- admin ----------------------------------------------------------------------------

    async def advance_clock(self, request: Request) -> Response:
        principal, raw = await self.begin(request)
        access.require_role(principal, "admin")  # 403 for anyone else, whatever the clock
        if not self.settings.manual_clock:
            raise _no_manual_clock()
        ms = bodies.decode_clock(raw, self.settings.limits)
        try:
            now = await self.service.advance_clock(ms)
        except NoManualClock:
            raise _no_manual_clock() from None
        # Expiries may have freed devices and requeued tasks, and moved the earliest expiry.
        self.signal.notify()
        self.timer.poke()
        return json_response({"now": to_rfc3339(now)})

    def routes(self) -> list[Route]:
        # Starlette tries routes in order; the Host Agents' hot path (renew, start, claim)
        # comes first, so a renewal is matched after one regex rather than nine.
        routes = [
            Route("/v1/tasks/{task_id}/attempts/{attempt:attempt}/renew", self.renew, methods=["POST"]),
            Route("/v1/tasks/{task_id}/attempts/{attempt:attempt}/start", self.start, methods=["POST"]),
            Route("/v1/hosts/{host_id}/claim", self.claim, methods=["POST"]),
            Route("/v1/tasks/{task_id}/attempts/{attempt:attempt}/actions/next", self.poll_action, methods=["POST"]),
            Route(
                "/v1/tasks/{task_id}/attempts/{attempt:attempt}/actions/{action_id}",
                self.report_action,
                methods=["POST"],
            ),
            Route("/v1/tasks/{task_id}/attempts/{attempt:attempt}/result", self.result, methods=["POST"]),
            Route("/v1/tasks/{task_id}/attempts/{attempt:attempt}/release", self.release, methods=["POST"]),
            Route(
                "/v1/tasks/{task_id}/attempts/{attempt:attempt}/messages/{message_id}",
                self.acknowledge,
                methods=["POST"],
            ),
            Route(
                "/v1/tasks/{task_id}/attempts/{attempt:attempt}/artifacts/{name:path}",
                self.artifacts.upload,
                methods=["PUT"],
            ),
            Route("/v1/tasks/{task_id}/artifacts", self.artifacts.list, methods=["GET"]),
            Route("/v1/tasks/{task_id}/artifacts/{artifact_id}", self.artifacts.download, methods=["GET"]),
            Route("/v1/tasks", self.submit, methods=["POST"]),
            Route("/v1/tasks", self.list_tasks, methods=["GET"]),
            Route("/v1/tasks/{task_id}", self.get_task, methods=["GET"]),
            Route("/v1/tasks/{task_id}/history", self.history, methods=["GET"]),
            Route("/v1/tasks/{task_id}/cancel", self.cancel, methods=["POST"]),
            Route("/v1/tasks/{task_id}/messages", self.post_message, methods=["POST"]),
            Route("/v1/tasks/{task_id}/messages", self.list_messages, methods=["GET"]),
            Route("/v1/tasks/{task_id}/messages/{message_id}", self.get_message, methods=["GET"]),
            Route("/v1/tasks/{task_id}/actions", self.post_action, methods=["POST"]),
            Route("/v1/tasks/{task_id}/actions", self.list_actions, methods=["GET"]),
            Route("/v1/tasks/{task_id}/actions/{action_id}", self.get_action, methods=["GET"]),
            Route("/v1/tasks/{task_id}/end", self.end_session, methods=["POST"]),
            Route("/v1/hosts", self.list_hosts, methods=["GET"]),
            Route("/v1/hosts/{host_id}", self.get_host, methods=["GET"]),
            Route("/v1/hosts/{host_id}", self.put_host, methods=["PUT"]),
            Route("/v1/events", self.stream_events, methods=["GET"]),
            Route("/v1/health", self.health, methods=["GET"]),
            Route("/metrics", self.metrics_text, methods=["GET"]),
            # Always routed: a non-admin is refused (403) before anyone learns the clock's kind.
            Route("/v1/admin/clock", self.advance_clock, methods=["POST"]),
            # The web console's static files, last: no request of the API is matched against them.
            *Console().routes(),
        ]
        return routes


def _no_manual_clock() -> Problem:
    return not_found("this server does not run a manual clock")


def _action_of(task: Task, action_id: str) -> Action:
    action = None if task.session is None else task.session.action(action_id)
    if action is None:
        raise not_found(f"task {task.id!r} has no action {action_id!r}")
    return action


def _message_of(task: Task, message_id: str) -> Message:
    message = task.message(message_id)
    if message is None:
        raise not_found(f"task {task.id!r} has no message {message_id!r}")
    return message


def create_app(
    service: Service,
    settings: Settings | None = None,
    *,
    tokens: Authenticator,
    metrics: Metrics | None = None,
    close_service: bool = False,
    blobs: BlobStore | None = None,
) -> Starlette:
    """The ASGI app serving `service`.

    Args:
        service: the store the commands go to.
        settings: lease bounds, the clock kind and the body limits.
        tokens: the bearer tokens that may call it.
        metrics: where to count (give the one whose `on_commit` the store reports to).
        close_service: close the service when the app shuts down (`amc serve` does).
        blobs: where artifacts' bytes go (default: a `MemoryBlobStore`, beside a memory service).
    Returns:
        A Starlette app; ``app.state.api`` is its `Api`, ``app.state.redact`` blanks its tokens out of a text.
    """
    settings = settings or Settings()
    metrics = metrics or Metrics()
    metrics.bind(service)
    api = Api(service, settings, tokens, metrics, blobs if blobs is not None else MemoryBlobStore())

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        api.timer.start()
        stop_watching = service.watch(api.events.listener(asyncio.get_running_loop()))
        liveness = asyncio.create_task(
            api.events.watch_liveness(api.liveness.known, service.host), name="amc-event-liveness"
        )
        try:
            yield
        finally:
            api.drain()
            stop_watching()
            liveness.cancel()
            await api.timer.stop()
            if close_service:
                await service.aclose()

    handlers: dict[Any, Any] = {**EXCEPTION_HANDLERS, HTTPException: api.unrouted}
    # A service shared with other servers may be a standby: then every request is 503 (standby.py).
    middleware = [Middleware(StandbyGate, service=service)] if service.may_stand_by else []
    app = Starlette(routes=api.routes(), exception_handlers=handlers, lifespan=lifespan, middleware=middleware)
    app.state.api = api
    app.state.redact = tokens.redact  # problems.py keeps tokens out of error details with it
    return app
