"""PROTOCOL.md "Conventions" and the role table: ACCESS, INPUT, LISTING
(specs/requirements/protocol-rules.md), and the health endpoint."""

from __future__ import annotations

from typing import Any

import pytest

from amc.conformance.client import PLAN, check_problem, ms


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
    callers = {"acme": acme, "beta": beta, "h1": h1.caller, "h2": h2.caller, "admin": admin,
               "unknown": stranger, "none": anonymous}
    # Given a task X of acme that h1 holds (dispatched)
    task, lease = scene.running(h1)
    x, lid = task["id"], {"lease_id": lease.lease_id}
    inventory = {"devices": [scene.device("emulator-5554")]}
    submit = {"plan": PLAN, "requirements": scene.requirements(model="none")}
    # endpoint -> (method, path, body, {caller: status}); callers not named get 401
    table: dict[str, tuple[str, str, Any, dict]] = {
        "read task": ("GET", f"/v1/tasks/{x}", None,
                      dict(acme=200, beta=404, h1=200, h2=404, admin=200)),
        "history": ("GET", f"/v1/tasks/{x}/history", None, dict(acme=200, beta=404, h1=403, h2=403, admin=200)),
        "list tasks": ("GET", "/v1/tasks", None, dict(acme=200, beta=200, h1=403, h2=403, admin=200)),
        "list hosts": ("GET", "/v1/hosts", None, dict(acme=200, beta=200, h1=403, h2=403, admin=200)),
        "read host": ("GET", f"/v1/hosts/{h1.id}", None, dict(acme=200, beta=200, h1=200, h2=403, admin=200)),
        "claim": ("POST", f"/v1/hosts/{h1.id}/claim", {}, dict(acme=403, beta=403, h1=204, h2=403, admin=403)),
        "start": ("POST", f"/v1/tasks/{x}/attempts/1/start", lid,
                  dict(acme=403, beta=403, h1=200, h2=(409, "lease_foreign"), admin=403)),
        "renew": ("POST", f"/v1/tasks/{x}/attempts/1/renew", lid,
                  dict(acme=403, beta=403, h1=200, h2=(409, "lease_foreign"), admin=403)),
        "inventory": ("PUT", f"/v1/hosts/{h1.id}", inventory, dict(acme=403, beta=403, h1=200, h2=403, admin=200)),
        "submit": ("POST", "/v1/tasks", submit, dict(acme=201, beta=201, h1=403, h2=403, admin=201)),
        "cancel": ("POST", f"/v1/tasks/{x}/cancel", {}, dict(acme=202, beta=404, h1=403, h2=403, admin=202)),
        "result": ("POST", f"/v1/tasks/{x}/attempts/1/result", {**lid, "status": "cancelled"},
                   dict(acme=403, beta=403, h2=(409, "lease_foreign"), admin=403, h1=200)),
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
            answer = caller.call(method, path, *(() if body is None else (body,)), expect=(status, code) if code
                                 else status)
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
    before = h1.register(scene.device("emulator-5554"))
    task = scene.submit()
    # When h2's token claims for h1 or replaces h1's inventory
    h2.caller.claim(h1.id, expect=(403, "forbidden"))
    h2.caller.register(h1.id, [scene.device("emulator-5556")], expect=(403, "forbidden"))
    # Then h1 and the task are unchanged
    assert h1.read() == before
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


# ---------------------------------------------------------------------------------------
# INPUT


@pytest.mark.req("INPUT/s1")
def test_bad_input_is_400_naming_the_field_and_changes_nothing(scene):
    """Malformed JSON, NaN, wrong types, unknown members, out-of-range numbers: 400 naming the field."""
    acme, h1 = scene.acme, scene.h1
    # Given a running server with a dispatched task and a queued one
    task, lease = scene.running(h1, device="emulator-5556")
    queued = scene.submit()
    before = [acme.get_task(queued["id"]), acme.get_task(task["id"]), h1.read()]
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
        (host, "POST", f"{attempt}/result", {"lease_id": lease.lease_id, "status": "done", "metadata": "x"},
         "metadata"),
    ]
    # When each is sent
    for caller, method, path, body, field in bad:
        problem = caller.call(method, path, body, expect=(400, "invalid_request"))
        # Then each is 400 invalid_request naming the field
        assert field in problem["detail"], f"{method} {path} {body}: detail {problem['detail']!r} names no {field!r}"
    for raw in (b'{"reason": NaN}', b'{"reason": Infinity}', b'{"reason": ', b"[1, 2]"):
        response = acme.send("POST", f"/v1/tasks/{queued['id']}/cancel", content=raw,
                             headers={"Content-Type": "application/json"})
        check_problem(response, 400, "invalid_request")
    for limit in ("0", "1001", "ten"):
        problem = acme.call("GET", "/v1/tasks", params={"limit": limit}, expect=(400, "invalid_request"))
        assert "limit" in problem["detail"]
    # And the server's state is exactly as before
    assert [acme.get_task(queued["id"]), acme.get_task(task["id"]), h1.read()] == before


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
