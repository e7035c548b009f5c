"""specs/requirements/protocol-rules.md over HTTP: submit, claim, attempts, expiry, lease
checks, start, result, cancellation record, inventories, tenants, history and the clock."""

from __future__ import annotations

import re

import pytest

from amc.core.times import from_rfc3339
from tests.support.http import problem
from tests.support.plans import PLAN, STEPS_ABC

TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


def wait_plan(*ids):
    return {"steps": [{"id": i, "action": "wait", "args": {"seconds": 1}} for i in ids]}


# -- SUBMIT -------------------------------------------------------------------------------


@pytest.mark.req("SUBMIT/s1")
def test_a_valid_submission_creates_a_queued_task_with_defaults(amc):
    task = amc.acme.submit(PLAN)

    assert amc.acme.last.status_code == 201
    assert amc.acme.last.headers["location"] == f"/v1/tasks/{task['id']}"
    assert task["id"].startswith("t_")
    assert {k: task[k] for k in ("status", "tenant", "priority", "max_attempts", "labels", "requirements")} == {
        "status": "queued",
        "tenant": "acme",
        "priority": 0,
        "max_attempts": 3,
        "labels": {},
        "requirements": {"serial": None, "attributes": {}},
    }
    assert task["attempt"] is None and task["attempts"] == []
    assert task["cancellation"] is None and task["result"] is None
    assert task["created_at"] == task["updated_at"] == amc.at()
    assert task["plan"] == PLAN
    assert amc.acme.task(task["id"]) == task
    history = amc.acme.history(task["id"])
    assert [(e["seq"], e["type"]) for e in history] == [(1, "submitted")]


@pytest.mark.req("SUBMIT/s2")
@pytest.mark.parametrize(
    "bad_step, named",
    [
        ({"id": "tap1", "action": "tap", "args": {"x": 10}}, "tap1"),
        ({"id": "fly1", "action": "fly", "args": {}}, "fly1"),
        ({"id": "extra", "action": "launch", "args": {"package": "p", "flavour": "x"}}, "extra"),
        ({"id": "open", "action": "screenshot", "args": {}}, "open"),
    ],
)
def test_an_invalid_plan_is_refused_naming_the_step(amc, bad_step, named):
    plan = {"steps": [PLAN["steps"][0], bad_step]}

    amc.acme.submit(plan, expect=400)

    assert problem(amc.acme) == (400, "invalid_request")
    assert named in amc.acme.last.json()["detail"]
    assert amc.acme.tasks()["tasks"] == []


# -- SUBMIT-IDEMPOTENT -----------------------------------------------------------------------


@pytest.mark.req("SUBMIT-IDEMPOTENT/s1")
def test_same_key_same_body_answers_the_existing_task(amc):
    first = amc.acme.submit(PLAN, idempotency_key="k-1")
    again = amc.acme.submit(PLAN, priority=0, max_attempts=3, labels={}, idempotency_key="k-1", expect=200)

    assert again == first
    assert len(amc.acme.tasks()["tasks"]) == 1
    assert amc.acme.types(first["id"]) == ["submitted"]
    amc.h1.register("h1", ["emulator-5554"])
    amc.h1.claim("h1")
    assert amc.acme.submit(PLAN, idempotency_key="k-1", expect=200)["status"] == "assigned"


@pytest.mark.req("SUBMIT-IDEMPOTENT/s2")
def test_same_key_different_body_is_a_conflict(amc):
    first = amc.acme.submit(PLAN, idempotency_key="k-1")

    amc.acme.submit(PLAN, priority=5, idempotency_key="k-1", expect=409)

    assert problem(amc.acme) == (409, "idempotency_conflict")
    assert amc.acme.task(first["id"])["priority"] == 0
    assert len(amc.acme.tasks()["tasks"]) == 1


@pytest.mark.req("SUBMIT-IDEMPOTENT/s3")
def test_keys_are_scoped_to_the_tenant(amc):
    first = amc.acme.submit(PLAN, idempotency_key="k-1")

    other = amc.beta.submit(wait_plan("x"), idempotency_key="k-1", expect=201)

    assert other["id"] != first["id"] and other["tenant"] == "beta"
    assert amc.acme.task(first["id"]) == first
    assert amc.admin.submit(PLAN, tenant="acme", idempotency_key="k-1", expect=200)["id"] == first["id"]


# -- CLAIM --------------------------------------------------------------------------------


@pytest.mark.req("CLAIM/s1")
def test_claims_take_the_highest_priority_then_the_oldest(amc):
    a = amc.acme.submit(priority=0)["id"]
    b = amc.acme.submit(priority=5)["id"]
    c = amc.acme.submit(priority=5)["id"]
    amc.h1.register("h1", ["d1", "d2", "d3"])

    assert [amc.h1.claim("h1")["task_id"] for _ in range(3)] == [b, c, a]


@pytest.mark.req("CLAIM/s1")
def test_a_requeued_task_keeps_its_place(amc):
    a = amc.acme.submit(max_attempts=3)["id"]
    amc.h1.register("h1", ["d1"])
    assert amc.h1.claim("h1", lease_seconds=5)["task_id"] == a
    b = amc.acme.submit()["id"]
    amc.admin.advance(5)  # a expires and is requeued
    assert amc.acme.task(a)["status"] == "queued"
    assert amc.h1.claim("h1")["task_id"] == a
    assert amc.acme.task(b)["status"] == "queued"


@pytest.mark.req("CLAIM/s2")
def test_requirements_match_serial_and_attributes(amc):
    amc.h1.register(
        "h1",
        [
            {"serial": "emulator-5556", "attributes": {"model": "Pixel 7"}},
            {"serial": "emulator-5554", "attributes": {"model": "Pixel 7", "sdk": "34"}},
            {"serial": "R58M", "attributes": {"model": "Galaxy S21"}},
        ],
    )
    pixel = amc.acme.submit(requirements={"attributes": {"model": "Pixel 7"}})["id"]
    claimed = amc.h1.claim("h1")
    assert (claimed["task_id"], claimed["device"]) == (pixel, "emulator-5554")
    pinned = amc.acme.submit(requirements={"serial": "R58M"})["id"]
    assert amc.h1.claim("h1")["task_id"] == pinned and amc.h1.last.json()["device"] == "R58M"
    sdk33 = amc.acme.submit(requirements={"attributes": {"model": "Pixel 7", "sdk": "33"}})["id"]
    amc.h1.claim("h1", expect=204)
    assert amc.acme.task(sdk33)["status"] == "queued"


@pytest.mark.req("CLAIM/s2")
def test_a_task_no_device_matches_does_not_block_a_later_one(amc):
    amc.h1.register("h1", [{"serial": "R58M", "attributes": {"model": "Galaxy S21"}}])
    amc.acme.submit(priority=9, requirements={"attributes": {"model": "Pixel 9"}})
    galaxy = amc.acme.submit(priority=0, requirements={"attributes": {"model": "Galaxy S21"}})["id"]

    claimed = amc.h1.claim("h1")

    assert (claimed["task_id"], claimed["device"]) == (galaxy, "R58M")


@pytest.mark.req("CLAIM/s3")
def test_reserved_and_offline_devices_are_never_offered(amc):
    amc.h1.register("h1", ["emulator-5554"])
    a = amc.acme.submit()["id"]
    b = amc.acme.submit()["id"]
    lease = amc.h1.claim("h1")
    assert (lease["task_id"], lease["device"]) == (a, "emulator-5554")
    amc.h1.claim("h1", expect=204)
    assert amc.acme.task(b)["status"] == "queued"

    host = amc.h1.register("h1", [])
    assert host["devices"] == [
        {"serial": "emulator-5554", "attributes": {}, "online": False, "reservation": {"task_id": a, "attempt": 1}}
    ]
    amc.h1.report(a, 1, lease["lease_id"], "done")
    assert amc.h1.host("h1")["devices"] == []
    amc.h1.claim("h1", expect=204)
    amc.h1.register("h1", ["emulator-5554"])
    assert amc.h1.claim("h1")["task_id"] == b


@pytest.mark.req("CLAIM/s4")
def test_an_unregistered_or_unmatched_host_gets_no_assignment(amc):
    a = amc.acme.submit(requirements={"attributes": {"model": "Pixel 7"}})["id"]
    amc.h1.register("h1", [{"serial": "R58M", "attributes": {"model": "Galaxy S21"}}])

    amc.h9.claim("h9", expect=204)
    amc.h1.claim("h1", expect=204, wait_seconds=0.3)

    task = amc.acme.task(a)
    assert task["status"] == "queued" and task["attempt"] is None
    # The waiting half (a matching submit wakes the claim) is test_time.py.


@pytest.mark.req("CLAIM/s5")
def test_the_devices_filter_restricts_candidates(amc):
    amc.h1.register("h1", ["emulator-5554", "emulator-5556"])
    a = amc.acme.submit()["id"]

    amc.h1.claim("h1", devices=["emulator-9999"], expect=204)
    amc.h1.claim("h1", devices=[], expect=204)
    claimed = amc.h1.claim("h1", devices=["emulator-5556"])

    assert (claimed["task_id"], claimed["device"]) == (a, "emulator-5556")


@pytest.mark.req("CLAIM/s6")
def test_lease_length_defaults_and_bounds(amc):
    amc.h1.register("h1", ["d1", "d2", "d3"])
    ids = [amc.acme.submit()["id"] for _ in range(3)]

    default = amc.h1.claim("h1")
    assert default["lease_seconds"] == 30 and default["lease_expires_at"] == amc.at(30_000)
    for bad in (0.5, 601, 0, -1):
        amc.h1.claim("h1", lease_seconds=bad, expect=400)
        assert problem(amc.h1) == (400, "invalid_request")
    assert amc.acme.task(ids[1])["status"] == "queued"
    assert amc.h1.claim("h1", lease_seconds=1)["lease_seconds"] == 1
    longest = amc.h1.claim("h1", lease_seconds=600)
    assert longest["lease_expires_at"] == amc.at(600_000)
    amc.admin.advance(10)
    assert amc.h1.start(longest["task_id"], 1, longest["lease_id"])["lease_expires_at"] == amc.at(610_000)
    assert amc.h1.renew(longest["task_id"], 1, longest["lease_id"])["lease_expires_at"] == amc.at(610_000)


def test_fractional_lease_seconds_are_granted_in_milliseconds(amc):
    amc.h1.register("h1", ["d1"])
    amc.acme.submit()
    claimed = amc.h1.claim("h1", lease_seconds=1.5)
    assert claimed["lease_seconds"] == 1.5 and claimed["lease_expires_at"] == amc.at(1500)


# -- ATTEMPTS -----------------------------------------------------------------------------


@pytest.mark.req("ATTEMPTS/s1")
@pytest.mark.req("ATTEMPTS/s2")
def test_expired_attempts_requeue_until_the_last_one_fails(amc):
    task_id, first = amc.claimed(start=True, max_attempts=2)
    amc.admin.advance(30)

    task = amc.acme.task(task_id)
    assert task["attempts"][0]["outcome"] == "expired" and task["attempts"][0]["ended_at"] == amc.at(30_000)
    assert task["status"] == "queued" and task["attempt"] == 1 and task["result"] is None
    assert amc.h1.host("h1")["devices"][0]["reservation"] is None
    assert amc.acme.types(task_id)[-2:] == ["lease_expired", "requeued"]

    amc.h2.register("h2", ["emulator-7777"])
    second = amc.h2.claim("h2")
    assert second["attempt"] == 2 and second["lease_id"] != first["lease_id"]
    assert amc.acme.task(task_id)["status"] == "assigned"
    amc.h2.start(task_id, 2, second["lease_id"])
    amc.admin.advance(30)

    task = amc.acme.task(task_id)
    assert task["attempts"][1]["outcome"] == "expired" and task["status"] == "failed"
    assert {k: task["result"][k] for k in ("status", "attempt", "reason", "metadata", "steps")} == {
        "status": "failed",
        "attempt": 2,
        "reason": "attempts_exhausted",
        "metadata": {},
        "steps": None,
    }
    history = amc.acme.history(task_id)
    assert [e["type"] for e in history[-2:]] == ["lease_expired", "ended"]
    assert history[-1]["data"]["status"] == "failed" and history[-1]["data"]["reason"] == "attempts_exhausted"
    amc.h1.claim("h1", expect=204)
    amc.h2.claim("h2", expect=204)


def test_a_failed_report_ends_the_task_even_with_attempts_left(amc):
    task_id, lease = amc.claimed(start=True, max_attempts=3)
    assert amc.h1.report(task_id, 1, lease["lease_id"], "failed")["status"] == "failed"


# -- EXPIRY -------------------------------------------------------------------------------


@pytest.mark.req("EXPIRY/s1")
@pytest.mark.parametrize("early_ms", [1, 0])
def test_a_lease_is_expired_exactly_at_its_expiry(amc, early_ms):
    task_id, lease = amc.claimed(start=True)
    amc.admin.advance(30 - early_ms / 1000)

    if early_ms:
        grant = amc.h1.renew(task_id, 1, lease["lease_id"])
        assert grant["lease_expires_at"] == amc.at(30_000 - early_ms + 30_000)
    else:
        amc.h1.renew(task_id, 1, lease["lease_id"], expect=409)
        assert problem(amc.h1) == (409, "lease_expired")
        attempt = amc.acme.task(task_id)["attempts"][0]
        assert attempt["outcome"] == "expired" and attempt["ended_at"] == amc.at(30_000)


@pytest.mark.req("EXPIRY/s2")
@pytest.mark.parametrize("observer", ["read", "claim", "result", "cancel"])
def test_expiry_is_applied_before_any_request_observes_the_lease(make_amc, observer):
    # A system clock and a lease of 1 s: no timer is allowed to help here, so the expiry
    # must come from the request itself. (The timer-driven case is test_time.py.)
    amc = make_amc(clock="manual")
    task_id, lease = amc.claimed(start=True, max_attempts=3)
    amc.app.state.context.timer.poke = lambda: None  # a timer that never wakes: requests must do it
    amc.service.clock.advance(30_000)  # time passes; no request has reached the server since E

    if observer == "read":
        task = amc.acme.task(task_id)
        assert task["status"] == "queued" and task["attempts"][0]["outcome"] == "expired"
    elif observer == "claim":
        amc.h2.register("h2", ["emulator-7777"])
        assert amc.h2.claim("h2")["attempt"] == 2
    elif observer == "result":
        amc.h1.report(task_id, 1, lease["lease_id"], "done", expect=409)
        assert problem(amc.h1) == (409, "lease_expired")
    else:
        task = amc.acme.cancel(task_id, expect=200)
        assert task["status"] == "cancelled" and task["result"]["reason"] == "cancelled_while_queued"


# -- LEASE-CHECKS -------------------------------------------------------------------------


@pytest.mark.req("LEASE-CHECKS/s1")
def test_lease_checks_run_in_order(amc):
    amc.h1.register("h1", ["d1", "d2", "d3"])
    amc.h2.register("h2", ["e1"])
    x = amc.acme.submit(priority=3)["id"]
    y = amc.acme.submit(priority=2)["id"]
    z = amc.acme.submit(priority=1)["id"]
    l1 = amc.h1.claim("h1", lease_seconds=5)["lease_id"]
    l1y = amc.h1.claim("h1", lease_seconds=5)["lease_id"]
    l1z = amc.h1.claim("h1", lease_seconds=5)["lease_id"]
    amc.h1.report(y, 1, l1y, "done")
    amc.admin.advance(6)  # x and z expire and are requeued
    l2 = amc.h2.claim("h2")["lease_id"]  # x, the highest priority, as attempt 2
    amc.h1.register("h1", [])  # h1 claims nothing more, so z stays queued
    snapshot = [amc.acme.task(t) for t in (x, y, z)], amc.admin.hosts()

    cases = [
        (amc.h2, x, 1, l2, "lease_foreign"),
        (amc.h1, x, 1, l2, "lease_unknown"),
        (amc.h1, x, 1, l1, "lease_replaced"),
        (amc.h1, y, 1, l1y, "lease_ended"),
        (amc.h1, z, 1, l1z, "lease_expired"),
    ]
    for caller, task_id, attempt, lease_id, code in cases:
        caller.renew(task_id, attempt, lease_id, expect=409)
        assert problem(caller) == (409, code), (task_id, lease_id)

    assert ([amc.acme.task(t) for t in (x, y, z)], amc.admin.hosts()) == snapshot


@pytest.mark.req("LEASE-CHECKS/s2")
def test_unknown_tasks_and_attempts_are_not_found(amc):
    task_id, _ = amc.claimed()
    for path in (
        "/v1/tasks/t_nope/attempts/1/renew",
        f"/v1/tasks/{task_id}/attempts/3/renew",
        f"/v1/tasks/{task_id}/attempts/0/renew",
        f"/v1/tasks/{task_id}/attempts/one/renew",
    ):
        amc.h2.call("POST", path, {"lease_id": "l_x"}, expect=404)
        assert problem(amc.h2) == (404, "not_found")
    amc.h1.call("POST", f"/v1/tasks/{task_id}/attempts/1/start", {}, expect=400)
    assert problem(amc.h1) == (400, "invalid_request")
    assert "lease_id" in amc.h1.last.json()["detail"]


# -- START --------------------------------------------------------------------------------


@pytest.mark.req("START/s1")
def test_start_dispatches_and_a_repeat_records_nothing(amc):
    task_id, lease = amc.claimed()
    amc.admin.advance(5)

    grant = amc.h1.start(task_id, 1, lease["lease_id"])
    assert grant == {
        "task_id": task_id,
        "attempt": 1,
        "status": "dispatched",
        "lease_expires_at": amc.at(35_000),
        "cancel_requested": False,
        "messages": [],
    }
    assert amc.acme.task(task_id)["attempts"][0]["dispatched_at"] == amc.at(5000)
    assert amc.acme.types(task_id) == ["submitted", "assigned", "dispatched"]

    amc.admin.advance(5)
    assert amc.h1.start(task_id, 1, lease["lease_id"])["lease_expires_at"] == amc.at(40_000)
    attempt = amc.acme.task(task_id)["attempts"][0]
    assert attempt["dispatched_at"] == amc.at(5000) and attempt["renewals"] == 0
    assert amc.acme.types(task_id) == ["submitted", "assigned", "dispatched"]


@pytest.mark.req("START/s2")
def test_start_with_a_pending_cancellation_dispatches_and_says_so(amc):
    task_id, lease = amc.claimed()
    task = amc.acme.cancel(task_id, expect=202)
    assert task["cancellation"]["state"] == "pending" and task["cancellation"]["attempt"] == 1
    amc.admin.advance(1)

    grant = amc.h1.start(task_id, 1, lease["lease_id"])

    assert grant["status"] == "dispatched" and grant["cancel_requested"] is True
    task = amc.acme.task(task_id)
    assert task["cancellation"]["delivered_at"] == amc.at(1000)
    assert amc.acme.types(task_id)[-2:] == ["dispatched", "cancellation_delivered"]
    amc.admin.advance(10)
    assert amc.acme.task(task_id)["status"] == "dispatched"


# -- RESULT -------------------------------------------------------------------------------


@pytest.mark.req("RESULT/s1")
def test_a_report_ends_the_attempt_frees_the_device_and_records_the_result(amc):
    task_id, lease = amc.claimed(start=True, max_attempts=3, plan=STEPS_ABC)
    amc.admin.advance(7)
    steps = [
        {"id": "a", "status": "completed", "started_at": amc.at(1000), "ended_at": amc.at(2000)},
        {"id": "b", "status": "failed", "reason": "launch timed out", "output": "boom"},
        {"id": "c", "status": "not_started", "reason": "previous_step_failed"},
    ]

    task = amc.h1.report(task_id, 1, lease["lease_id"], "failed", metadata={"error": "launch timed out"}, steps=steps)

    assert task["status"] == "failed"
    assert task["attempts"][0]["outcome"] == "failed" and task["attempts"][0]["ended_at"] == amc.at(7000)
    assert amc.h1.host("h1")["devices"][0]["reservation"] is None
    assert task["result"] == {
        "status": "failed",
        "attempt": 1,
        "reason": "reported",
        "metadata": {"error": "launch timed out"},
        "steps": steps,
        "recorded_at": amc.at(7000),
    }
    last = amc.acme.history(task_id)[-1]
    assert last["type"] == "ended" and last["data"]["status"] == "failed" and last["data"]["reason"] == "reported"


@pytest.mark.req("RESULT/s2")
def test_reporting_cancelled_without_a_cancellation_is_a_conflict(amc):
    task_id, lease = amc.claimed(start=True)
    before = amc.acme.task(task_id)

    amc.h1.report(task_id, 1, lease["lease_id"], "cancelled", expect=409)

    assert problem(amc.h1) == (409, "no_cancellation_requested")
    assert amc.acme.task(task_id) == before
    assert amc.h1.host("h1")["devices"][0]["reservation"] is not None


@pytest.mark.req("RESULT/s3")
def test_a_different_report_for_an_ended_attempt_is_a_conflict(amc):
    task_id, lease = amc.claimed(start=True, plan=STEPS_ABC)
    steps = [{"id": s, "status": "completed"} for s in "abc"]
    amc.h1.report(task_id, 1, lease["lease_id"], "done", metadata={"a": 1}, steps=steps)
    before = amc.acme.task(task_id)

    for status, extra in [
        ("failed", {"metadata": {"a": 1}, "steps": steps}),
        ("done", {"metadata": {"a": 2}, "steps": steps}),
        ("done", {"metadata": {"a": 1}, "steps": steps[:2] + [{"id": "c", "status": "failed"}]}),
        ("done", {"metadata": {"a": 1}}),
    ]:
        amc.h1.report(task_id, 1, lease["lease_id"], status, expect=409, **extra)
        assert problem(amc.h1) == (409, "result_conflict")
    assert amc.acme.task(task_id) == before
    assert amc.h1.report(task_id, 1, lease["lease_id"], "done", metadata={"a": 1}, steps=steps) == before


def test_steps_must_name_every_planned_step_in_order(amc):
    task_id, lease = amc.claimed(start=True, plan=STEPS_ABC)
    for steps in (
        [{"id": "a", "status": "completed"}],
        [{"id": s, "status": "completed"} for s in "acb"],
        [{"id": s, "status": "completed"} for s in "abcd"],
        [{"id": s, "status": "cancelled"} for s in "abc"],
    ):
        amc.h1.report(task_id, 1, lease["lease_id"], "done", steps=steps, expect=400)
        assert problem(amc.h1) == (400, "invalid_request")
    assert amc.acme.task(task_id)["status"] == "dispatched"


def test_a_result_is_accepted_from_assigned(amc):
    task_id, lease = amc.claimed()
    assert amc.h1.report(task_id, 1, lease["lease_id"], "done")["status"] == "done"


def test_a_staged_plan_reports_every_step_of_every_stage(amc):
    plan = {
        "stages": [
            {"id": "s1", "steps": [{"id": "a", "action": "screenshot"}]},
            {"id": "s2", "steps": [{"id": "b", "action": "keyevent", "args": {"key": "KEYCODE_HOME"}}]},
        ]
    }
    task_id, lease = amc.claimed(start=True, plan=plan)
    assert amc.h1.task(task_id)["plan"] == {
        "stages": [{"id": "s1", "steps": [{"id": "a", "action": "screenshot", "args": {}}]}, plan["stages"][1]]
    }
    steps = [{"id": "a", "status": "completed"}, {"id": "b", "status": "completed"}]
    assert amc.h1.report(task_id, 1, lease["lease_id"], "done", steps=steps)["result"]["steps"] == steps


# -- CANCELLATION-RECORD --------------------------------------------------------------------


@pytest.mark.req("CANCELLATION-RECORD/s1")
def test_delivered_at_is_set_by_the_first_renewal_that_carries_it(amc):
    task_id, lease = amc.claimed(start=True)
    amc.acme.cancel(task_id, expect=202)
    amc.admin.advance(1)
    assert amc.h1.renew(task_id, 1, lease["lease_id"])["cancel_requested"] is True
    amc.admin.advance(1)
    assert amc.h1.renew(task_id, 1, lease["lease_id"])["cancel_requested"] is True

    assert amc.acme.task(task_id)["cancellation"]["delivered_at"] == amc.at(1000)
    assert amc.acme.types(task_id).count("cancellation_delivered") == 1


@pytest.mark.req("CANCELLATION-RECORD/s2")
@pytest.mark.parametrize("status", ["done", "failed"])
def test_a_pending_cancellation_overtaken_by_the_end_is_unfulfilled(amc, status):
    task_id, lease = amc.claimed(start=True)
    amc.admin.advance(1)
    amc.acme.cancel(task_id, "too slow", expect=202)

    task = amc.h1.report(task_id, 1, lease["lease_id"], status)

    assert task["status"] == status and task["result"]["reason"] == "reported"
    assert task["cancellation"] == {
        "state": "unfulfilled",
        "requested_at": amc.at(1000),
        "attempt": 1,
        "delivered_at": None,
        "reason": "too slow",
    }
    amc.acme.cancel(task_id, expect=409)
    assert problem(amc.acme) == (409, "task_terminal")


# -- INVENTORY ------------------------------------------------------------------------------


@pytest.mark.req("INVENTORY/s1")
def test_registration_replaces_the_inventory(amc):
    amc.h1.register(
        "h1",
        [
            {"serial": "emulator-5554", "attributes": {"model": "Pixel 7"}},
            {"serial": "emulator-5556", "attributes": {}},
        ],
    )
    amc.admin.advance(3)

    host = amc.h1.register(
        "h1", [{"serial": "emulator-5556", "attributes": {"model": "Pixel 8"}}, {"serial": "R58M", "attributes": {}}]
    )

    assert host == {
        "id": "h1",
        "updated_at": amc.at(3000),
        "last_seen_at": amc.at(3000),
        "online": True,
        "devices": [
            {"serial": "R58M", "attributes": {}, "online": True, "reservation": None},
            {"serial": "emulator-5556", "attributes": {"model": "Pixel 8"}, "online": True, "reservation": None},
        ],
    }
    assert amc.acme.host("h1") == host
    assert amc.admin.register("h1", [], expect=200)["devices"] == []


@pytest.mark.req("INVENTORY/s2")
@pytest.mark.parametrize("relist", [False, True])
def test_a_reserved_device_that_disappears_stays_until_its_attempt_ends(amc, relist):
    task_id, lease = amc.claimed(start=True)

    device = amc.h1.register("h1", [])["devices"][0]
    assert device["online"] is False and device["reservation"] == {"task_id": task_id, "attempt": 1}
    amc.h1.renew(task_id, 1, lease["lease_id"])
    if relist:
        device = amc.h1.register("h1", ["emulator-5554"])["devices"][0]
        assert device["online"] is True and device["reservation"] == {"task_id": task_id, "attempt": 1}
    amc.h1.report(task_id, 1, lease["lease_id"], "done")
    assert len(amc.h1.host("h1")["devices"]) == (1 if relist else 0)


def test_a_serial_listed_twice_is_refused(amc):
    amc.h1.register("h1", ["d1", "d1"], expect=400)
    assert "d1" in amc.h1.last.json()["detail"]
    amc.h1.host("h1", expect=404)


# -- TENANCY ------------------------------------------------------------------------------


@pytest.mark.req("TENANCY/s1")
def test_a_client_never_sees_another_tenants_task(amc):
    x = amc.acme.submit()["id"]

    for call in (
        lambda: amc.beta.task(x, expect=404),
        lambda: amc.beta.history(x, expect=404),
        lambda: amc.beta.cancel(x, expect=404),
    ):
        call()
        body = amc.beta.last.json()
        assert problem(amc.beta) == (404, "not_found")
        unknown_id = "t_" + "0" * 20
        amc.beta.task(unknown_id, expect=404)
        assert amc.beta.last.json() | {"detail": ""} == body | {"detail": ""}
        assert amc.beta.last.json()["detail"] == body["detail"].replace(x, unknown_id)
    task = amc.acme.task(x)
    assert task["status"] == "queued" and task["cancellation"] is None
    assert amc.beta.tasks()["tasks"] == []


@pytest.mark.req("TENANCY/s2")
def test_an_admin_acts_across_tenants(amc):
    x = amc.acme.submit()["id"]
    y = amc.beta.submit()["id"]

    assert [t["id"] for t in amc.admin.tasks()["tasks"]] == [x, y]
    assert amc.admin.cancel(x, expect=200)["status"] == "cancelled"
    assert amc.admin.submit(tenant="beta")["tenant"] == "beta"
    assert amc.admin.submit()["tenant"] == "default"
    amc.h1.register("h1", ["d1"])
    amc.admin.claim("h1", expect=403)
    assert problem(amc.admin) == (403, "forbidden")
    lease = amc.h1.claim("h1")
    amc.admin.report(lease["task_id"], 1, lease["lease_id"], "done", expect=403)
    assert problem(amc.admin) == (403, "forbidden")


def test_a_client_may_not_name_a_tenant(amc):
    amc.acme.submit(tenant="beta", expect=400)
    assert "tenant" in amc.acme.last.json()["detail"]


def test_a_host_reads_only_tasks_it_held(amc):
    task_id, _ = amc.claimed()
    other = amc.acme.submit()["id"]
    assert amc.h1.task(task_id)["id"] == task_id
    amc.h1.task(other, expect=404)
    amc.h2.task(task_id, expect=404)
    amc.h1.history(task_id, expect=403)


# -- HISTORY ------------------------------------------------------------------------------


@pytest.mark.req("HISTORY/s1")
def test_every_recorded_event_in_order_numbered_from_one(amc):
    task_id, first = amc.claimed(start=True, max_attempts=3)
    amc.h1.renew(task_id, 1, first["lease_id"])
    amc.h1.renew(task_id, 1, first["lease_id"])
    amc.admin.advance(30)
    amc.h2.register("h2", ["e1"])
    second = amc.h2.claim("h2")
    amc.h2.start(task_id, 2, second["lease_id"])
    amc.h2.start(task_id, 2, second["lease_id"])
    amc.acme.cancel(task_id, expect=202)
    amc.admin.advance(1)
    assert amc.h2.renew(task_id, 2, second["lease_id"])["cancel_requested"] is True
    amc.h2.report(task_id, 2, second["lease_id"], "cancelled")

    events = amc.acme.history(task_id)

    assert [(e["seq"], e["type"]) for e in events] == list(
        enumerate(
            [
                "submitted",
                "assigned",
                "dispatched",
                "lease_expired",
                "requeued",
                "assigned",
                "dispatched",
                "cancellation_requested",
                "cancellation_delivered",
                "ended",
            ],
            start=1,
        )
    )
    assert events[-1]["data"]["status"] == "cancelled" and events[-1]["data"]["reason"] == "reported"
    times = [from_rfc3339(e["at"]) for e in events]
    assert times == sorted(times)
    assert amc.admin.history(task_id) == events


# -- CLOCK --------------------------------------------------------------------------------


@pytest.mark.req("CLOCK/s1")
def test_times_on_the_wire_and_the_manual_clock(amc):
    now = amc.admin.advance(1.5)["now"]
    assert now == amc.at(1500)
    task_id, _ = amc.claimed(start=True)
    task = amc.acme.task(task_id)
    times = [task["created_at"], task["updated_at"], *task["attempts"][0].values()]
    assert all(TIME.match(t) for t in times if isinstance(t, str) and t.startswith("20"))
    for bad in (0, -1, 0.0001, "1", None, True):
        amc.admin.advance(bad, expect=400)
        assert problem(amc.admin) == (400, "invalid_request")
    amc.acme.advance(1, expect=403)
    amc.h1.advance(1, expect=403)
    amc.anon.advance(1, expect=401)


def test_the_clock_endpoint_is_absent_without_a_manual_clock(make_amc):
    """Without a manual clock an admin gets 404; anyone else is refused as on any clock (401, 403)."""
    amc = make_amc(clock="system")
    amc.admin.advance(1, expect=404)
    assert problem(amc.admin) == (404, "not_found")
    amc.admin.request("POST", "/v1/admin/clock", json={"advance_seconds": "x"}, expect=404)  # 404 before 400
    amc.acme.advance(1, expect=403)
    amc.h1.advance(1, expect=403)
    amc.anon.advance(1, expect=401)


# -- listing ------------------------------------------------------------------------------


@pytest.mark.req("LISTING/s1")
def test_listing_pages_oldest_first_with_a_cursor(amc):
    ids = [amc.acme.submit()["id"] for _ in range(5)]
    amc.beta.submit()
    amc.acme.cancel(ids[1], expect=200)

    seen, after = [], None
    while True:
        page = amc.acme.tasks(limit=2, **({"after": after} if after else {}))
        seen += [t["id"] for t in page["tasks"]]
        after = page["next"]
        if after is None:
            break
    assert seen == ids
    assert [t["id"] for t in amc.acme.tasks(status="cancelled")["tasks"]] == [ids[1]]
    assert [t["id"] for t in amc.acme.tasks(status="queued", limit=1000)["tasks"]] == ids[:1] + ids[2:]
    assert len(amc.admin.tasks()["tasks"]) == 6
    for params in (
        {"limit": 0},
        {"limit": 1001},
        {"limit": "x"},
        {"status": "nope"},
        {"after": "garbage"},
        {"sort": "asc"},
    ):
        amc.acme.tasks(expect=400, **params)
        assert problem(amc.acme) == (400, "invalid_request")
        assert next(iter(params)) in amc.acme.last.json()["detail"]


@pytest.mark.req("LISTING/s3")
def test_listing_newest_first_and_by_label(amc_any_store):
    amc = amc_any_store
    ids = [amc.acme.submit(labels={"suite": "smoke"} if n in (1, 3) else {})["id"] for n in range(5)]
    amc.beta.submit(labels={"suite": "smoke"})

    seen, after = [], None
    while True:
        page = amc.acme.tasks(limit=2, order="newest", **({"after": after} if after else {}))
        seen += [t["id"] for t in page["tasks"]]
        after = page["next"]
        if after is None:
            break
    assert seen == ids[::-1]
    assert [t["id"] for t in amc.acme.tasks(label="suite=smoke")["tasks"]] == [ids[1], ids[3]]
    assert [t["id"] for t in amc.acme.tasks(label="suite=smoke", order="newest")["tasks"]] == [ids[3], ids[1]]
    assert amc.acme.tasks(label="suite=other")["tasks"] == []
    assert amc.acme.tasks(label="suite=smoke", status="done")["tasks"] == []
    assert len(amc.admin.tasks(label="suite=smoke")["tasks"]) == 3
    for params in ({"order": "oldest-first"}, {"label": "suite"}, {"label": "=smoke"}):
        amc.acme.tasks(expect=400, **params)
        assert problem(amc.acme) == (400, "invalid_request")
        assert next(iter(params)) in amc.acme.last.json()["detail"]


@pytest.mark.req("LISTING/s3")
def test_a_label_filter_examines_a_bounded_number_of_tasks_per_page(amc_any_store, monkeypatch):
    """A rare label costs pages, not one unbounded scan: every page stops after the bound,
    with a cursor, and following the cursors finds every labelled task once, in either order."""
    amc = amc_any_store
    monkeypatch.setattr("amc.service.port.LABEL_SCAN_LIMIT", 3)
    ids = [amc.acme.submit(labels={"rare": "yes"} if n in (0, 6) else {})["id"] for n in range(8)]
    for order, expected in (("oldest", [ids[0], ids[6]]), ("newest", [ids[6], ids[0]])):
        seen, pages, after = [], 0, None
        while True:
            page = amc.acme.tasks(limit=10, order=order, label="rare=yes", **({"after": after} if after else {}))
            pages += 1
            assert len(page["tasks"]) <= 3
            seen += [t["id"] for t in page["tasks"]]
            after = page["next"]
            if after is None:
                break
        assert seen == expected
        assert pages == 3  # 8 tasks, 3 examined per page
