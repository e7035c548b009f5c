"""Tasks, the clients' side: submit, read, list, read the history of, cancel, and message
(specs/protocol.md Parts A and B)."""

from __future__ import annotations

import secrets

from starlette.requests import Request
from starlette.responses import Response

from amc.adapters.http import access, bodies, wire
from amc.adapters.http.problems import invalid
from amc.adapters.http.routes import Resource
from amc.adapters.http.routes.inputs import check_references, data_references, step_references
from amc.adapters.http.scope import message_of
from amc.adapters.http.views import WaitingKey
from amc.adapters.http.wire import json_response
from amc.core.commands import CancelTask, PostMessage, SubmitTask
from amc.core.decisions import CancelAccepted, MessageAccepted, Submitted
from amc.core.lifecycle import TaskStatus
from amc.core.records import Requirements
from amc.core.waiting import Waiting
from amc.service import TaskQuery


def new_task_id() -> str:
    return "t_" + secrets.token_hex(10)


def new_message_id() -> str:
    return "m_" + secrets.token_hex(10)


class Tasks(Resource):
    async def submit(self, request: Request) -> Response:
        principal, raw = await self.scope.begin(request, access.CLIENT_OR_ADMIN)
        limits = self.context.settings.limits
        body, plan = bodies.decode_submit(raw, limits, may_name_tenant=principal.role == "admin")
        idle_ms = bodies.session_idle_ms(body)
        tenant = principal.tenant if principal.role == "client" else (body.tenant or "default")
        assert tenant is not None  # a client token always names its tenant
        await check_references(self.context.inputs, tenant, step_references(plan.all_steps()))
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
        reply = await self.scope.decide(command, Submitted)
        task = self.scope.existing_task(reply.task_id)
        status = 201 if reply.created else 200
        return json_response(self.context.views.task(task), status, headers={"Location": f"/v1/tasks/{task.id}"})

    async def get_task(self, request: Request) -> Response:
        task = await self.scope.readable_task(request)
        return json_response(self.context.views.task(task))

    async def list_tasks(self, request: Request) -> Response:
        principal, _ = await self.scope.begin(request, access.CLIENT_OR_ADMIN)
        query = bodies.decode_list_query(request.query_params, self.context.settings.limits)
        await self.scope.catch_up()
        service = self.context.service
        try:
            page = service.tasks(
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
        hosts = service.hosts() if any(t.status == TaskStatus.queued for t in page.tasks) else []
        reasons: dict[WaitingKey, Waiting | None] = {}
        views = self.context.views
        return json_response({"tasks": [views.task(t, hosts, reasons) for t in page.tasks], "next": page.next})

    async def history(self, request: Request) -> Response:
        task = await self.scope.readable_task(request, access.CLIENT_OR_ADMIN)
        return json_response(wire.history_view(self.context.service.history(task.id)))

    async def cancel(self, request: Request) -> Response:
        principal, raw = await self.scope.begin(request, access.CLIENT_OR_ADMIN)
        task_id = self.scope.named_task(principal, request).id
        body = bodies.decode_cancel(raw, self.context.settings.limits)
        command = CancelTask(now=0, task_id=task_id, tenant=principal.scope, reason=body.reason)
        reply = await self.scope.decide(command, CancelAccepted)
        return json_response(self.context.views.task(self.scope.existing_task(task_id)), 202 if reply.pending else 200)

    # -- messages (Part B) ------------------------------------------------------------------

    async def post_message(self, request: Request) -> Response:
        principal, raw = await self.scope.begin(request, access.CLIENT_OR_ADMIN)
        task = self.scope.named_task(principal, request)
        task_id = task.id
        message_id = new_message_id()
        body = bodies.decode_message(raw, self.context.settings.limits, message_id)
        if body.data:  # a steer's steps may name inputs, as a plan's do
            await check_references(self.context.inputs, task.tenant, data_references(body.data))
        command = PostMessage(
            now=0,
            task_id=task_id,
            tenant=principal.scope,
            message_id=message_id,
            intent=body.intent,
            text=body.text,
            data=body.data,
        )
        reply = await self.scope.decide(command, MessageAccepted)
        message = message_of(self.scope.existing_task(task_id), reply.message_id)
        location = f"/v1/tasks/{task_id}/messages/{message.id}"
        return json_response(wire.message_view(message), 201, headers={"Location": location})

    # A task's messages are read by a client of its tenant or an admin (like its history).

    async def list_messages(self, request: Request) -> Response:
        task = await self.scope.readable_task(request, access.CLIENT_OR_ADMIN)
        return json_response({"messages": [wire.message_view(m) for m in task.messages]})

    async def get_message(self, request: Request) -> Response:
        task = await self.scope.readable_task(request, access.CLIENT_OR_ADMIN)
        return json_response(wire.message_view(message_of(task, request.path_params["message_id"])))
