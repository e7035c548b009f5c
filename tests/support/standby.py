"""A stand-in for a standby server, for the tests of clients that follow the leader.

specs/protocol.md "High availability": a standby answers `GET /v1/health` with 503
`{"status": "standby"}` and every other request with 503 `not_leader` and `Retry-After`. The
real standbys are `amc serve` processes on a shared PostgreSQL store (issue 17, built on
another branch); until they land, this small Starlette app on a real uvicorn socket answers
exactly that contract, and nothing else, so the Host Agent's and the CLI's side can be tested
now. When the real standby exists, tests may use it instead; they must pass unchanged.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from amc.adapters.http.server import ThreadedServer

RETRY_AFTER = "1"
METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


class Standby:
    """A standby on a real socket: `port` 0 takes a free one. `requests` lists what it refused."""

    def __init__(self, port: int = 0):
        self.requests: list[tuple[str, str]] = []
        self._threaded = ThreadedServer(
            Starlette(routes=[Route("/{path:path}", self._answer, methods=METHODS)]), port=port
        ).start()
        self.port = self._threaded.port
        self.url = self._threaded.url

    async def _answer(self, request: Request) -> Response:
        self.requests.append((request.method, request.url.path))
        if request.method == "GET" and request.url.path == "/v1/health":
            return JSONResponse({"status": "standby"}, status_code=503)
        problem = {
            "type": "urn:amc:problem:not_leader",
            "title": "Not the leader",
            "status": 503,
            "detail": "this server is a standby; send the request to the leader",
            "code": "not_leader",
        }
        return JSONResponse(
            problem, status_code=503, headers={"Retry-After": RETRY_AFTER}, media_type="application/problem+json"
        )

    def refused(self, method: str, prefix: str = "") -> int:
        """How many `method` requests under `prefix` this standby refused."""
        return sum(1 for m, path in self.requests if m == method and path.startswith(prefix))

    def stop(self) -> None:
        self._threaded.stop()
