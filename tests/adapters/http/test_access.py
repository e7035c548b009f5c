"""Authentication and authorization: the whole role x endpoint x tenant matrix, and the
order of checks (size, authentication, authorization, existence, body, rules).

Each cell runs on a fresh server holding task X of tenant `acme`, assigned to `h1` as
attempt 1, and checks the status and, for a refusal, the code and that nothing changed.
"""

from __future__ import annotations

import pytest

from tests.support.http import hosts_as_recorded, problem
from tests.support.plans import PLAN

CALLERS = ["anon", "stranger", "admin", "acme", "beta", "h1", "h2"]

# endpoint -> (method, path, body, {caller: status}); anon and stranger are 401 unless listed.
ENDPOINTS = {
    "health": ("GET", "/v1/health", None, dict.fromkeys(CALLERS, 200)),
    "metrics": ("GET", "/metrics", None, dict.fromkeys(CALLERS, 200)),
    "submit": ("POST", "/v1/tasks", {"plan": PLAN}, {"admin": 201, "acme": 201, "beta": 201, "h1": 403, "h2": 403}),
    "list": ("GET", "/v1/tasks", None, {"admin": 200, "acme": 200, "beta": 200, "h1": 403, "h2": 403}),
    "get": ("GET", "/v1/tasks/{x}", None, {"admin": 200, "acme": 200, "beta": 404, "h1": 200, "h2": 404}),
    "history": ("GET", "/v1/tasks/{x}/history", None, {"admin": 200, "acme": 200, "beta": 404, "h1": 403, "h2": 403}),
    "cancel": ("POST", "/v1/tasks/{x}/cancel", {}, {"admin": 202, "acme": 202, "beta": 404, "h1": 403, "h2": 403}),
    "put_host": (
        "PUT",
        "/v1/hosts/h1",
        {"devices": [{"serial": "emulator-5554", "attributes": {}}]},
        {"admin": 200, "acme": 403, "beta": 403, "h1": 200, "h2": 403},
    ),
    "list_hosts": ("GET", "/v1/hosts", None, {"admin": 200, "acme": 200, "beta": 200, "h1": 200, "h2": 200}),
    "get_host": ("GET", "/v1/hosts/h1", None, {"admin": 200, "acme": 200, "beta": 200, "h1": 200, "h2": 403}),
    "claim": ("POST", "/v1/hosts/h1/claim", {}, {"admin": 403, "acme": 403, "beta": 403, "h1": 204, "h2": 403}),
    "start": (
        "POST",
        "/v1/tasks/{x}/attempts/1/start",
        {"lease_id": "{lease}"},
        {"admin": 403, "acme": 403, "beta": 403, "h1": 200, "h2": 409},
    ),
    "renew": (
        "POST",
        "/v1/tasks/{x}/attempts/1/renew",
        {"lease_id": "{lease}"},
        {"admin": 403, "acme": 403, "beta": 403, "h1": 200, "h2": 409},
    ),
    "result": (
        "POST",
        "/v1/tasks/{x}/attempts/1/result",
        {"lease_id": "{lease}", "status": "done"},
        {"admin": 403, "acme": 403, "beta": 403, "h1": 200, "h2": 409},
    ),
    "clock": (
        "POST",
        "/v1/admin/clock",
        {"advance_seconds": 1},
        {"admin": 200, "acme": 403, "beta": 403, "h1": 403, "h2": 403},
    ),
}
CODES = {401: "unauthorized", 403: "forbidden", 404: "not_found", 409: "lease_foreign"}


def snapshot(amc, task_id):
    return amc.admin.tasks()["tasks"], amc.admin.history(task_id), hosts_as_recorded(amc.admin.hosts())


def fill(value, task_id, lease_id):
    if isinstance(value, str):
        return value.replace("{x}", task_id).replace("{lease}", lease_id)
    if isinstance(value, dict):
        return {k: fill(v, task_id, lease_id) for k, v in value.items()}
    return value


@pytest.mark.req("TENANCY/s1")
@pytest.mark.req("TENANCY/s2")
@pytest.mark.req("ACCESS/s1")
@pytest.mark.parametrize("caller", CALLERS)
@pytest.mark.parametrize("endpoint", list(ENDPOINTS))
def test_role_endpoint_tenant_matrix(amc, endpoint, caller):
    method, path, body, expected = ENDPOINTS[endpoint]
    status = expected.get(caller, 401)
    task_id, lease = amc.claimed()
    before = snapshot(amc, task_id)
    who = getattr(amc, caller)

    response = who.request(
        method,
        fill(path, task_id, lease["lease_id"]),
        **({} if body is None else {"json": fill(body, task_id, lease["lease_id"])}),
    )

    assert response.status_code == status, response.text
    if status >= 400:
        assert problem(who) == (status, CODES[status])
        assert snapshot(amc, task_id) == before
        assert "tok-" not in response.text  # tokens are never echoed
    if status == 401:
        assert response.headers["www-authenticate"].startswith("Bearer")


def test_malformed_authorization_headers_are_unauthorized(amc):
    token = "tok-client-acme-0000000000"
    for header in (token, f"Basic {token}", "Bearer", f"Bearer {token}x", f"Bearer {token[:-1]}"):
        amc.anon.request("GET", "/v1/tasks", headers={"Authorization": header}, expect=401)
    amc.anon.request("GET", "/v1/tasks", headers={"Authorization": f"bearer {token}"}, expect=200)


@pytest.mark.req("ACCESS/s2")
def test_a_host_acting_for_another_host_is_forbidden(amc):
    amc.h1.register("h1", ["d1"])
    amc.acme.submit()
    amc.h2.claim("h1", expect=403)
    amc.h2.register("h1", ["x"], expect=403)
    amc.h2.host("h1", expect=403)
    assert amc.h1.host("h1")["devices"][0]["serial"] == "d1"
    assert amc.h1.claim("h1")["device"] == "d1"


# -- the order of checks ---------------------------------------------------------------------


@pytest.mark.req("ACCESS/s3")
def test_size_comes_before_authentication(amc):
    huge = b"{" + b" " * (1024 * 1024) + b"}"
    amc.anon.request("POST", "/v1/tasks", content=huge, expect=413)
    assert problem(amc.anon) == (413, "payload_too_large")
    amc.h2.request("POST", "/v1/hosts/h1/claim", content=huge, expect=413)


def test_a_chunked_body_over_the_limit_is_refused(amc):
    def chunks():
        for _ in range(17):
            yield b"x" * 65536

    response = amc.http.post(
        "/v1/tasks", content=chunks(), headers={"Authorization": "Bearer tok-admin-0000000000000000"}
    )
    assert response.status_code == 413
    assert response.json()["code"] == "payload_too_large"


@pytest.mark.req("ACCESS/s3")
def test_authentication_comes_before_authorization_and_existence(amc):
    amc.stranger.request("GET", "/v1/tasks/t_nope", expect=401)
    amc.anon.request("POST", "/v1/hosts/h1/claim", json={"wait_seconds": 99}, expect=401)


@pytest.mark.req("ACCESS/s3")
def test_authorization_comes_before_existence_and_body(amc):
    amc.h1.request("POST", "/v1/tasks/t_nope/cancel", json={"reason": 5}, expect=403)
    amc.acme.request("POST", "/v1/hosts/h1/claim", json={"wait_seconds": 99}, expect=403)
    amc.h2.request("PUT", "/v1/hosts/h1", content=b"not json", expect=403)


@pytest.mark.req("ACCESS/s3")
def test_existence_comes_before_the_body(amc):
    x = amc.acme.submit()["id"]
    amc.beta.request("POST", f"/v1/tasks/{x}/cancel", json={"reason": 5}, expect=404)
    amc.h1.request("POST", "/v1/tasks/t_nope/attempts/1/renew", content=b"{", expect=404)
    amc.h1.request("POST", f"/v1/tasks/{x}/attempts/1/renew", content=b"{", expect=404)


@pytest.mark.req("ACCESS/s3")
def test_the_body_comes_before_the_rules(amc):
    task_id, lease = amc.claimed(start=True, max_attempts=1)
    amc.h1.report(task_id, 1, lease["lease_id"], "done")
    # A repeated report with a malformed body: 400, not 409 (nor the idempotent 200).
    amc.h1.report(task_id, 1, lease["lease_id"], "done", extra=1, expect=400)
    amc.h2.report(task_id, 1, lease["lease_id"], "finished", expect=400)  # foreign, but invalid first
    amc.acme.cancel(task_id, expect=409)
    amc.acme.request("POST", f"/v1/tasks/{task_id}/cancel", json={"reason": ["x"]}, expect=400)


# -- before and around routing (the resolved points of protocol v1.1) -----------------------


@pytest.mark.req("ACCESS/s4")
def test_authentication_comes_before_routing(amc):
    for caller in (amc.anon, amc.stranger):
        caller.request("GET", "/v1/nowhere", expect=401)
        caller.request("DELETE", "/v1/tasks", expect=401)
        caller.request("POST", "/v1/tasks/t_x/attempts/01/renew", json={"lease_id": "l"}, expect=401)
        caller.request("POST", "/v1/tasks", content=b"{not json", expect=401)
        assert problem(caller) == (401, "unauthorized")
        assert caller.last.headers["www-authenticate"].startswith("Bearer")
    # Size still comes first, on an unknown path too
    amc.anon.request("POST", "/v1/nowhere", content=b"{" + b" " * (1024 * 1024) + b"}", expect=413)
    amc.acme.request("GET", "/v1/nowhere", expect=404)
    assert problem(amc.acme) == (404, "not_found")


@pytest.mark.req("ACCESS/s5")
@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("DELETE", "/v1/tasks", "GET, HEAD, POST"),
        ("PUT", "/v1/tasks/t_x", "GET, HEAD"),
        ("GET", "/v1/tasks/t_x/cancel", "POST"),
        ("DELETE", "/v1/hosts/h1", "GET, HEAD, PUT"),
        ("GET", "/v1/tasks/t_x/attempts/1/renew", "POST"),
        ("PUT", "/v1/tasks/t_x/messages", "GET, HEAD, POST"),
        ("GET", "/v1/admin/clock", "POST"),
    ],
)
def test_a_method_a_path_lacks_is_405_with_the_complete_allow_header(amc, method, path, allow):
    amc.admin.request(method, path, expect=405)
    assert problem(amc.admin) == (405, "method_not_allowed")
    assert amc.admin.last.headers["allow"] == allow


@pytest.mark.req("LEASE-CHECKS/s3")
def test_attempt_numbers_are_canonical_decimals(amc):
    task_id, lease = amc.claimed(start=True)
    for spelled in ("01", "+1", "1.0", "0", "-1", "1e0", "９"):  # noqa: RUF001  (a fullwidth nine, on purpose)
        amc.h1.request(
            "POST", f"/v1/tasks/{task_id}/attempts/{spelled}/renew", json={"lease_id": lease["lease_id"]}, expect=404
        )
    amc.h1.renew(task_id, 1, lease["lease_id"])
    assert amc.admin.task(task_id)["attempts"][0]["renewals"] == 1


@pytest.mark.req("INVENTORY/s3")
def test_a_host_lists_only_itself(amc):
    assert amc.h9.hosts() == {"hosts": []}
    amc.h1.register("h1", ["d1"])
    amc.h2.register("h2", ["d2"])
    assert amc.h1.hosts() == {"hosts": [amc.h1.host("h1")]}
    assert [h["id"] for h in amc.acme.hosts()["hosts"]] == ["h1", "h2"]
    amc.h1.host("h2", expect=403)


@pytest.mark.req("INVENTORY/s5")
def test_a_devices_attributes_may_be_left_out(amc):
    host = amc.h1.call("PUT", "/v1/hosts/h1", {"devices": [{"serial": "d1"}]})
    assert host["devices"] == [{"serial": "d1", "attributes": {}, "online": True, "reservation": None}]
