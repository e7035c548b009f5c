"""The request scope: the checks every endpoint begins with, written once.

Every endpoint follows the protocol's order of checks and does nothing else:

    size (413) -> authentication (401) -> authorization (403/404) -> the resource exists
    (404) -> the body is valid (400) -> the kernel decides (409 or success)

`Scope.begin` takes the first three (the body within its limit, the caller, its role);
`readable_task` and `named_task` the task a path names, if the caller may see it;
`attempt_target` the task and attempt a host's request names; `decide` runs a command
(with ``now=0``: the service stamps it) and raises the kernel's refusal as a problem. No
rule of an operation is decided here: a refused request never reaches the kernel, or the
kernel refuses it and changes nothing. `unrouted` answers a request no route took, after
the same first checks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match

from amc.adapters.http import access
from amc.adapters.http.auth import Principal
from amc.adapters.http.context import Context
from amc.adapters.http.problems import Problem, invalid, not_found, on_http, on_problem, unauthorized
from amc.core.commands import Command, ExpireLeases
from amc.core.errors import InvalidRequest
from amc.core.records import Action, Host, Message, Session, Task
from amc.service import StorageUnavailable

log = logging.getLogger("amc.http")

T = TypeVar("T")
R = TypeVar("R")


class Scope:
    """The first checks and the kernel's answer, for every endpoint of one server's `Context`."""

    def __init__(self, context: Context):
        self.context = context
        # Read on every request: bound once here rather than looked up through the context.
        self._service = context.service
        self._run = context.run
        self._authenticator = context.tokens
        self._liveness = context.liveness
        self._max_body_bytes = context.settings.limits.max_body_bytes

    async def begin(self, request: Request, roles: tuple[str, ...] | None = None) -> tuple[Principal, bytes]:
        """Size (413), authentication (401), then the caller's role (403) if `roles` limits it:
        the caller and the body's bytes."""
        limit = self._max_body_bytes
        declared = request.headers.get("content-length")
        if declared is None:
            raw = await _chunked_body(request, limit)
        elif not declared.isdigit():
            raise invalid("Content-Length: not a number")
        elif int(declared) > limit:
            raise _too_large(limit)
        else:
            raw = await request.body()  # the HTTP server holds it to the declared length
        principal = self.authenticate(request)
        if roles is not None:
            access.require_role(principal, roles)
        return principal, raw

    def authenticate(self, request: Request) -> Principal:
        """The caller its bearer token stands for (401 without one); a host's request shows it alive."""
        principal = self._authenticator.authenticate(request.headers.get("authorization"))
        if principal is None:
            raise unauthorized()
        if principal.role == "host":  # any authenticated request of a host shows it alive
            self._liveness.seen(principal.host)
        return principal

    async def catch_up(self) -> None:
        """Apply due expiries before a read, so no read shows a lapsed lease as active.

        When the store cannot take the expiries (a full disk), the read is still served,
        from the durable state: reads go on while writes are refused, and the expiries are
        applied by the first read or timer tick after space comes back."""
        due = self._service.next_expiry()
        if due is not None and due <= self._service.clock.now():
            try:
                await self._run(ExpireLeases(now=0))
            except StorageUnavailable as error:
                log.warning("due lease expiries could not be stored before a read: %s", error)

    async def decide(self, command: Command, expected: type[R]) -> R:
        """The kernel's reply to `command`, which is an `expected`, or its rejection raised as a problem."""
        decision = await self._run(command)
        if decision.rejection is not None:
            raise Problem(decision.rejection.code.name, decision.rejection.detail)
        reply = decision.reply
        assert isinstance(reply, expected), f"{type(command).__name__} was answered {reply!r}"
        return reply

    # -- the task or attempt a path names ---------------------------------------------------

    async def readable_task(self, request: Request, roles: tuple[str, ...] | None = None) -> Task:
        """The task the path names, as a read shows it (due expiries applied), if the caller
        (of one of `roles`, when given) may read it; else 404, as for an unknown id."""
        principal, _ = await self.begin(request, roles)
        await self.catch_up()
        return self.named_task(principal, request)

    def named_task(self, principal: Principal, request: Request) -> Task:
        """The task the path names if `principal` may read it (404 else): a write's first
        check, on the task as stored (the kernel decides on the state when it runs)."""
        task_id = request.path_params["task_id"]
        return access.visible_task(principal, self._service.task(task_id), task_id)

    def attempt_target(self, request: Request) -> tuple[Task, str, int]:
        """The task and attempt number a host's request names; 404 if either does not exist."""
        task_id = request.path_params["task_id"]
        number = request.path_params["attempt"]
        task = self._service.task(task_id)
        if task is None:
            raise not_found(f"no task {task_id!r}")
        if not 1 <= number <= len(task.attempts):
            raise not_found(f"task {task_id!r} has no attempt {number}")
        return task, task_id, number

    async def lease_request(self, request: Request, decode: Callable[[bytes], T]) -> tuple[Principal, T, str, int]:
        """The host, the decoded body, and the task and attempt a start, renewal, result,
        release or poll names.

        A missing task or attempt (404) comes before a bad body (400). The kernel refuses a
        well-formed command for a missing task or attempt first, with the same 404, so the
        task is looked up here only when the body is bad: a renewal reads no record.
        """
        principal, raw = await self.begin(request, access.HOST)
        try:
            body = decode(raw)
        except (InvalidRequest, Problem):
            self.attempt_target(request)
            raise
        return principal, body, request.path_params["task_id"], request.path_params["attempt"]

    # -- records after an accepted command ----------------------------------------------------

    def existing_task(self, task_id: str) -> Task:
        """A task a command was just accepted for, which therefore exists."""
        task = self._service.task(task_id)
        assert task is not None, f"task {task_id!r} is gone after an accepted command"
        return task

    def existing_host(self, host_id: str) -> Host:
        """A host that was just registered, which therefore exists."""
        host = self._service.host(host_id)
        assert host is not None, f"host {host_id!r} is gone after its registration"
        return host

    # -- no route -------------------------------------------------------------------------

    async def unrouted(self, request: Request, exc: HTTPException) -> Response:
        """No route took the request: an unknown path (404) or a method its path lacks (405).

        Size and authentication come first here too (authentication before routing), so a
        caller without a valid token learns nothing about which paths exist. A 405 names in
        `Allow` every method of that path, gathered from all the routes that share it.
        """
        if exc.status_code in (404, 405):
            declared = request.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > self._max_body_bytes:
                return await on_problem(request, _too_large(self._max_body_bytes))
            try:
                self.authenticate(request)
            except Problem as refused:
                return await on_problem(request, refused)
        if exc.status_code == 405:
            allowed = {
                method
                for route in request.app.router.routes
                if route.matches(request.scope)[0] is not Match.NONE
                for method in route.methods or ()
            }
            exc = HTTPException(405, headers={"Allow": ", ".join(sorted(allowed))})
        return await on_http(request, exc)


async def _chunked_body(request: Request, limit: int) -> bytes:
    """A body sent without a length, counted as it arrives (413 once it passes `limit`)."""
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(limit: int) -> Problem:
    return Problem("payload_too_large", f"request bodies are limited to {limit} bytes")


def session_of(task: Task) -> Session:
    """The session a task runs (a plan's task: 409 `not_a_session`)."""
    if task.session is None:
        raise Problem("not_a_session", f"task {task.id!r} runs a plan; it has no actions")
    return task.session


def action_of(task: Task, action_id: str) -> Action:
    action = None if task.session is None else task.session.action(action_id)
    if action is None:
        raise not_found(f"task {task.id!r} has no action {action_id!r}")
    return action


def message_of(task: Task, message_id: str) -> Message:
    message = task.message(message_id)
    if message is None:
        raise not_found(f"task {task.id!r} has no message {message_id!r}")
    return message
