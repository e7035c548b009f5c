"""Malformed input of every kind is a 400 `invalid_request` whose detail names the field,
never a 5xx, and a refused request changes nothing."""

from __future__ import annotations

import orjson
import pytest

from tests.adapters.http.test_access import snapshot
from tests.support.http import problem
from tests.support.plans import PLAN


def plan_of(*steps):
    return {"steps": list(steps)}


def step(step_id="s", action="screenshot", **args):
    return {"id": step_id, "action": action, "args": args}


def submit(**fields):
    return orjson.dumps({"plan": PLAN, **fields})


SUBMIT = [
    ("not json", b"{", "body"),
    ("truncated", b'{"plan": {"steps": [', "body"),
    ("a list", b"[]", "body"),
    ("null", b"null", "body"),
    ("empty", b"", "body"),
    ("NaN", b'{"plan": {"steps": []}, "priority": NaN}', "body"),
    ("Infinity", b'{"plan": {"steps": []}, "priority": Infinity}', "body"),
    ("not UTF-8", b'{"plan": "\xff"}', "body"),
    ("no plan", b'{"priority": 1}', "plan"),
    ("unknown member", submit(prio=1), "prio"),
    ("priority a string", submit(priority="5"), "priority"),
    ("priority a float", submit(priority=1.5), "priority"),
    ("priority a boolean", submit(priority=True), "priority"),
    ("priority too high", submit(priority=1001), "priority"),
    ("priority too low", submit(priority=-1001), "priority"),
    (
        "priority beyond 64 bits",
        b'{"plan": {"steps": [{"id": "s", "action": "screenshot"}]}, "priority": 99999999999999999999999}',
        "priority",
    ),
    ("max_attempts 0", submit(max_attempts=0), "max_attempts"),
    ("max_attempts 101", submit(max_attempts=101), "max_attempts"),
    ("labels a list", submit(labels=["a"]), "labels"),
    ("label value a number", submit(labels={"a": 1}), "labels"),
    ("too many labels", submit(labels={f"k{i}": "v" for i in range(65)}), "labels"),
    ("label too long", submit(labels={"k": "v" * 257}), "labels"),
    ("requirements a string", submit(requirements="x"), "requirements"),
    ("requirement serial a number", submit(requirements={"serial": 5}), "requirements.serial"),
    ("requirement unknown member", submit(requirements={"attrs": {}}), "attrs"),
    ("requirement attribute nested", submit(requirements={"attributes": {"a": {"b": "c"}}}), "requirements.attributes"),
    ("idempotency key with a space", submit(idempotency_key="a b"), "idempotency_key"),
    ("idempotency key empty", submit(idempotency_key=""), "idempotency_key"),
    ("idempotency key too long", submit(idempotency_key="k" * 129), "idempotency_key"),
    ("tenant from a client", submit(tenant="acme"), "tenant"),
    ("plan a string", orjson.dumps({"plan": "steps"}), "plan"),
    ("plan empty", orjson.dumps({"plan": {}}), "plan"),
    ("plan with no steps", orjson.dumps({"plan": {"steps": []}}), "plan.steps"),
    ("plan with steps and stages", orjson.dumps({"plan": {"steps": [step()], "stages": []}}), "plan"),
    ("plan unknown member", orjson.dumps({"plan": {"steps": [step()], "loop": True}}), "loop"),
    ("empty stage", orjson.dumps({"plan": {"stages": [{"id": "st1", "steps": []}]}}), "st1"),
    ("stage without steps", orjson.dumps({"plan": {"stages": [{"id": "st1"}]}}), "st1"),
    ("stages empty", orjson.dumps({"plan": {"stages": []}}), "plan.stages"),
    (
        "duplicate stage id",
        orjson.dumps({"plan": {"stages": [{"id": "st", "steps": [step("a")]}, {"id": "st", "steps": [step("b")]}]}}),
        "st",
    ),
    (
        "duplicate step id across stages",
        orjson.dumps(
            {"plan": {"stages": [{"id": "s1", "steps": [step("dup")]}, {"id": "s2", "steps": [step("dup")]}]}}
        ),
        "dup",
    ),
    ("duplicate step id", orjson.dumps({"plan": plan_of(step("twice"), step("twice"))}), "twice"),
    ("step without id", orjson.dumps({"plan": plan_of({"action": "screenshot"})}), "plan.steps[0]"),
    ("step id a number", orjson.dumps({"plan": plan_of({"id": 7, "action": "screenshot"})}), "plan.steps[0]"),
    ("step a string", orjson.dumps({"plan": {"steps": ["tap"]}}), "plan.steps[0]"),
    ("unknown action", orjson.dumps({"plan": plan_of(step("s9", "fly"))}), "s9"),
    ("action missing", orjson.dumps({"plan": plan_of({"id": "s8"})}), "s8"),
    ("step unknown member", orjson.dumps({"plan": plan_of(step("s7") | {"when": "now"})}), "s7"),
    ("args a list", orjson.dumps({"plan": plan_of({"id": "s6", "action": "tap", "args": [1, 2]})}), "s6"),
    ("missing argument", orjson.dumps({"plan": plan_of(step("tap1", "tap", x=10))}), "tap1"),
    ("unknown argument", orjson.dumps({"plan": plan_of(step("sh", "shell", command="ls", user="root"))}), "sh"),
    ("argument wrong type", orjson.dumps({"plan": plan_of(step("tap2", "tap", x="10", y=1))}), "tap2"),
    ("negative coordinate", orjson.dumps({"plan": plan_of(step("tap3", "tap", x=-1, y=1))}), "tap3"),
    ("negative wait", orjson.dumps({"plan": plan_of(step("w1", "wait", seconds=-1))}), "w1"),
    ("empty shell command", orjson.dumps({"plan": plan_of(step("sh2", "shell", command=""))}), "sh2"),
    ("timeout zero", orjson.dumps({"plan": plan_of(step("sh3", "shell", command="ls", timeout_seconds=0))}), "sh3"),
    (
        "swipe duration float",
        orjson.dumps({"plan": plan_of(step("sw", "swipe", x1=0, y1=0, x2=1, y2=1, duration_ms=1.5))}),
        "sw",
    ),
    ("keyevent key a list", orjson.dumps({"plan": plan_of(step("k1", "keyevent", key=[3]))}), "k1"),
    ("launch package a number", orjson.dumps({"plan": plan_of(step("l1", "launch", package=5))}), "l1"),
    ("screenshot with an argument", orjson.dumps({"plan": plan_of(step("sc", "screenshot", scale=2))}), "sc"),
    ("text missing", orjson.dumps({"plan": plan_of(step("tx", "text"))}), "tx"),
    ("ui_dump with an argument", orjson.dumps({"plan": plan_of(step("ui", "ui_dump", path="/sdcard/x"))}), "ui"),
    ("logcat lines zero", orjson.dumps({"plan": plan_of(step("lc", "logcat", lines=0))}), "lc"),
    ("too many steps", orjson.dumps({"plan": plan_of(*[step(f"s{i}") for i in range(1001)])}), "s1000"),
]

OTHERS = [
    # (name, method, path, body, named)
    ("claim not json", "POST", "/v1/hosts/h1/claim", b"{x", "body"),
    ("claim a list", "POST", "/v1/hosts/h1/claim", b"[1]", "body"),
    ("claim unknown member", "POST", "/v1/hosts/h1/claim", {"wait": 1}, "wait"),
    ("claim wait too long", "POST", "/v1/hosts/h1/claim", {"wait_seconds": 31}, "wait_seconds"),
    ("claim wait negative", "POST", "/v1/hosts/h1/claim", {"wait_seconds": -1}, "wait_seconds"),
    ("claim wait a string", "POST", "/v1/hosts/h1/claim", {"wait_seconds": "1"}, "wait_seconds"),
    ("claim lease a string", "POST", "/v1/hosts/h1/claim", {"lease_seconds": "30"}, "lease_seconds"),
    ("claim lease a boolean", "POST", "/v1/hosts/h1/claim", {"lease_seconds": True}, "lease_seconds"),
    ("claim lease too long", "POST", "/v1/hosts/h1/claim", {"lease_seconds": 601}, "lease_seconds"),
    ("claim devices a string", "POST", "/v1/hosts/h1/claim", {"devices": "emulator-5554"}, "devices"),
    ("claim devices of numbers", "POST", "/v1/hosts/h1/claim", {"devices": [5554]}, "devices[0]"),
    ("renew without lease_id", "POST", "/v1/tasks/{x}/attempts/1/renew", {}, "lease_id"),
    ("renew lease_id a number", "POST", "/v1/tasks/{x}/attempts/1/renew", {"lease_id": 1}, "lease_id"),
    ("renew unknown member", "POST", "/v1/tasks/{x}/attempts/1/renew", {"lease_id": "{lease}", "x": 1}, "x"),
    ("renew empty body", "POST", "/v1/tasks/{x}/attempts/1/renew", b"", "body"),
    ("start not json", "POST", "/v1/tasks/{x}/attempts/1/start", b"lease", "body"),
    (
        "result unknown status",
        "POST",
        "/v1/tasks/{x}/attempts/1/result",
        {"lease_id": "{lease}", "status": "finished"},
        "status",
    ),
    ("result without status", "POST", "/v1/tasks/{x}/attempts/1/result", {"lease_id": "{lease}"}, "status"),
    (
        "result metadata a string",
        "POST",
        "/v1/tasks/{x}/attempts/1/result",
        {"lease_id": "{lease}", "status": "done", "metadata": "x"},
        "metadata",
    ),
    (
        "result metadata too large",
        "POST",
        "/v1/tasks/{x}/attempts/1/result",
        {"lease_id": "{lease}", "status": "done", "metadata": {"blob": "x" * 70_000}},
        "metadata",
    ),
    (
        "result steps an object",
        "POST",
        "/v1/tasks/{x}/attempts/1/result",
        {"lease_id": "{lease}", "status": "done", "steps": {"open": "completed"}},
        "steps",
    ),
    (
        "result step status unknown",
        "POST",
        "/v1/tasks/{x}/attempts/1/result",
        {"lease_id": "{lease}", "status": "done", "steps": [{"id": "open", "status": "cancelled"}]},
        "open",
    ),
    (
        "result step time malformed",
        "POST",
        "/v1/tasks/{x}/attempts/1/result",
        {
            "lease_id": "{lease}",
            "status": "done",
            "steps": [{"id": "open", "status": "completed", "started_at": "yesterday"}],
        },
        "started_at",
    ),
    (
        "result step unplanned",
        "POST",
        "/v1/tasks/{x}/attempts/1/result",
        {"lease_id": "{lease}", "status": "done", "steps": [{"id": "close", "status": "completed"}]},
        "steps",
    ),
    ("inventory without devices", "PUT", "/v1/hosts/h1", {}, "devices"),
    ("inventory serial empty", "PUT", "/v1/hosts/h1", {"devices": [{"serial": ""}]}, "devices[0].serial"),
    (
        "inventory attribute nested",
        "PUT",
        "/v1/hosts/h1",
        {"devices": [{"serial": "d", "attributes": {"a": ["b"]}}]},
        "devices[0].attributes",
    ),
    ("inventory serial twice", "PUT", "/v1/hosts/h1", {"devices": [{"serial": "d"}, {"serial": "d"}]}, "d"),
    (
        "inventory too many devices",
        "PUT",
        "/v1/hosts/h1",
        {"devices": [{"serial": f"d{i}"} for i in range(257)]},
        "devices",
    ),
    ("cancel reason a number", "POST", "/v1/tasks/{x}/cancel", {"reason": 5}, "reason"),
    ("cancel reason too long", "POST", "/v1/tasks/{x}/cancel", {"reason": "r" * 1025}, "reason"),
    ("cancel unknown member", "POST", "/v1/tasks/{x}/cancel", {"why": "x"}, "why"),
    ("cancel not json", "POST", "/v1/tasks/{x}/cancel", b"reason=x", "body"),
    ("clock without advance", "POST", "/v1/admin/clock", {}, "advance_seconds"),
    ("clock advance a string", "POST", "/v1/admin/clock", {"advance_seconds": "1"}, "advance_seconds"),
    ("clock advance zero", "POST", "/v1/admin/clock", {"advance_seconds": 0}, "advance_seconds"),
]

CALLER_FOR = {
    "/v1/hosts/h1/claim": "h1",
    "/v1/admin/clock": "admin",
    "/v1/tasks/{x}/cancel": "acme",
    "/v1/hosts/h1": "h1",
}


@pytest.fixture
def world(amc):
    task_id, lease = amc.claimed(start=True)
    amc.acme.submit()  # a queued task, which a wrongly accepted claim would take
    return amc, task_id, lease["lease_id"]


def _expect_refusal(amc, task_id, caller, method, path, body, named):
    before = snapshot(amc, task_id)
    kwargs = {"content": body} if isinstance(body, bytes) else {"json": body}
    response = caller.request(method, path, **kwargs, headers={"Content-Type": "application/json"})
    assert response.status_code == 400, response.text
    assert problem(caller) == (400, "invalid_request")
    assert named in response.json()["detail"], response.json()["detail"]
    assert snapshot(amc, task_id) == before


@pytest.mark.req("SUBMIT/s2")
@pytest.mark.parametrize("name, body, named", SUBMIT, ids=[case[0] for case in SUBMIT])
def test_bad_submissions(world, name, body, named):
    amc, task_id, _ = world
    _expect_refusal(amc, task_id, amc.acme, "POST", "/v1/tasks", body, named)


@pytest.mark.parametrize("name, method, path, body, named", OTHERS, ids=[case[0] for case in OTHERS])
@pytest.mark.req("INPUT/s1")
def test_bad_bodies(world, name, method, path, body, named):
    amc, task_id, lease_id = world
    caller = getattr(amc, CALLER_FOR.get(path, "h1"))
    if isinstance(body, dict):
        body = orjson.loads(orjson.dumps(body).replace(b"{lease}", lease_id.encode()))
    _expect_refusal(amc, task_id, caller, method, path.replace("{x}", task_id), body, named)


def test_a_body_that_spells_out_defaults_is_accepted(amc):
    task = amc.acme.submit(
        PLAN,
        requirements={"serial": None, "attributes": {}},
        priority=0,
        max_attempts=3,
        labels={},
        idempotency_key=None,
    )
    assert task["status"] == "queued"


def test_every_action_with_every_argument_is_accepted(amc):
    plan = plan_of(
        step("a", "shell", command="ls", timeout_seconds=2.5),
        step("b", "tap", x=1, y=2),
        step("c", "swipe", x1=0, y1=0, x2=5, y2=5, duration_ms=300),
        step("d", "text", text=""),
        step("e", "keyevent", key="KEYCODE_HOME"),
        step("f", "keyevent", key=3),
        step("g", "launch", package="com.x", activity=".Main"),
        step("h", "screenshot"),
        step("i", "wait", seconds=0.5),
        {"id": "j", "action": "screenshot"},
        step("k", "ui_dump"),
        step("l", "logcat"),
        step("m", "logcat", lines=50),
    )
    task = amc.acme.submit(plan)
    assert [s["id"] for s in task["plan"]["steps"]] == list("abcdefghijklm")
    assert task["plan"]["steps"][9] == {"id": "j", "action": "screenshot", "args": {}}
