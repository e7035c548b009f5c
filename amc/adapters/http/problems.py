"""Errors as RFC 9457 problem documents, with the protocol's machine-readable `code`.

Every refusal leaves the edge as ``application/problem+json``::

    {"type": "urn:amc:problem:<code>", "title": ..., "status": ..., "detail": ..., "code": <code>}

Kernel rejections (`amc.core.errors.Rejection`) and edge refusals (`Problem`) go through
the same function, and one exception-handler map (`EXCEPTION_HANDLERS`) turns anything
raised in an endpoint into a problem: unknown routes and methods included, and a bug
becomes a bare 500 `internal` with no stack trace in the body.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import orjson
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from amc.core.errors import InvalidRequest
from amc.service import NotLeader, StorageUnavailable

log = logging.getLogger("amc.http")

MEDIA_TYPE = "application/problem+json"

# code -> (status, title). The kernel's codes carry their status too (`Code.http_status`);
# this table adds the edge's own and gives every code a stable title.
CODES: dict[str, tuple[int, str]] = {
    "invalid_request": (400, "Invalid request"),
    "unauthorized": (401, "Unauthorized"),
    "forbidden": (403, "Forbidden"),
    "not_found": (404, "Not found"),
    "method_not_allowed": (405, "Method not allowed"),
    "payload_too_large": (413, "Payload too large"),
    "internal": (500, "Internal error"),
    "idempotency_conflict": (409, "Idempotency key reused with a different body"),
    "task_terminal": (409, "Task already ended"),
    "lease_foreign": (409, "Lease belongs to another host"),
    "lease_unknown": (409, "Unknown lease"),
    "lease_replaced": (409, "Lease replaced by a newer attempt"),
    "lease_ended": (409, "Attempt already ended"),
    "lease_expired": (409, "Lease expired"),
    "result_conflict": (409, "A different result was already recorded"),
    "no_cancellation_requested": (409, "No cancellation was requested"),
    "message_conflict": (409, "Message state conflict"),
    "artifact_conflict": (409, "An artifact of this name holds other bytes"),
    "not_leader": (503, "This server is a standby"),
    "storage_unavailable": (503, "Storage unavailable"),
}

# Seconds a client is asked to wait before it retries a write the store could not take. Space
# comes back when an operator frees it, not within a request's time: a few seconds is enough
# to keep retries from hammering a full disk, and short enough to resume soon after.
STORAGE_RETRY_AFTER_SECONDS = 5


class Problem(Exception):
    """A refusal decided at the edge (authentication, authorization, a malformed body...)."""

    def __init__(self, code: str, detail: str):
        super().__init__(detail)
        self.code = code
        self.detail = detail

    @property
    def status(self) -> int:
        return CODES[self.code][0]


def unauthorized() -> Problem:
    return Problem("unauthorized", "a valid bearer token is required")


def forbidden(detail: str) -> Problem:
    return Problem("forbidden", detail)


def not_found(detail: str) -> Problem:
    return Problem("not_found", detail)


def invalid(detail: str) -> Problem:
    return Problem("invalid_request", detail)


def problem_response(
    code: str, detail: str, status: int | None = None, headers: Mapping[str, str] | None = None
) -> Response:
    status = status or CODES[code][0]
    body = {
        "type": f"urn:amc:problem:{code}",
        "title": CODES.get(code, (status, code))[1],
        "status": status,
        "detail": detail,
        "code": code,
    }
    return Response(orjson.dumps(body), status_code=status, media_type=MEDIA_TYPE, headers=headers)


def _shown(request: Request, text: str) -> str:
    """`text` without the server's tokens: a detail echoes paths and values the caller sent,
    and a token pasted into one of them is still never written back (`Authenticator.redact`)."""
    redact = getattr(request.app.state, "redact", None)
    return text if redact is None else redact(text)


async def on_problem(request: Request, exc: Problem) -> Response:
    headers = {"WWW-Authenticate": 'Bearer realm="amc"'} if exc.code == "unauthorized" else None
    return problem_response(exc.code, _shown(request, exc.detail), headers=headers)


async def _on_invalid(request: Request, exc: InvalidRequest) -> Response:
    return problem_response("invalid_request", _shown(request, exc.detail))


async def on_http(request: Request, exc: HTTPException) -> Response:
    # Starlette raises these for unknown paths (404) and methods a route lacks (405).
    if exc.status_code == 405:
        return problem_response(
            "method_not_allowed",
            _shown(request, f"{request.method} is not allowed on {request.url.path}"),
            headers=exc.headers,
        )
    if exc.status_code == 404:
        return problem_response("not_found", _shown(request, f"no resource at {request.url.path}"))
    code = {400: "invalid_request", 401: "unauthorized", 403: "forbidden", 413: "payload_too_large"}.get(
        exc.status_code, "internal"
    )
    return problem_response(code, _shown(request, str(exc.detail)), exc.status_code)


# How long a caller of a standby waits before it tries again (`Retry-After`, seconds): a
# takeover takes about a second (specs/design.md, PostgreSQL).
STANDBY_RETRY_AFTER_S = 1


def not_leader_response(detail: str) -> Response:
    return problem_response("not_leader", detail, headers={"Retry-After": str(STANDBY_RETRY_AFTER_S)})


async def _on_not_leader(request: Request, exc: NotLeader) -> Response:
    # The server stopped leading while the command waited: the caller tries the leader.
    return not_leader_response(str(exc) or "this server is not the leader")


async def _on_storage_unavailable(request: Request, exc: StorageUnavailable) -> Response:
    # The reason (a path, an errno) is for the operator's log, where the store wrote it.
    log.warning("%s %s: storage unavailable: %s", request.method, _shown(request, request.url.path), exc)
    return problem_response(
        "storage_unavailable",
        "the server cannot store writes now (its disk is full or failing); nothing of this request "
        "was applied; retry later",
        headers={"Retry-After": str(STORAGE_RETRY_AFTER_SECONDS)},
    )


async def _on_bug(request: Request, exc: Exception) -> Response:
    # A bug, never bad input: log it (with the path, never the headers) and say nothing more.
    log.error("internal error on %s %s", request.method, _shown(request, request.url.path), exc_info=exc)
    return problem_response("internal", "internal error")


# Each handler takes its own exception type; Starlette picks it by the exception's class.
EXCEPTION_HANDLERS: dict[Any, Callable[[Request, Any], Awaitable[Response]]] = {
    Problem: on_problem,
    InvalidRequest: _on_invalid,
    NotLeader: _on_not_leader,
    HTTPException: on_http,
    StorageUnavailable: _on_storage_unavailable,
    Exception: _on_bug,
}
