"""The OpenAPI check of a conformance run (`amc.conformance.openapi_check`) catches what it must.

The check validates real exchanges with openapi-core against specs/openapi.yaml; here it is
fed exchanges that break the document in one way each (a wrong shape, an undocumented
status, a request the server should have refused, a wrong answer to an unknown path or
method), and the exchanges of a conformance `Connection` with our own app, which must pass.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from amc.adapters.http.app import create_app
from amc.adapters.http.auth import Principal, TokenTable
from amc.adapters.http.server import ThreadedServer
from amc.adapters.http.settings import Settings
from amc.conformance.client import PLAN, Connection
from amc.conformance.openapi_check import UNKNOWN_PATH, OpenAPICheck
from amc.service import MemoryService

SPEC = Path(__file__).resolve().parents[2] / "specs" / "openapi.yaml"
BASE = "http://127.0.0.1:8000"
TIME = "2026-11-29T23:00:00.000Z"
PROBLEM = "application/problem+json"


@pytest.fixture
def check() -> OpenAPICheck:
    return OpenAPICheck(SPEC)


def exchange(
    check: OpenAPICheck,
    method: str,
    path: str,
    status: int,
    answer=None,
    *,
    sent=None,
    token: str | None = "tok",
    media: str = "application/json",
    headers: dict | None = None,
) -> list[str]:
    """Show `check` one request and its response; the mismatches this exchange added."""
    before = set(check.mismatch_lines())
    request_headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    content = None
    if sent is not None:
        content = json.dumps(sent).encode()
        request_headers["Content-Type"] = "application/json"
    request = httpx.Request(method, BASE + path, content=content, headers=request_headers)
    body = b"" if answer is None else json.dumps(answer).encode()
    response_headers = {**({"Content-Type": media} if answer is not None else {}), **(headers or {})}
    response = httpx.Response(status, content=body, headers=response_headers, request=request)
    check.observe(request, response)
    return [line for line in check.mismatch_lines() if line not in before]


def problem(status: int, code: str) -> dict:
    return {"type": f"urn:amc:problem:{code}", "title": code, "status": status, "detail": "why", "code": code}


# ---------------------------------------------------------------------------------------
# What the check must catch


def test_a_list_of_hosts_is_an_object_not_a_bare_list(check):
    assert exchange(check, "GET", "/v1/hosts", 200, {"hosts": []}) == []
    [mismatch] = exchange(check, "GET", "/v1/hosts", 200, [])
    assert mismatch.startswith("GET /v1/hosts -> 200: response:"), mismatch
    assert check.validated[("GET", "/v1/hosts", 200)] == 2


def test_a_member_the_document_does_not_list_is_a_mismatch(check):
    [mismatch] = exchange(check, "GET", "/v1/health", 200, {"status": "ok", "version": "1"}, token=None)
    assert "version" in mismatch


def test_a_status_the_operation_does_not_document_is_a_mismatch(check):
    # v1.1: a host's GET /v1/hosts lists its own host; it is never 403.
    [mismatch] = exchange(check, "GET", "/v1/hosts", 403, problem(403, "forbidden"), media=PROBLEM)
    assert "GET /v1/hosts -> 403" in mismatch


def test_an_error_must_be_a_problem_document(check):
    assert exchange(check, "GET", "/v1/tasks/t_1", 404, problem(404, "not_found"), media=PROBLEM) == []
    assert exchange(check, "GET", "/v1/tasks/t_1", 404, problem(404, "not_found")) != []  # application/json
    [mismatch] = exchange(check, "GET", "/v2/tasks/t_1", 404, {"detail": "no"}, media=PROBLEM)
    assert "'type' is a required property" in mismatch and "'code' is a required property" in mismatch


def test_an_accepted_request_the_document_forbids_is_a_mismatch(check):
    typo = {"advance_seconds": 1, "advance_secs": 1}
    # The server refusing it (400) is the scenarios probing, not a mismatch...
    assert (
        exchange(check, "POST", "/v1/admin/clock", 400, problem(400, "invalid_request"), sent=typo, media=PROBLEM) == []
    )
    # ...the server accepting it is.
    [mismatch] = exchange(check, "POST", "/v1/admin/clock", 200, {"now": TIME}, sent=typo)
    assert "accepted a request the document does not allow" in mismatch


def test_requests_no_operation_documents_get_only_401_404_405(check):
    assert exchange(check, "GET", "/v1/nothing", 404, problem(404, "not_found"), media=PROBLEM) == []
    assert exchange(check, "GET", "/v1/nothing", 401, problem(401, "unauthorized"), token=None, media=PROBLEM) == []
    assert check.validated[("GET", UNKNOWN_PATH, 404)] == 1
    # Authentication comes before routing: no token on an unknown path is 401, never 404.
    [mismatch] = exchange(check, "GET", "/v1/nothing", 404, problem(404, "not_found"), token=None, media=PROBLEM)
    assert "without a token must get 401 or 413" in mismatch
    [mismatch] = exchange(check, "GET", "/v1/tasks/t_1/nothing", 200, {})
    assert "-> 200: a request no operation documents must get 401 or 404 or 413" in mismatch


def test_a_method_the_path_lacks_is_405_allowing_every_method_of_the_path(check):
    allow = {"Allow": "GET, POST"}
    assert (
        exchange(check, "DELETE", "/v1/tasks", 405, problem(405, "method_not_allowed"), media=PROBLEM, headers=allow)
        == []
    )
    assert check.validated[("DELETE", "/v1/tasks", 405)] == 1
    [mismatch] = exchange(
        check, "DELETE", "/v1/tasks", 405, problem(405, "method_not_allowed"), media=PROBLEM, headers={"Allow": "POST"}
    )
    assert "Allow: 'POST'" in mismatch and "GET, POST" in mismatch
    [mismatch] = exchange(check, "PATCH", "/v1/tasks/t_1", 404, problem(404, "not_found"), media=PROBLEM)
    assert "PATCH /v1/tasks/{task_id} -> 404: a request no operation documents must get 401 or 405 or 413" in mismatch


def test_one_mismatch_seen_many_times_is_listed_once_with_a_count(check):
    for _ in range(3):
        exchange(check, "GET", "/v1/hosts", 200, [])
    [mismatch] = check.mismatch_lines()  # the same mismatch a second time adds no line
    assert "(x3, e.g. /v1/hosts)" in mismatch


# ---------------------------------------------------------------------------------------
# Our own app, through the suite's client


TOKENS = {
    "acme": Principal(role="client", tenant="acme"),
    "h1": Principal(role="host", host_id="h1"),
    "admin": Principal(role="admin"),
}


def test_our_app_through_a_conformance_connection_matches_the_document(check):
    app = create_app(MemoryService(), Settings(manual_clock=True), tokens=TokenTable(TOKENS.items()))
    server = ThreadedServer(app).start()
    connection = Connection(server.url)
    try:
        connection.observe(check.observe)
        acme, h1 = connection.caller("acme", "acme"), connection.caller("h1", "h1")
        anonymous = connection.caller(None, "anonymous")
        anonymous.call("GET", "/v1/health")
        metrics = anonymous.send("GET", "/metrics")
        assert metrics.status_code == 200
        task = acme.submit_task(requirements={"attributes": {"model": "x"}})
        h1.register("h1", [{"serial": "emulator-5554", "attributes": {"model": "x"}}])
        assignment = h1.claim("h1")
        h1.start(task["id"], assignment["attempt"], assignment["lease_id"])
        acme.cancel(task["id"], expect=202)
        h1.report(task["id"], 1, assignment["lease_id"], "cancelled")
        acme.history(task["id"])
        acme.list_tasks(limit=5)
        acme.call("GET", "/v1/tasks", params={"limit": 0}, expect=400)
        acme.submit_task(plan=PLAN, colour="red", expect=400)
        acme.call("GET", "/v1/nothing", expect=404)
        acme.call("DELETE", f"/v1/tasks/{task['id']}", expect=405)
    finally:
        connection.close()
        server.stop()
    assert check.mismatch_lines() == []
    assert {
        ("GET", "/metrics", 200),
        ("POST", "/v1/tasks", 201),
        ("POST", "/v1/tasks", 400),
        ("POST", "/v1/tasks/{task_id}/attempts/{attempt}/result", 200),
        ("GET", UNKNOWN_PATH, 404),
        ("DELETE", "/v1/tasks/{task_id}", 405),
    } <= set(check.validated)
