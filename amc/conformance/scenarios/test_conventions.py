"""specs/protocol.md "Conventions" and the role table: ACCESS, INPUT, LISTING
(specs/requirements/protocol-rules.md), and the health endpoint."""

from __future__ import annotations

import json
from typing import Any

import pytest

from amc.conformance.client import PLAN, as_recorded, check_problem, ms


def test_health_needs_no_token(scene):
    """GET /v1/health answers {"status": "ok"} to anyone."""
    anonymous = scene.connection.caller(None, "anonymous")
    assert anonymous.call("GET", "/v1/health") == {"status": "ok"}


# ---------------------------------------------------------------------------------------
# ACCESS


@pytest.mark.req("ACCESS/s1")
def test_every_role_gets_exactly_its_allowed_answers(scene):
    """Clients of two tenants, two hosts, the admin, an unknown token and none, on every endpoint."""
    acme, beta, admin, h1, h2 = scene.acme, scene.beta, scene.admin, scene.h1, scene.h2
    connection = scene.connection
    stranger = connection.caller("not-a-token-" + scene.tag, "unknown token")
    anonymous = connection.caller(None, "no token")
    callers = {
        "acme": acme,
        "beta": beta,
        "h1": h1.caller,
        "h2": h2.caller,
        "admin": admin,
        "unknown": stranger,
        "none": anonymous,
    }
    # Given a task X of acme that h1 holds (dispatched)
    task, lease = scene.running(h1)
    x, lid = task["id"], {"lease_id": lease.lease_id}
    inventory = {"devices": [scene.device("emulator-5554")]}
    submit = {"plan": PLAN, "requirements": scene.requirements(model="none")}
    # endpoint -> (method, path, body, {caller: status}); callers not named get 401
    table: dict[str, tuple[str, str, Any, dict]] = {
        "read task": ("GET", f"/v1/tasks/{x}", None, dict(acme=200, beta=404, h1=200, h2=404, admin=200)),
        "history": ("GET", f"/v1/tasks/{x}/history", None, dict(acme=200, beta=404, h1=403, h2=403, admin=200)),
        "list tasks": ("GET", "/v1/tasks", None, dict(acme=200, beta=200, h1=403, h2=403, admin=200)),
        "list hosts": ("GET", "/v1/hosts", None, dict(acme=200, beta=200, h1=200, h2=200, admin=200)),
        "read host": ("GET", f"/v1/hosts/{h1.id}", None, dict(acme=200, beta=200, h1=200, h2=403, admin=200)),
        "claim": ("POST", f"/v1/hosts/{h1.id}/claim", {}, dict(acme=403, beta=403, h1=204, h2=403, admin=403)),
        "start": (
            "POST",
            f"/v1/tasks/{x}/attempts/1/start",
            lid,
            dict(acme=403, beta=403, h1=200, h2=(409, "lease_foreign"), admin=403),
        ),
        "renew": (
            "POST",
            f"/v1/tasks/{x}/attempts/1/renew",
            lid,
            dict(acme=403, beta=403, h1=200, h2=(409, "lease_foreign"), admin=403),
        ),
        "inventory": ("PUT", f"/v1/hosts/{h1.id}", inventory, dict(acme=403, beta=403, h1=200, h2=403, admin=200)),
        "submit": ("POST", "/v1/tasks", submit, dict(acme=201, beta=201, h1=403, h2=403, admin=201)),
        "cancel": ("POST", f"/v1/tasks/{x}/cancel", {}, dict(acme=202, beta=404, h1=403, h2=403, admin=202)),
        "result": (
            "POST",
            f"/v1/tasks/{x}/attempts/1/result",
            {**lid, "status": "cancelled"},
            dict(acme=403, beta=403, h2=(409, "lease_foreign"), admin=403, h1=200),
        ),
    }

    def expected(allowed: dict, name: str):
        status = allowed.get(name, 401)
        return status if isinstance(status, tuple) else (status, _CODES.get(status))

    # When every caller that may not, calls every endpoint
    before = admin.get_task(x)
    for method, path, body, allowed in table.values():
        for name, caller in callers.items():
            status, code = expected(allowed, name)
            if status < 400:
                continue
            answer = caller.call(
                method, path, *(() if body is None else (body,)), expect=(status, code) if code else status
            )
            _no_token_in(answer, callers)
    # Then each got the role table's refusal, and none of them changed the task
    assert admin.get_task(x) == before
    # And every caller that may, gets its answer (in an order that keeps the task in flight)
    for endpoint, (method, path, body, allowed) in table.items():
        for name, caller in callers.items():
            status, _ = expected(allowed, name)
            if status >= 400:
                continue
            answer = caller.call(method, path, *(() if body is None else (body,)), expect=status)
            _no_token_in(answer, callers)
            if endpoint == "submit":
                caller.created.append(answer["id"])
    assert admin.get_task(x)["status"] == "cancelled"


_CODES = {401: "unauthorized", 403: "forbidden", 404: "not_found"}


def _no_token_in(answer, callers) -> None:
    text = repr(answer)
    for caller in callers.values():
        assert not caller.token or caller.token not in text, f"an answer echoes the token of {caller.name}"


@pytest.mark.req("ACCESS/s2")
def test_a_host_acting_for_another_host_is_forbidden(scene):
    """h2's token claiming for h1 or replacing h1's inventory: 403, and h1 is unchanged."""
    h1, h2 = scene.h1, scene.h2
    # Given host tokens bound to h1 and h2, and h1 registered with a device a task matches
    before = as_recorded(h1.register(scene.device("emulator-5554")))
    task = scene.submit()
    # When h2's token claims for h1 or replaces h1's inventory
    h2.caller.claim(h1.id, expect=(403, "forbidden"))
    h2.caller.register(h1.id, [scene.device("emulator-5556")], expect=(403, "forbidden"))
    # Then h1 and the task are unchanged
    assert as_recorded(h1.read()) == before
    assert scene.task(task["id"])["status"] == "queued"


@pytest.mark.req("ACCESS/s3")
def test_checks_run_in_the_protocols_order(scene):
    """413 before 401, 401 before 403/404, 403 before 404, 404 before 400, 400 before 409."""
    acme, h1 = scene.acme, scene.h1
    anonymous = scene.connection.caller(None, "no token")
    stranger = scene.connection.caller("not-a-token-" + scene.tag, "unknown token")
    unknown = f"t_unknown{scene.tag}"
    big = b'{"plan": {"steps": []}, "labels": {"x": "' + b"a" * (1024 * 1024) + b'"}}'
    # An oversized body without a token: 413
    for caller in (anonymous, acme):
        response = caller.send("POST", "/v1/tasks", content=big, headers={"Content-Type": "application/json"})
        check_problem(response, 413, "payload_too_large")
    # No token or an unknown one on an unknown task with a bad body: 401
    anonymous.cancel(unknown, body={"reasn": 1}, expect=(401, "unauthorized"))
    stranger.get_task(unknown, expect=(401, "unauthorized"))
    response = anonymous.send("GET", "/v1/tasks", headers={"Authorization": f"Basic {acme.token}"})
    check_problem(response, 401, "unauthorized")
    # A role that may not, on an unknown task with a bad body: 403
    h1.caller.cancel(unknown, body={"reasn": 1}, expect=(403, "forbidden"))
    # An unknown task with a bad body: 404
    acme.cancel(unknown, body={"reasn": 1}, expect=(404, "not_found"))
    h1.caller.start(unknown, 1, None, expect=(404, "not_found"))
    # A bad body for a rule that would refuse (409): 400
    _task, lease = scene.running(h1)
    h1.report(lease, "finished", expect=(400, "invalid_request"))
    h1.report(lease, "cancelled", expect=(409, "no_cancellation_requested"))


@pytest.mark.req("ACCESS/s4")
def test_authentication_comes_before_routing_and_the_body(scene):
    """Without a valid token every request is 401: a bad submit body, an unknown path, a wrong method."""
    acme = scene.acme
    anonymous = scene.connection.caller(None, "no token")
    stranger = scene.connection.caller("not-a-token-" + scene.tag, "unknown token")
    task = scene.submit()
    before = acme.get_task(task["id"])
    bad_submit = {"plan": {"steps": []}, "priority": "high", "colour": "red"}
    unknown_paths = [f"/v1/nothing-{scene.tag}", f"/v1/tasks/{task['id']}/nothing", "/v2/tasks"]
    for caller in (anonymous, stranger):
        # A submit whose body is bad in every way, or not JSON at all: the token is checked first
        caller.call("POST", "/v1/tasks", bad_submit, expect=(401, "unauthorized"))
        response = caller.send("POST", "/v1/tasks", content=b"{not json", headers={"Content-Type": "application/json"})
        check_problem(response, 401, "unauthorized")
        caller.call(
            "POST", "/v1/tasks", {"plan": PLAN, "requirements": scene.requirements()}, expect=(401, "unauthorized")
        )
        # A path that does not exist, and a known path with a method it lacks
        for path in unknown_paths:
            caller.call("GET", path, expect=(401, "unauthorized"))
        caller.call("DELETE", "/v1/tasks", expect=(401, "unauthorized"))
        caller.call("DELETE", f"/v1/tasks/{task['id']}", expect=(401, "unauthorized"))
    # Only GET /v1/health and GET /metrics answer without a token
    assert anonymous.send("GET", "/v1/health").status_code == 200
    assert anonymous.send("GET", "/metrics").status_code == 200
    # With a valid token the same requests get what they deserve: 400 for the body, 404 for the path
    acme.call("POST", "/v1/tasks", bad_submit, expect=(400, "invalid_request"))
    for path in unknown_paths:
        acme.call("GET", path, expect=(404, "not_found"))
    # And nothing changed
    assert acme.get_task(task["id"]) == before


def _allowed(response) -> set[str]:
    return {method.strip().upper() for method in response.headers.get("allow", "").split(",") if method.strip()}


@pytest.mark.req("ACCESS/s5")
def test_a_method_a_path_lacks_is_405_with_every_allowed_method(scene):
    """A known path with another method: 405 method_not_allowed whose Allow lists every method of that path."""
    acme, h1 = scene.acme, scene.h1
    task, _lease = scene.running(h1)
    x = task["id"]
    before = acme.get_task(x)
    # (caller, method, path, the methods the protocol gives that path)
    cases = [
        (acme, "DELETE", "/v1/tasks", {"GET", "POST"}),
        (acme, "PUT", "/v1/tasks", {"GET", "POST"}),
        (acme, "DELETE", f"/v1/tasks/{x}", {"GET"}),
        (acme, "POST", f"/v1/tasks/{x}/history", {"GET"}),
        (acme, "GET", f"/v1/tasks/{x}/cancel", {"POST"}),
        (acme, "DELETE", f"/v1/tasks/{x}/messages", {"GET", "POST"}),
        (acme, "POST", "/v1/hosts", {"GET"}),
        (h1.caller, "DELETE", f"/v1/hosts/{h1.id}", {"GET", "PUT"}),
        (h1.caller, "GET", f"/v1/hosts/{h1.id}/claim", {"POST"}),
        (h1.caller, "GET", f"/v1/tasks/{x}/attempts/1/renew", {"POST"}),
        (h1.caller, "PUT", f"/v1/tasks/{x}/attempts/1/start", {"POST"}),
        (h1.caller, "GET", f"/v1/tasks/{x}/attempts/1/result", {"POST"}),
    ]
    for caller, method, path, methods in cases:
        caller.call(method, path, expect=(405, "method_not_allowed"))
        allowed = _allowed(caller.last)
        assert methods <= allowed, (
            f"{method} {path}: Allow {caller.last.headers.get('allow')!r} lacks {methods - allowed}"
        )
        assert method not in allowed, f"{method} {path}: Allow {caller.last.headers.get('allow')!r} names {method}"
    # And none of them changed the task
    assert acme.get_task(x) == before


# ---------------------------------------------------------------------------------------
# INPUT


@pytest.mark.req("INPUT/s1")
def test_bad_input_is_400_naming_the_field_and_changes_nothing(scene):
    """Malformed JSON, NaN, wrong types, unknown members, out-of-range numbers: 400 naming the field."""
    acme, h1 = scene.acme, scene.h1
    # Given a running server with a dispatched task and a queued one
    task, lease = scene.running(h1, device="emulator-5556")
    queued = scene.submit()
    before = [acme.get_task(queued["id"]), acme.get_task(task["id"]), as_recorded(h1.read())]
    base = {"plan": PLAN, "requirements": scene.requirements()}
    attempt = f"/v1/tasks/{task['id']}/attempts/1"
    host = h1.caller
    bad = [  # (caller, method, path, body, the field the detail must name)
        (acme, "POST", "/v1/tasks", {**base, "priority": "5"}, "priority"),
        (acme, "POST", "/v1/tasks", {**base, "priority": 1001}, "priority"),
        (acme, "POST", "/v1/tasks", {**base, "max_attempts": 0}, "max_attempts"),
        (acme, "POST", "/v1/tasks", {**base, "max_attempts": 2.5}, "max_attempts"),
        (acme, "POST", "/v1/tasks", {**base, "labels": {"a": 1}}, "labels"),
        (acme, "POST", "/v1/tasks", {**base, "colour": "red"}, "colour"),
        (acme, "POST", f"/v1/tasks/{queued['id']}/cancel", {"reason": 5}, "reason"),
        (acme, "POST", f"/v1/tasks/{queued['id']}/cancel", {"reasn": "typo"}, "reasn"),
        (host, "POST", f"/v1/hosts/{h1.id}/claim", {"lease_seconds": "30"}, "lease_seconds"),
        (host, "POST", f"/v1/hosts/{h1.id}/claim", {"wait_seconds": 31}, "wait_seconds"),
        (host, "PUT", f"/v1/hosts/{h1.id}", {"devices": [{"serial": 5, "attributes": {}}]}, "serial"),
        (host, "POST", f"{attempt}/renew", {"lease_id": 5}, "lease_id"),
        (host, "POST", f"{attempt}/result", {"lease_id": lease.lease_id, "status": "finished"}, "status"),
        (
            host,
            "POST",
            f"{attempt}/result",
            {"lease_id": lease.lease_id, "status": "done", "metadata": "x"},
            "metadata",
        ),
    ]
    # When each is sent
    for caller, method, path, body, field in bad:
        problem = caller.call(method, path, body, expect=(400, "invalid_request"))
        # Then each is 400 invalid_request naming the field
        assert field in problem["detail"], f"{method} {path} {body}: detail {problem['detail']!r} names no {field!r}"
    for raw in (b'{"reason": NaN}', b'{"reason": Infinity}', b'{"reason": ', b"[1, 2]"):
        response = acme.send(
            "POST", f"/v1/tasks/{queued['id']}/cancel", content=raw, headers={"Content-Type": "application/json"}
        )
        check_problem(response, 400, "invalid_request")
    for limit in ("0", "1001", "ten"):
        problem = acme.call("GET", "/v1/tasks", params={"limit": limit}, expect=(400, "invalid_request"))
        assert "limit" in problem["detail"]
    # And the server's state is exactly as before
    assert [acme.get_task(queued["id"]), acme.get_task(task["id"]), as_recorded(h1.read())] == before


NOT_JSON_NUMBERS = ("NaN", "Infinity", "-Infinity")


@pytest.mark.req("INPUT/s2")
def test_nan_and_infinity_are_refused_wherever_they_appear(scene):
    """NaN, Infinity and -Infinity are not JSON: 400 in a result's free-form metadata, a claim, a submit."""
    acme, h1 = scene.acme, scene.h1
    # Given a dispatched attempt of h1, and another task queued
    task, lease = scene.running(h1)
    before = acme.get_task(task["id"])
    json_body = {"Content-Type": "application/json"}
    result = f"/v1/tasks/{task['id']}/attempts/1/result"
    for token in NOT_JSON_NUMBERS:
        # When a body carries one where any JSON value would do (metadata is free-form)
        body = f'{{"lease_id": {json.dumps(lease.lease_id)}, "status": "done", "metadata": {{"x": {token}}}}}'
        check_problem(h1.caller.send("POST", result, content=body.encode(), headers=json_body), 400, "invalid_request")
        # Or where a number is expected
        claim = f'{{"lease_seconds": {token}}}'
        check_problem(
            h1.caller.send("POST", f"/v1/hosts/{h1.id}/claim", content=claim.encode(), headers=json_body),
            400,
            "invalid_request",
        )
        submit = f'{{"plan": {{"steps": [{{"id": "w", "action": "wait", "args": {{"seconds": {token}}}}}]}}, "labels": {{}}}}'
        check_problem(
            acme.send("POST", "/v1/tasks", content=submit.encode(), headers=json_body), 400, "invalid_request"
        )
    # Then the attempt is still running, and the same report with a number is accepted
    assert acme.get_task(task["id"]) == before
    ended = h1.report(lease, "done", metadata={"x": 1.5})
    assert ended["result"]["metadata"] == {"x": 1.5}


# ---------------------------------------------------------------------------------------
# LISTING


@pytest.mark.req("LISTING/s1")
def test_pages_are_oldest_first_follow_the_cursor_and_filter_by_status(scene):
    """Five tasks of acme (two cancelled) and one of beta: pages of 2, oldest first, by cursor, by status."""
    acme, beta = scene.acme, scene.beta
    # Given five tasks of acme, two of them cancelled, and one of beta
    mine = [scene.submit(acme)["id"] for _ in range(5)]
    for task_id in mine[1:3]:
        acme.cancel(task_id, expect=200)
    theirs = scene.submit(beta)["id"]

    # When acme lists queued tasks two at a time, following next until it is null
    pages, after = [], None
    while True:
        params = {"limit": 2, "status": "queued", **({"after": after} if after else {})}
        page = acme.list_tasks(**params)
        assert len(page["tasks"]) <= 2
        pages.append(page["tasks"])
        after = page["next"]
        if after is None:
            break
    listed = [t for page in pages for t in page]

    # Then it sees each of its queued tasks once, oldest first, all queued, never beta's
    ids = [t["id"] for t in listed]
    assert len(ids) == len(set(ids)), "a task was listed twice"
    assert [i for i in ids if i in mine] == [mine[0], mine[3], mine[4]]
    assert theirs not in ids
    assert {t["tenant"] for t in listed} == {acme.tenant}
    assert {t["status"] for t in listed} == {"queued"}
    # And status=cancelled lists exactly its two cancelled ones among this test's tasks, in order
    cancelled = [t["id"] for t in acme.all_tasks(status="cancelled")]
    assert [i for i in cancelled if i in mine] == mine[1:3]
    # And the unfiltered list has all five in submission order, oldest first
    everything = acme.all_tasks()
    assert [t["id"] for t in everything if t["id"] in mine] == mine
    created = [ms(t["created_at"]) for t in everything]
    assert created == sorted(created)
    # And a cursor the server did not issue is 400
    acme.call("GET", "/v1/tasks", params={"after": "not-a-cursor"}, expect=(400, "invalid_request"))


@pytest.mark.req("LISTING/s2")
def test_a_page_holds_as_many_tasks_as_the_limit_asks_up_to_1000(scene):
    """limit 1..1000 is honoured above the default of 100: a page of 120 holds 120 tasks."""
    acme = scene.acme
    # Given 120 queued tasks of acme (and perhaps others of earlier tests)
    mine = [scene.submit(acme)["id"] for _ in range(120)]
    # When acme lists queued tasks 120 at a time
    page = acme.list_tasks(status="queued", limit=120)
    # Then the first page holds 120 tasks, and following next finds all of its own, once each
    assert len(page["tasks"]) == 120, f"limit=120 gave a page of {len(page['tasks'])} tasks"
    listed = [t["id"] for t in page["tasks"]]
    after = page["next"]
    while after is not None:
        page = acme.list_tasks(status="queued", limit=120, after=after)
        assert len(page["tasks"]) <= 120
        listed.extend(t["id"] for t in page["tasks"])
        after = page["next"]
    assert [i for i in listed if i in set(mine)] == mine
    # And the largest limit is accepted, the default is 100
    assert len(acme.list_tasks(status="queued", limit=1000)["tasks"]) >= 120
    assert len(acme.list_tasks(status="queued")["tasks"]) == 100
