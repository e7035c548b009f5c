"""The event stream (specs/protocol.md Part E): `GET /v1/events`, every committed change a
client's tenant (or, for an admin, anyone) may see, as server-sent events (`eventstream`)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from amc.adapters.http import access
from amc.adapters.http.eventstream import EventStreamResponse
from amc.adapters.http.routes import Resource


class Events(Resource):
    async def stream_events(self, request: Request) -> Response:
        principal, _ = await self.scope.begin(request, access.CLIENT_OR_ADMIN)
        last = request.headers.get("last-event-id") or request.query_params.get("last_event_id")
        return EventStreamResponse(self.context.events.subscribe(principal.scope, last))
