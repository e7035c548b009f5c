"""Submitting tasks: SUBMIT, SUBMIT-IDEMPOTENT (specs/requirements/protocol-rules.md)."""

from __future__ import annotations

import pytest

from amc.conformance.client import PLAN, wire


def queued_ids(client) -> set[str]:
    return {task["id"] for task in client.all_tasks(status="queued")}


@pytest.mark.req("SUBMIT/s1")
def test_a_valid_submission_creates_a_queued_task_with_defaults(scene):
    """The minimal body gives a queued task with every default, readable and with one history event."""
    acme, clock = scene.acme, scene.clock
    # Given a client token of tenant acme
    # When it posts only a plan
    task = acme.submit_task(plan=PLAN, expect=201)

    # Then the task is queued, in acme, with the defaults
    assert isinstance(task["id"], str) and task["id"]
    assert task["status"] == "queued"
    assert task["tenant"] == acme.tenant
    assert (task["priority"], task["max_attempts"], task["labels"]) == (0, 3, {})
    assert task["requirements"] == {"serial": None, "attributes": {}}
    assert task["plan"] == PLAN
    assert (task["attempt"], task["attempts"], task["cancellation"], task["result"]) == (None, [], None, None)
    assert task["created_at"] == task["updated_at"]
    if clock.manual:
        assert task["created_at"] == wire(clock.now())
    # And it reads the same, with one history event
    assert acme.get_task(task["id"]) == task
    history = acme.history(task["id"])
    assert [(e["seq"], e["type"]) for e in history] == [(1, "submitted")]
    assert history[0]["at"] == task["created_at"]


INVALID_PLANS = {
    "missing argument": ("tap1", {"id": "tap1", "action": "tap", "args": {"x": 10}}),
    "unknown action": ("fly1", {"id": "fly1", "action": "fly", "args": {}}),
    "unknown argument": ("open2", {"id": "open2", "action": "launch", "args": {"package": "p", "colour": "red"}}),
    "wrongly typed argument": ("tap2", {"id": "tap2", "action": "tap", "args": {"x": "10", "y": 20}}),
    "duplicate step id": ("open", {"id": "open", "action": "screenshot", "args": {}}),
}


@pytest.mark.req("SUBMIT/s2")
@pytest.mark.parametrize("case", sorted(INVALID_PLANS))
def test_an_invalid_plan_is_refused_naming_the_offending_step(scene, case):
    """400 invalid_request whose detail names the offending step; no task is created."""
    acme = scene.acme
    # Given a client of acme
    before = queued_ids(acme)
    step_id, bad_step = INVALID_PLANS[case]

    # When it posts a plan whose second step is invalid
    plan = {"steps": [PLAN["steps"][0], bad_step]}
    problem = scene.submit(plan=plan, expect=(400, "invalid_request"))

    # Then the detail names the step, and no task was created
    assert step_id in problem["detail"], problem
    assert queued_ids(acme) == before


@pytest.mark.req("SUBMIT")
def test_empty_plans_and_out_of_range_members_are_refused(scene):
    """Empty plan or stage, priority, max_attempts, unknown members and a client's tenant: 400."""
    acme = scene.acme
    before = queued_ids(acme)
    scene.submit(plan={"steps": []}, expect=(400, "invalid_request"))
    empty_stage = scene.submit(plan={"stages": [{"id": "st1", "steps": []}]}, expect=(400, "invalid_request"))
    assert "st1" in empty_stage["detail"]
    for fields in (
        {"priority": 1001},
        {"priority": -1001},
        {"max_attempts": 0},
        {"max_attempts": 101},
        {"colour": "red"},
        {"tenant": scene.beta.tenant},
        {"idempotency_key": "not a key!"},
        {"idempotency_key": ""},
        {"idempotency_key": "k" * 129},
    ):
        scene.submit(expect=(400, "invalid_request"), **fields)
    assert queued_ids(acme) == before
    # (the bounds themselves are accepted)
    scene.submit(priority=1000, max_attempts=100, idempotency_key=scene.key("A-z0-9._~"))
    scene.submit(priority=-1000, max_attempts=1)


@pytest.mark.req("SUBMIT")
def test_only_clients_and_admins_submit(scene):
    """A host may not submit: 403."""
    scene.h1.caller.submit_task(plan=PLAN, expect=(403, "forbidden"))


@pytest.mark.req("SUBMIT-IDEMPOTENT/s1")
def test_same_key_same_body_answers_the_existing_task(scene):
    """The same key with the same body (defaults spelt out) answers 200 with the existing task."""
    acme, h1 = scene.acme, scene.h1
    # Given acme submitted plan P with key k-1 and got t1
    key, requirements = scene.key("k-1"), scene.requirements()
    t1 = acme.submit_task(plan=PLAN, requirements=requirements, idempotency_key=key, expect=201)
    before = queued_ids(acme)

    # When it submits the same body with the defaults spelt out
    again = acme.submit_task(
        plan=PLAN, requirements=requirements, priority=0, max_attempts=3, labels={}, idempotency_key=key, expect=200
    )

    # Then the answer is t1, and no second task exists
    assert again == t1
    assert queued_ids(acme) == before
    assert acme.event_types(t1["id"]) == ["submitted"]
    # And once t1 is claimed, the retry shows its current status
    h1.register(scene.device("emulator-5554"))
    assert h1.claim().task_id == t1["id"]
    later = acme.submit_task(plan=PLAN, requirements=requirements, idempotency_key=key, expect=200)
    assert (later["id"], later["status"]) == (t1["id"], "assigned")


@pytest.mark.req("SUBMIT-IDEMPOTENT/s2")
def test_same_key_different_body_is_a_conflict(scene):
    """The same key with another priority is 409 idempotency_conflict and changes nothing."""
    acme = scene.acme
    # Given acme submitted plan P with key k-1 and got t1
    key, requirements = scene.key("k-1"), scene.requirements()
    t1 = acme.submit_task(plan=PLAN, requirements=requirements, idempotency_key=key, expect=201)
    before = queued_ids(acme)

    # When it submits plan P with priority 5 and key k-1
    acme.submit_task(
        plan=PLAN, requirements=requirements, priority=5, idempotency_key=key, expect=(409, "idempotency_conflict")
    )

    # Then t1 still has priority 0, and no other task exists
    assert acme.get_task(t1["id"]) == t1
    assert queued_ids(acme) == before


@pytest.mark.req("SUBMIT-IDEMPOTENT/s3")
def test_keys_are_scoped_to_the_tenant(scene):
    """Another tenant's use of a key creates its own task; an admin's submit into acme shares acme's keys."""
    acme, beta, admin = scene.acme, scene.beta, scene.admin
    # Given acme used key k-1 for t1
    key, requirements = scene.key("k-1"), scene.requirements()
    t1 = acme.submit_task(plan=PLAN, requirements=requirements, idempotency_key=key, expect=201)

    # When beta submits any body with key k-1
    t2 = beta.submit_task(plan=PLAN, requirements=requirements, priority=7, idempotency_key=key, expect=201)

    # Then beta gets a new task of its own, and t1 is unaffected
    assert t2["id"] != t1["id"]
    assert t2["tenant"] == beta.tenant
    assert acme.get_task(t1["id"]) == t1
    # And an admin submitting into acme with key k-1 and another body conflicts with t1 (the key is
    # acme's), while the same into beta conflicts with t2: keys belong to the tenant the task goes to
    admin.submit_task(
        plan=PLAN,
        requirements=requirements,
        priority=3,
        idempotency_key=key,
        tenant=acme.tenant,
        expect=(409, "idempotency_conflict"),
    )
    admin.submit_task(
        plan=PLAN,
        requirements=requirements,
        priority=3,
        idempotency_key=key,
        tenant=beta.tenant,
        expect=(409, "idempotency_conflict"),
    )
    assert acme.get_task(t1["id"]) == t1
    assert beta.get_task(t2["id"]) == t2
