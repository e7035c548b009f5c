"""Attempts, the Host Agent's side: a claim (long-polling until work comes), then the
attempt's start, lease renewals, result or release, and its acknowledgements of messages
(specs/protocol.md Parts A and B).

A start and a renewal are the hot path of a server: each is one decision of the kernel
and reads no record unless its body is bad (`Scope.lease_request`).
"""

from __future__ import annotations

import asyncio
import functools
import secrets

from starlette.requests import Request
from starlette.responses import Response

from amc.adapters.http import access, bodies, wire
from amc.adapters.http.liveness import Progress
from amc.adapters.http.routes import Resource
from amc.adapters.http.scope import message_of
from amc.adapters.http.wire import json_response
from amc.core.commands import AcknowledgeMessage, ClaimTask, ReleaseAttempt, RenewLease, ReportResult, StartAttempt
from amc.core.decisions import AcknowledgementRecorded, Assignment, LeaseGranted, ReleaseRecorded, ResultRecorded
from amc.core.lifecycle import MessageState, TaskStatus
from amc.core.records import Boundary

# What a claim looks for: its host, its device filter, and whether it takes sessions.
ClaimKind = tuple[str, tuple[str, ...] | None, bool]


def new_lease_id() -> str:
    return "l_" + secrets.token_hex(16)


class Attempts(Resource):
    async def claim(self, request: Request) -> Response:
        principal, raw = await self.scope.begin(request)
        host_id = request.path_params["host_id"]
        access.require_host(principal, host_id)
        body, lease_ms = bodies.decode_claim(raw, self.context.settings)
        devices = None if body.devices is None else tuple(body.devices)
        signal, claim_waits = self.context.signal, self.context.claim_waits
        loop = asyncio.get_running_loop()
        deadline = loop.time() + body.wait_seconds
        kind = (host_id, devices, body.sessions)  # claims of one kind find the same work (see longpoll)
        reply, _ = await self._claim_once(kind, lease_ms)
        if reply is not None:
            return reply
        if body.wait_seconds <= 0 or signal.closed:
            return Response(status_code=204)
        if not claim_waits.enter(host_id):
            # Too many claims wait already: this one waits out its time unwoken, and claims
            # once more at its end (a flood of them costs a sleep each).
            await signal.sleep(deadline - loop.time())
            if await request.is_disconnected():
                return Response(status_code=204)
            reply, _ = await self._claim_once(kind, lease_ms)
            return reply or Response(status_code=204)
        try:
            async with signal.first_of(kind, deadline - loop.time()) as first:
                if not first:  # its time ran out behind the others of its kind
                    return Response(status_code=204)
                if await request.is_disconnected():  # gone while in line: take nothing for it
                    return Response(status_code=204)
                while True:
                    reply, generation = await self._claim_once(kind, lease_ms)  # work may have come meanwhile
                    if reply is not None:
                        return reply
                    remaining = deadline - loop.time()
                    if remaining <= 0 or signal.closed:
                        return Response(status_code=204)
                    await signal.wait(generation, remaining)
                    if await request.is_disconnected():  # nobody would read an assignment now
                        return Response(status_code=204)
        finally:
            claim_waits.leave(host_id)

    async def _claim_once(self, kind: ClaimKind, lease_ms: int) -> tuple[Response | None, int]:
        """One claim of `kind`: the assignment's response, or None; and the generation read
        before it (see longpoll). A kind known to find nothing is not asked."""
        signal = self.context.signal
        generation = signal.generation
        if signal.known_empty(kind):
            return None, generation
        host_id, devices, sessions = kind
        command = ClaimTask(
            now=0, host_id=host_id, lease_id=new_lease_id(), lease_ms=lease_ms, devices=devices, sessions=sessions
        )
        reply = await self.scope.decide(command, object)  # an Assignment or a NoAssignment
        if isinstance(reply, Assignment):
            return json_response(wire.assignment_view(reply)), generation
        signal.found_nothing(kind, generation)
        return None, generation

    async def start(self, request: Request) -> Response:
        return await self._grant(request, StartAttempt)

    async def renew(self, request: Request) -> Response:
        return await self._grant(request, RenewLease)

    async def _grant(self, request: Request, kind: type[StartAttempt] | type[RenewLease]) -> Response:
        """A start or a renewal: the kernel checks the lease and the reported step; the
        progress itself is kept here once the lease is granted."""
        principal, body, task_id, number = await self.scope.lease_request(request, bodies.decode_lease)
        progress = body.progress
        command = kind(
            now=0,
            host_id=principal.host,
            task_id=task_id,
            attempt=number,
            lease_id=body.lease_id,
            progress_step=progress.step if progress is not None else None,
        )
        granted = await self.scope.decide(command, LeaseGranted)
        if progress is not None:
            self.context.progress.record(task_id, number, Progress(step=progress.step, ended=progress.ended))
        return json_response(wire.lease_view(granted))

    async def result(self, request: Request) -> Response:
        decode = functools.partial(bodies.decode_result, limits=self.context.settings.limits)
        principal, (body, steps), task_id, number = await self.scope.lease_request(request, decode)
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
        await self.scope.decide(command, ResultRecorded)
        return json_response(self.context.views.task(self.scope.existing_task(task_id)))

    async def release(self, request: Request) -> Response:
        decode = functools.partial(bodies.decode_release, limits=self.context.settings.limits)
        principal, (body, steps), task_id, number = await self.scope.lease_request(request, decode)
        command = ReleaseAttempt(
            now=0,
            host_id=principal.host,
            task_id=task_id,
            attempt=number,
            lease_id=body.lease_id,
            reason=body.reason,
            steps=steps,
        )
        await self.scope.decide(command, ReleaseRecorded)
        return json_response(self.context.views.task(self.scope.existing_task(task_id)))

    async def acknowledge(self, request: Request) -> Response:
        principal, raw = await self.scope.begin(request, access.HOST)
        task, task_id, number = self.scope.attempt_target(request)  # the message must exist too (404)
        message_id = message_of(task, request.path_params["message_id"]).id
        body = bodies.decode_acknowledgement(raw, self.context.settings.limits)
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
        await self.scope.decide(command, AcknowledgementRecorded)
        return json_response(wire.message_view(message_of(self.scope.existing_task(task_id), message_id)))
