"""Sessions (specs/protocol.md Part D): a client posts actions one at a time and may wait
for each to end; the host holding the session polls for the next action and reports how
each ended; either side's long wait wakes on the task's next event (`TaskSignals`)."""

from __future__ import annotations

import asyncio
import functools

from starlette.requests import Request
from starlette.responses import Response

from amc.adapters.http import access, bodies, wire
from amc.adapters.http.routes import Resource
from amc.adapters.http.routes.inputs import check_references, step_references
from amc.adapters.http.scope import action_of, session_of
from amc.adapters.http.wire import json_response
from amc.core.commands import EndSession, PollAction, PostAction, ReportAction
from amc.core.decisions import ActionAccepted, ActionRecorded, PollAnswer, SessionEndAccepted
from amc.core.records import Action


class Sessions(Resource):
    # -- the client's side ------------------------------------------------------------------

    async def post_action(self, request: Request) -> Response:
        principal, raw = await self.scope.begin(request, access.CLIENT_OR_ADMIN)
        task = self.scope.named_task(principal, request)
        task_id = task.id
        limits = self.context.settings.limits
        wait = bodies.decode_wait(request.query_params, limits)
        step = bodies.decode_action(raw, limits)
        await check_references(self.context.inputs, task.tenant, step_references([step]))
        command = PostAction(now=0, task_id=task_id, tenant=principal.scope, step=step)
        reply = await self.scope.decide(command, ActionAccepted)
        action = await self._action_when_ended(task_id, reply.action_id, wait)
        location = f"/v1/tasks/{task_id}/actions/{action.id}"
        return json_response(wire.action_view(action), 201 if reply.created else 200, headers={"Location": location})

    # A session is read by whoever may read its task (a plan's task: 409 `not_a_session`).

    async def list_actions(self, request: Request) -> Response:
        session = session_of(await self.scope.readable_task(request))
        return json_response({"actions": [wire.action_view(a) for a in session.actions]})

    async def get_action(self, request: Request) -> Response:
        task = await self.scope.readable_task(request)
        session_of(task)
        action_id = request.path_params["action_id"]
        action_of(task, action_id)
        wait = bodies.decode_wait(request.query_params, self.context.settings.limits)
        return json_response(wire.action_view(await self._action_when_ended(task.id, action_id, wait)))

    async def end_session(self, request: Request) -> Response:
        principal, raw = await self.scope.begin(request, access.CLIENT_OR_ADMIN)
        task_id = self.scope.named_task(principal, request).id
        bodies.decode_end(raw)
        await self.scope.decide(EndSession(now=0, task_id=task_id, tenant=principal.scope), SessionEndAccepted)
        return json_response(self.context.views.task(self.scope.existing_task(task_id)))

    async def _action_when_ended(self, task_id: str, action_id: str, wait: float) -> Action:
        """The action as it stands once it ended, or when `wait` seconds have passed."""
        signals = self.context.task_signals
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        while True:
            event = signals.watch(task_id)  # before the read: see TaskSignals
            await self.scope.catch_up()
            action = action_of(self.scope.existing_task(task_id), action_id)
            remaining = deadline - loop.time()
            if action.final or remaining <= 0 or signals.closed:
                return action
            await signals.wait(event, min(remaining, self._next_deadline_in()))

    def _next_deadline_in(self) -> float:
        """Seconds until the next lease expiry or idle end (which the timer applies), at least 1 ms."""
        service = self.context.service
        due = service.next_expiry()
        if due is None:
            return 3600.0
        return max((due - service.clock.now()) / 1000, 0.001)

    # -- the host's side --------------------------------------------------------------------

    async def poll_action(self, request: Request) -> Response:
        decode = functools.partial(bodies.decode_poll, limits=self.context.settings.limits)
        principal, body, task_id, number = await self.scope.lease_request(request, decode)
        signals = self.context.task_signals
        loop = asyncio.get_running_loop()
        deadline = loop.time() + body.wait_seconds
        while True:
            event = signals.watch(task_id)  # before deciding: see TaskSignals
            command = PollAction(
                now=0,
                host_id=principal.host,
                task_id=task_id,
                attempt=number,
                lease_id=body.lease_id,
                running=body.running,
            )
            reply = await self.scope.decide(command, PollAnswer)
            remaining = deadline - loop.time()
            nothing = reply.action_id is None and not reply.cancel_requested
            if not nothing or remaining <= 0 or signals.closed:
                return json_response(wire.poll_view(reply, self.scope.existing_task(task_id)))
            await signals.wait(event, min(remaining, self._next_deadline_in()))
            if await request.is_disconnected():
                return json_response(wire.poll_view(reply, self.scope.existing_task(task_id)))

    async def report_action(self, request: Request) -> Response:
        principal, raw = await self.scope.begin(request, access.HOST)
        task, task_id, number = self.scope.attempt_target(request)
        session_of(task)
        action_id = action_of(task, request.path_params["action_id"]).id
        body, outcome = bodies.decode_action_report(raw, self.context.settings.limits, action_id)
        command = ReportAction(
            now=0, host_id=principal.host, task_id=task_id, attempt=number, lease_id=body.lease_id, outcome=outcome
        )
        await self.scope.decide(command, ActionRecorded)
        return json_response(wire.action_view(action_of(self.scope.existing_task(task_id), action_id)))
