"""The ASGI application: specs/protocol.md's endpoints over a `Service`, composed.

The pieces, each in its own module: the server's shared parts (`context`); the checks
every request begins with and the kernel's answer (`scope`); the endpoints by resource
(`routes`); errors as problem documents (`problems`); and a standby's refusal of every
request (`standby`). This module only puts them together: the route table, in the order
Starlette tries it, and the app's start and stop.

Around the commands the app keeps time moving (`timer`), wakes long-polling claims
(`longpoll`), counts what happens (`metrics`) and streams every committed change to the
readers of `GET /v1/events` (`eventstream`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.convertors import Convertor, register_url_convertor
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from amc.adapters.http.auth import Authenticator
from amc.adapters.http.context import Context
from amc.adapters.http.metrics import Metrics
from amc.adapters.http.problems import EXCEPTION_HANDLERS
from amc.adapters.http.routes.admin import Admin
from amc.adapters.http.routes.artifacts import Artifacts
from amc.adapters.http.routes.attempts import Attempts
from amc.adapters.http.routes.console import Console
from amc.adapters.http.routes.events import Events
from amc.adapters.http.routes.hosts import Hosts
from amc.adapters.http.routes.inputs import Inputs
from amc.adapters.http.routes.sessions import Sessions
from amc.adapters.http.routes.tasks import Tasks
from amc.adapters.http.scope import Scope
from amc.adapters.http.settings import Settings
from amc.adapters.http.standby import StandbyGate
from amc.service import BlobStore, InputCatalogue, MemoryBlobStore, MemoryInputCatalogue, Service


class AttemptNumber(Convertor[int]):
    """An attempt number in a path, written canonically: ``1``, ``2``, ... (no sign, no leading
    zero). Any other spelling (``01``, ``+1``) names no attempt, so no route matches it: 404."""

    regex = "[1-9][0-9]{0,17}"

    def convert(self, value: str) -> int:
        return int(value)

    def to_string(self, value: int) -> str:
        return str(value)


register_url_convertor("attempt", AttemptNumber())

ATTEMPT = "/v1/tasks/{task_id}/attempts/{attempt:attempt}"  # the path of an attempt, below which a host acts


def routes(context: Context, scope: Scope) -> list[BaseRoute]:
    """Every route of the API, then the console's."""
    tasks, hosts, attempts = Tasks(context, scope), Hosts(context, scope), Attempts(context, scope)
    sessions, artifacts = Sessions(context, scope), Artifacts(context, scope)
    events, admin, inputs = Events(context, scope), Admin(context, scope), Inputs(context, scope)
    # Starlette tries routes in order; the Host Agents' hot path (renew, start, claim)
    # comes first, so a renewal is matched after one regex rather than nine.
    return [
        Route(ATTEMPT + "/renew", attempts.renew, methods=["POST"]),
        Route(ATTEMPT + "/start", attempts.start, methods=["POST"]),
        Route("/v1/hosts/{host_id}/claim", attempts.claim, methods=["POST"]),
        Route(ATTEMPT + "/actions/next", sessions.poll_action, methods=["POST"]),
        Route(ATTEMPT + "/actions/{action_id}", sessions.report_action, methods=["POST"]),
        Route(ATTEMPT + "/result", attempts.result, methods=["POST"]),
        Route(ATTEMPT + "/release", attempts.release, methods=["POST"]),
        Route(ATTEMPT + "/messages/{message_id}", attempts.acknowledge, methods=["POST"]),
        Route(ATTEMPT + "/artifacts/{name:path}", artifacts.upload, methods=["PUT"]),
        Route("/v1/tasks/{task_id}/artifacts", artifacts.list_artifacts, methods=["GET"]),
        Route("/v1/tasks/{task_id}/artifacts/{artifact_id}", artifacts.download, methods=["GET"]),
        Route("/v1/tasks", tasks.submit, methods=["POST"]),
        Route("/v1/tasks", tasks.list_tasks, methods=["GET"]),
        Route("/v1/tasks/{task_id}", tasks.get_task, methods=["GET"]),
        Route("/v1/tasks/{task_id}/history", tasks.history, methods=["GET"]),
        Route("/v1/tasks/{task_id}/cancel", tasks.cancel, methods=["POST"]),
        Route("/v1/tasks/{task_id}/messages", tasks.post_message, methods=["POST"]),
        Route("/v1/tasks/{task_id}/messages", tasks.list_messages, methods=["GET"]),
        Route("/v1/tasks/{task_id}/messages/{message_id}", tasks.get_message, methods=["GET"]),
        Route("/v1/tasks/{task_id}/actions", sessions.post_action, methods=["POST"]),
        Route("/v1/tasks/{task_id}/actions", sessions.list_actions, methods=["GET"]),
        Route("/v1/tasks/{task_id}/actions/{action_id}", sessions.get_action, methods=["GET"]),
        Route("/v1/tasks/{task_id}/end", sessions.end_session, methods=["POST"]),
        Route("/v1/hosts", hosts.list_hosts, methods=["GET"]),
        Route("/v1/hosts/{host_id}", hosts.get_host, methods=["GET"]),
        Route("/v1/hosts/{host_id}", hosts.put_host, methods=["PUT"]),
        Route("/v1/events", events.stream_events, methods=["GET"]),
        Route("/v1/inputs", inputs.post_input, methods=["POST"]),
        Route("/v1/inputs", inputs.list_inputs, methods=["GET"]),
        Route("/v1/inputs/{sha256}", inputs.put_input, methods=["PUT"]),
        Route("/v1/inputs/{sha256}", inputs.download, methods=["GET"]),
        Route("/v1/health", admin.health, methods=["GET"]),
        Route("/metrics", admin.metrics_text, methods=["GET"]),
        # Always routed: a non-admin is refused (403) before anyone learns the clock's kind.
        Route("/v1/admin/clock", admin.advance_clock, methods=["POST"]),
        # The web console's static files, last: no request of the API is matched against them.
        *Console().routes(),
    ]


def create_app(
    service: Service,
    settings: Settings | None = None,
    *,
    tokens: Authenticator,
    metrics: Metrics | None = None,
    close_service: bool = False,
    blobs: BlobStore | None = None,
    inputs: InputCatalogue | None = None,
) -> Starlette:
    """The ASGI app serving `service`.

    Args:
        service: the store the commands go to.
        settings: lease bounds, the clock kind and the body limits.
        tokens: the bearer tokens that may call it.
        metrics: where to count (give the one whose `on_commit` the store reports to).
        close_service: close the service when the app shuts down (`amc serve` does).
        blobs: where artifacts' and inputs' bytes go (default: a `MemoryBlobStore`, beside a memory service).
        inputs: which tenant has which input (default: a `MemoryInputCatalogue`).
    Returns:
        A Starlette app; ``app.state.context`` is its `Context`, ``app.state.redact`` blanks its
        tokens out of a text.
    """
    settings = settings or Settings()
    metrics = metrics or Metrics()
    metrics.bind(service)
    context = Context(
        service,
        settings,
        tokens,
        metrics,
        blobs if blobs is not None else MemoryBlobStore(),
        inputs if inputs is not None else MemoryInputCatalogue(),
    )
    metrics.bind_runtime(lambda: context.events.subscribers)
    scope = Scope(context)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        context.timer.start()
        stop_watching = service.watch(context.events.listener(asyncio.get_running_loop()))
        liveness = asyncio.create_task(
            context.events.watch_liveness(context.liveness.known, service.host), name="amc-event-liveness"
        )
        try:
            yield
        finally:
            context.drain()
            stop_watching()
            liveness.cancel()
            await context.timer.stop()
            if close_service:
                await service.aclose()

    handlers: dict[Any, Callable[[Request, Any], Awaitable[Response]]] = {
        **EXCEPTION_HANDLERS,
        HTTPException: scope.unrouted,  # authentication before routing: see `Scope.unrouted`
    }
    # A service shared with other servers may be a standby: then every request is 503 (standby.py).
    middleware = [Middleware(StandbyGate, service=service)] if service.may_stand_by else []
    app = Starlette(
        routes=routes(context, scope), exception_handlers=handlers, lifespan=lifespan, middleware=middleware
    )
    app.state.context = context
    app.state.redact = tokens.redact  # problems.py keeps tokens out of error details with it
    return app
