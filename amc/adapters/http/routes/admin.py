"""What an operator asks of a server: whether it is up (open), its metrics (open, for a
scraper), and, on a server started with a manual clock, moving that clock (an admin)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from amc.adapters.http import access, bodies
from amc.adapters.http.metrics import CONTENT_TYPE
from amc.adapters.http.problems import Problem, not_found
from amc.adapters.http.routes import Resource
from amc.adapters.http.wire import json_response
from amc.core.times import to_rfc3339
from amc.service import NoManualClock


class Admin(Resource):
    async def health(self, request: Request) -> Response:
        return json_response({"status": "ok"})

    async def metrics_text(self, request: Request) -> Response:
        if self.context.service.leading:  # a standby's metrics (amc_leader 0) pass the standby gate
            await self.scope.catch_up()
        return Response(self.context.metrics.exposition(), media_type=CONTENT_TYPE)

    async def advance_clock(self, request: Request) -> Response:
        _, raw = await self.scope.begin(request, access.ADMIN)  # 403 for anyone else, whatever the clock
        context = self.context
        if not context.settings.manual_clock:
            raise _no_manual_clock()
        ms = bodies.decode_clock(raw, context.settings.limits)
        try:
            now = await context.service.advance_clock(ms)
        except NoManualClock:
            raise _no_manual_clock() from None
        # Expiries may have freed devices and requeued tasks, and moved the earliest expiry.
        context.signal.notify()
        context.timer.poke()
        return json_response({"now": to_rfc3339(now)})


def _no_manual_clock() -> Problem:
    return not_found("this server does not run a manual clock")
