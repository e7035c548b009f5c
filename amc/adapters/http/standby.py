"""The standby gate: a server that does not lead answers every request with 503.

With a store shared by several servers (`amc serve --store postgresql://...`) exactly one
of them leads; the others are standbys. A standby holds no state and must not answer from
what it last saw, so this ASGI middleware answers before any route runs (specs/protocol.md,
High availability): `GET /v1/health` is 503 `{"status": "standby"}`, so a load balancer
that checks it sends traffic to the leader only, and every other request is 503
`not_leader` with `Retry-After`. The app puts the gate only in front of a service that
`may_stand_by`: the others always lead.

`GET /metrics` is let through: a scraper asks every server, and a standby's `amc_leader`
reads 0 (LEADER/s2).
"""

from __future__ import annotations

import orjson
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from amc.adapters.http.problems import not_leader_response
from amc.service import Service

HEALTH_PATH = "/v1/health"
METRICS_PATH = "/metrics"


class StandbyGate:
    def __init__(self, app: ASGIApp, service: Service):
        self.app = app
        self.service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.service.leading or _metrics(scope):
            await self.app(scope, receive, send)
            return
        if scope["path"] == HEALTH_PATH and scope["method"] in ("GET", "HEAD"):
            response = Response(orjson.dumps({"status": "standby"}), status_code=503, media_type="application/json")
        else:
            response = not_leader_response("this server is a standby; send the request to the leader")
        await response(scope, receive, send)


def _metrics(scope: Scope) -> bool:
    return scope["path"] == METRICS_PATH and scope["method"] in ("GET", "HEAD")
