"""specs/requirements/steering.md over HTTP: messages to tasks (steer, follow-up, pause,
resume), their delivery in start and renewal responses, the hosts' acknowledgements, the
successor tasks of follow-ups, who may do what, and bad input of every kind.

The host side is driven by hand (claim, start, renew, acknowledge, result), so each test
says exactly what the host did and when; the Host Agent's own part is tested with it.
"""

from __future__ import annotations

import signal
import threading
import time

import orjson
import pytest

from tests.adapters.http.test_metrics import samples
from tests.adapters.http.test_serve import TOKENS, Served, needs_lmdb
from tests.support.http import hosts_as_recorded, problem
from tests.support.plans import PLAN, STEPS_ABC


def wait_plan(*ids):
    return {"steps": [{"id": i, "action": "wait", "args": {"seconds": 1}} for i in ids]}


def screenshot(step_id):
    return {"id": step_id, "action": "screenshot", "args": {}}


def outcomes(*pairs):
    """Step outcomes: ``("a", "completed")`` or ``("b", "not_started", "steered")``."""
    return [{"id": p[0], "status": p[1], **({"reason": p[2]} if len(p) > 2 else {})} for p in pairs]


def snapshot(amc, *task_ids):
    """Everything a refused request must leave as it was."""
    return (
        amc.admin.tasks()["tasks"],
        hosts_as_recorded(amc.admin.hosts()),
        [(amc.admin.history(t), amc.admin.messages(t)) for t in task_ids],
    )


def delivered(amc, plan=STEPS_ABC, **message):
    """Task X dispatched on h1 and a message posted to it and carried by a renewal:
    (task id, lease, message id)."""
    task_id, lease = amc.claimed(start=True, plan=plan)
    posted = amc.acme.post_message(task_id, **message)
    grant = amc.h1.renew(task_id, 1, lease["lease_id"])
    assert [m["id"] for m in grant["messages"]] == [posted["id"]]
    return task_id, lease, posted["id"]


def successors(amc, task_id):
    return [t for t in amc.admin.tasks()["tasks"] if t["follow_up_of"] == task_id]


# -- DELIVERY ----------------------------------------------------------------------------------


@pytest.mark.req("DELIVERY/s1")
def test_queued_delivered_admitted_and_completed_are_distinct_states(amc):
    task_id, lease = amc.claimed(start=True, plan=wait_plan("a", "b", "c", "d"))
    amc.admin.advance(1)

    posted = amc.acme.post_message(task_id, "steer", data={"skip": ["d"]})

    assert amc.acme.last.headers["location"] == f"/v1/tasks/{task_id}/messages/{posted['id']}"
    assert posted["id"].startswith("m_")
    assert posted == {
        "id": posted["id"],
        "intent": "steer",
        "text": None,
        "data": {"skip": ["d"]},
        "state": "queued",
        "created_at": amc.at(1000),
        "attempt": None,
        "delivered_at": None,
        "admitted_at": None,
        "completed_at": None,
        "boundary": None,
        "detail": None,
        "successor": None,
    }
    assert amc.acme.message(task_id, posted["id"]) == posted
    amc.admin.advance(1)

    grant = amc.h1.renew(task_id, 1, lease["lease_id"])

    now = amc.acme.message(task_id, posted["id"])
    assert grant["messages"] == [now]
    assert (now["state"], now["attempt"], now["delivered_at"], now["admitted_at"]) == (
        "delivered",
        1,
        amc.at(2000),
        None,
    )
    history = amc.acme.history(task_id)
    assert [e["type"] for e in history[-2:]] == ["message_posted", "message_delivered"]
    assert history[-1]["data"] == {"attempt": 1, "message_ids": [posted["id"]]}
    amc.admin.advance(1)

    admitted = amc.h1.acknowledge(
        task_id, 1, lease["lease_id"], posted["id"], "admitted", boundary={"before_step": "c"}
    )

    assert admitted == amc.acme.message(task_id, posted["id"])
    assert (admitted["state"], admitted["delivered_at"], admitted["admitted_at"], admitted["completed_at"]) == (
        "admitted",
        amc.at(2000),
        amc.at(3000),
        None,
    )
    assert admitted["boundary"] == {"before_step": "c"}
    amc.admin.advance(1)

    completed = amc.h1.acknowledge(task_id, 1, lease["lease_id"], posted["id"], "completed")

    assert (completed["state"], completed["delivered_at"], completed["admitted_at"], completed["completed_at"]) == (
        "completed",
        amc.at(2000),
        amc.at(3000),
        amc.at(4000),
    )
    acks = [e["data"] for e in amc.acme.history(task_id) if e["type"] == "message_acknowledged"]
    assert [(a["message_id"], a["state"], a["boundary"]) for a in acks] == [
        (posted["id"], "admitted", {"before_step": "c"}),
        (posted["id"], "completed", None),
    ]
    assert amc.h1.renew(task_id, 1, lease["lease_id"])["messages"] == []
    steps = outcomes(("a", "completed"), ("b", "completed"), ("c", "completed"), ("d", "not_started", "steered"))
    assert amc.h1.report(task_id, 1, lease["lease_id"], "done", steps=steps)["result"]["steps"] == steps


@pytest.mark.req("DELIVERY/s1")
def test_a_start_response_carries_what_was_posted_before_the_host_started(amc):
    task_id, lease = amc.claimed(plan=STEPS_ABC)
    posted = amc.acme.post_message(task_id, "steer", text="use the staging server")

    grant = amc.h1.start(task_id, 1, lease["lease_id"])

    assert grant["status"] == "dispatched"
    assert [(m["id"], m["state"], m["text"]) for m in grant["messages"]] == [
        (posted["id"], "delivered", "use the staging server")
    ]


@pytest.mark.req("DELIVERY/s2")
def test_a_message_is_redelivered_under_its_id_until_acknowledged_and_a_repeated_ack_changes_nothing(amc):
    task_id, lease = amc.claimed(start=True, plan=STEPS_ABC)
    edit = {"insert_after": "a", "steps": [screenshot("a2")]}
    posted = amc.acme.post_message(task_id, "steer", data=edit)
    first = amc.h1.renew(task_id, 1, lease["lease_id"])["messages"]
    amc.admin.advance(2)

    again = amc.h1.renew(task_id, 1, lease["lease_id"])["messages"]

    assert again == first and [m["id"] for m in again] == [posted["id"]]
    assert again[0]["delivered_at"] == amc.at(0)
    assert amc.acme.types(task_id).count("message_delivered") == 1
    ack = {"boundary": {"before_step": "b"}}
    admitted = amc.h1.acknowledge(task_id, 1, lease["lease_id"], posted["id"], "admitted", **ack)
    before = snapshot(amc, task_id), amc.acme.task(task_id)
    amc.admin.advance(1)

    repeated = amc.h1.acknowledge(task_id, 1, lease["lease_id"], posted["id"], "admitted", **ack)

    assert repeated == admitted
    assert (snapshot(amc, task_id), amc.acme.task(task_id)) == before
    assert amc.h1.renew(task_id, 1, lease["lease_id"])["messages"] == []
    completed = amc.h1.acknowledge(task_id, 1, lease["lease_id"], posted["id"], "completed")
    assert amc.h1.acknowledge(task_id, 1, lease["lease_id"], posted["id"], "completed") == completed

    amc.h1.acknowledge(task_id, 1, lease["lease_id"], posted["id"], "admitted", **ack, expect=409)

    assert problem(amc.h1) == (409, "message_conflict")
    assert amc.acme.message(task_id, posted["id"]) == completed
    # The plan the result reports has `a2` once, where it was inserted.
    steps = outcomes(("a", "completed"), ("a2", "completed"), ("b", "completed"), ("c", "completed"))
    assert amc.h1.report(task_id, 1, lease["lease_id"], "done", steps=steps)["status"] == "done"


@pytest.mark.req("DELIVERY/s2")
@pytest.mark.parametrize(
    "path",
    [
        ["completed"],  # skipping admitted
        ["rejected", "admitted"],
        ["rejected", "completed"],
        ["admitted", "rejected"],
    ],
    ids=lambda path: "-then-".join(path),
)
def test_an_acknowledgement_never_skips_admitted_nor_moves_back(amc, path):
    task_id, lease, message_id = delivered(amc, intent="steer", data={"skip": ["c"]})
    *allowed, refused = path
    for state in allowed:
        amc.h1.acknowledge(
            task_id,
            1,
            lease["lease_id"],
            message_id,
            state,
            boundary={"before_step": "b"},
            detail="b had already started",
        )
    before = snapshot(amc, task_id)

    amc.h1.acknowledge(
        task_id,
        1,
        lease["lease_id"],
        message_id,
        refused,
        boundary={"before_step": "b"},
        detail="b had already started",
        expect=409,
    )

    assert problem(amc.h1) == (409, "message_conflict")
    assert snapshot(amc, task_id) == before


def test_a_rejected_message_says_why(amc):
    task_id, lease, message_id = delivered(amc, intent="steer", data={"skip": ["a"]})

    rejected = amc.h1.acknowledge(
        task_id, 1, lease["lease_id"], message_id, "rejected", detail="step 'a' had already started"
    )

    assert (rejected["state"], rejected["detail"], rejected["admitted_at"]) == (
        "rejected",
        "step 'a' had already started",
        None,
    )
    assert amc.h1.renew(task_id, 1, lease["lease_id"])["messages"] == []


def test_an_edit_that_does_not_apply_at_its_boundary_cannot_be_admitted(amc):
    task_id, lease, message_id = delivered(amc, intent="steer", data={"skip": ["a"]})
    before = snapshot(amc, task_id)

    amc.h1.acknowledge(task_id, 1, lease["lease_id"], message_id, "admitted", boundary={"before_step": "b"}, expect=409)

    assert problem(amc.h1) == (409, "message_conflict")
    assert "'a'" in amc.h1.last.json()["detail"]
    assert snapshot(amc, task_id) == before


@pytest.mark.req("DELIVERY/s3")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
@needs_lmdb
def test_queued_and_delivered_messages_survive_a_restart(tmp_path, sig):
    tokens = tmp_path / "tokens.json"
    tokens.write_text(orjson.dumps(TOKENS).decode())
    data = tmp_path / "data"
    served = Served(data, "--lease-seconds", "120", tokens=tokens)
    client, host = served.caller("serve-client-acme-000000"), served.caller("serve-host-h1-0000000000")
    task_id = client.submit(STEPS_ABC)["id"]
    host.register("h1", ["emulator-5554"])
    lease = host.claim("h1")
    host.start(task_id, 1, lease["lease_id"])
    m2 = client.post_message(task_id, "steer", data={"skip": ["c"]})["id"]
    assert [m["id"] for m in host.renew(task_id, 1, lease["lease_id"])["messages"]] == [m2]
    m1 = client.post_message(task_id, "steer", text="use the staging server")["id"]
    before = client.messages(task_id)
    assert [(m["id"], m["state"]) for m in before] == [(m2, "delivered"), (m1, "queued")]

    served.stop(sig)
    served = Served(data, "--lease-seconds", "120", tokens=tokens)

    try:
        client, host = served.caller("serve-client-acme-000000"), served.caller("serve-host-h1-0000000000")
        assert client.messages(task_id) == before
        carried = host.renew(task_id, 1, lease["lease_id"])["messages"]
        assert [(m["id"], m["state"]) for m in carried] == [(m2, "delivered"), (m1, "delivered")]
        assert carried[0] == before[0]
        assert client.messages(task_id) == carried
        assert [e["type"] for e in client.history(task_id)].count("message_delivered") == 2
    finally:
        served.stop()


# -- STATUS-READ -----------------------------------------------------------------------------


@pytest.mark.req("STATUS-READ/s1")
def test_reading_a_task_its_history_and_its_messages_changes_nothing(amc):
    task_id, lease = amc.claimed(start=True, plan=STEPS_ABC)
    steer = amc.acme.post_message(task_id, "steer", text="use the staging server")
    task, history = amc.acme.task(task_id), amc.acme.history(task_id)
    assert task["cancellation"] is None and task["paused"] is False and task["held"] is False

    for _ in range(5):
        amc.admin.advance(1)
        for caller in (amc.acme, amc.admin):
            caller.task(task_id)
            caller.history(task_id)
            caller.messages(task_id)
            caller.message(task_id, steer["id"])
            caller.tasks()
            caller.hosts()
        amc.h1.task(task_id)
        amc.h1.host("h1")

    assert amc.acme.task(task_id) == task
    assert amc.acme.history(task_id) == history
    assert amc.acme.messages(task_id) == [steer]
    assert amc.h1.renew(task_id, 1, lease["lease_id"])["cancel_requested"] is False


# -- PAUSE -----------------------------------------------------------------------------------


@pytest.mark.req("PAUSE/s2")
def test_a_paused_queued_task_is_held_and_keeps_its_place_when_resumed(amc):
    x = amc.acme.submit(PLAN)["id"]
    amc.h1.register("h1", ["d1", "d2"])
    amc.admin.advance(1)

    pause = amc.acme.post_message(x, "pause")

    assert (pause["state"], pause["admitted_at"], pause["completed_at"]) == ("completed", amc.at(1000), amc.at(1000))
    assert "held" in pause["detail"]
    task = amc.acme.task(x)
    assert (task["status"], task["held"], task["paused"]) == ("queued", True, False)
    for _ in range(3):
        assert amc.h1.claim("h1", expect=204) is None
        amc.admin.advance(10)
    y = amc.acme.submit(PLAN)["id"]  # equal priority, submitted later

    resume = amc.acme.post_message(x, "resume")

    assert resume["state"] == "completed" and "released" in resume["detail"]
    assert amc.acme.task(x)["held"] is False
    assert [amc.h1.claim("h1")["task_id"] for _ in range(2)] == [x, y]
    assert [e["type"] for e in amc.acme.history(x)] == [
        "submitted",
        "message_posted",
        "message_acknowledged",
        "message_posted",
        "message_acknowledged",
        "assigned",
    ]


def test_a_waiting_claim_takes_a_task_as_soon_as_a_resume_releases_it(amc):
    x = amc.acme.submit(PLAN)["id"]
    amc.acme.post_message(x, "pause")
    amc.h1.register("h1", ["d1"])
    waiting = amc.caller("tok-host-h1-00000000000000", "h1")
    answer = {}
    thread = threading.Thread(
        target=lambda: answer.update(claim=waiting.request("POST", "/v1/hosts/h1/claim", json={"wait_seconds": 20})),
        daemon=True,
    )
    thread.start()
    time.sleep(0.3)
    started = time.monotonic()

    amc.acme.post_message(x, "resume")

    thread.join(10)
    assert answer["claim"].status_code == 200 and answer["claim"].json()["task_id"] == x
    assert time.monotonic() - started < 5


def test_a_pause_admitted_in_flight_shows_until_a_resume_is_admitted_and_outlives_the_attempt(amc):
    task_id, lease, pause = delivered(amc, intent="pause")
    amc.h1.acknowledge(task_id, 1, lease["lease_id"], pause, "admitted", boundary={"before_step": "b"})

    for _ in range(5):  # many lease periods, renewed in time
        amc.admin.advance(20)
        grant = amc.h1.renew(task_id, 1, lease["lease_id"])
        assert grant["status"] == "dispatched" and grant["messages"] == []
        task = amc.acme.task(task_id)
        assert (task["status"], task["paused"], task["held"]) == ("dispatched", True, False)

    resume = amc.acme.post_message(task_id, "resume")["id"]
    assert [m["id"] for m in amc.h1.renew(task_id, 1, lease["lease_id"])["messages"]] == [resume]
    assert amc.acme.task(task_id)["paused"] is True  # delivered is not applied
    amc.h1.acknowledge(task_id, 1, lease["lease_id"], resume, "admitted", boundary={"before_step": "b"})
    assert amc.acme.task(task_id)["paused"] is False

    again = amc.acme.post_message(task_id, "pause")["id"]
    amc.h1.renew(task_id, 1, lease["lease_id"])
    amc.h1.acknowledge(task_id, 1, lease["lease_id"], again, "admitted", boundary={"before_step": "b"})
    amc.admin.advance(30)  # the lease lapses: the task is requeued, and comes back held

    task = amc.acme.task(task_id)
    assert (task["status"], task["paused"], task["held"]) == ("queued", False, True)
    assert amc.h1.claim("h1", expect=204) is None
    amc.acme.post_message(task_id, "resume")
    assert amc.h1.claim("h1")["task_id"] == task_id


# -- FOLLOWUP and COLLECT ---------------------------------------------------------------------


@pytest.mark.req("FOLLOWUP/s1")
def test_follow_ups_to_a_task_that_ends_done_become_one_successor(amc):
    amc.h1.register("h1", [{"serial": "emulator-5554", "attributes": {"model": "Pixel 7"}}])
    requirements = {"serial": None, "attributes": {"model": "Pixel 7"}}
    x = amc.acme.submit(PLAN, requirements=requirements, priority=5, labels={"team": "qa"})["id"]
    lease = amc.h1.claim("h1")
    amc.h1.start(x, 1, lease["lease_id"])
    m1 = amc.acme.post_message(x, "follow_up", text="open Wi-Fi settings")["id"]
    m2 = amc.acme.post_message(x, "follow_up", text="take a screenshot", data={"steps": [screenshot("shot")]})["id"]
    assert amc.h1.renew(x, 1, lease["lease_id"])["messages"] == []  # a follow-up waits on the task
    assert [m["state"] for m in amc.acme.messages(x)] == ["queued", "queued"]
    amc.admin.advance(1)

    done = amc.h1.report(x, 1, lease["lease_id"], "done", metadata={"screens": 1})

    [s] = successors(amc, x)
    assert s["id"] == f"{x}.1"
    assert (s["status"], s["tenant"], s["follow_up_of"], s["collected"]) == ("queued", "acme", x, [m1, m2])
    assert (s["requirements"], s["priority"], s["labels"]) == (requirements, 5, {"team": "qa"})
    assert s["created_at"] == amc.at(1000)
    assert amc.acme.task(x)["result"] == done["result"]
    assert done["result"]["metadata"] == {"screens": 1} and done["status"] == "done"
    assert [(m["state"], m["successor"]) for m in amc.acme.messages(x)] == [("admitted", s["id"])] * 2
    assert amc.acme.history(x)[-1]["type"] == "follow_ups_collected"
    assert amc.acme.history(s["id"])[0]["data"]["follow_up_of"] == x

    m3 = amc.acme.post_message(x, "follow_up", text="and the Bluetooth settings")

    assert (m3["state"], m3["successor"]) == ("admitted", f"{x}.2")
    assert [t["collected"] for t in successors(amc, x)] == [[m1, m2], [m3["id"]]]
    assert amc.acme.task(x)["result"] == done["result"]


@pytest.mark.req("FOLLOWUP/s2")
@pytest.mark.parametrize("ending", ["failed", "attempts_exhausted", "cancelled"])
def test_follow_ups_to_a_task_that_ends_otherwise_are_not_admitted(amc, ending):
    x, lease = amc.claimed(start=True, max_attempts=1)
    m1 = amc.acme.post_message(x, "follow_up", text="open Wi-Fi settings")["id"]

    if ending == "failed":
        amc.h1.report(x, 1, lease["lease_id"], "failed")
    elif ending == "attempts_exhausted":
        amc.admin.advance(30)
    else:
        amc.acme.cancel(x, expect=202)
        amc.h1.report(x, 1, lease["lease_id"], "cancelled")

    task = amc.acme.task(x)
    assert task["status"] == ("cancelled" if ending == "cancelled" else "failed")
    assert amc.acme.message(x, m1)["state"] == "not_admitted"
    assert amc.acme.message(x, m1)["successor"] is None
    assert [t["id"] for t in amc.admin.tasks()["tasks"]] == [x]
    before = snapshot(amc, x)

    amc.acme.post_message(x, "follow_up", text="try again", expect=409)

    assert problem(amc.acme) == (409, "task_terminal")
    assert snapshot(amc, x) == before


@pytest.mark.parametrize("intent", ["steer", "pause", "resume"])
def test_any_other_message_to_an_ended_task_is_a_conflict(amc, intent):
    x, lease = amc.claimed(start=True)
    amc.h1.report(x, 1, lease["lease_id"], "done")
    before = snapshot(amc, x)

    amc.acme.post_message(x, intent, **({"text": "again"} if intent == "steer" else {}), expect=409)

    assert problem(amc.acme) == (409, "task_terminal")
    assert snapshot(amc, x) == before


@pytest.mark.req("COLLECT/s1")
def test_a_collected_successor_keeps_every_message_id_and_what_each_asked(amc):
    amc.h1.register("h1", ["d1", "d2"])
    x = amc.acme.submit(PLAN)["id"]
    other = amc.acme.submit(PLAN)["id"]  # the same tenant and requirements, another task
    lease = amc.h1.claim("h1")
    amc.h1.start(x, 1, lease["lease_id"])
    shot = {"steps": [screenshot("shot")]}
    m1 = amc.acme.post_message(x, "follow_up", text="open Wi-Fi settings")["id"]
    m2 = amc.acme.post_message(x, "follow_up", text="take a screenshot", data=shot)["id"]
    amc.acme.post_message(other, "follow_up", text="not for X")
    amc.h1.renew(x, 1, lease["lease_id"])

    amc.h1.report(x, 1, lease["lease_id"], "done", steps=outcomes(("open", "completed")))

    [s] = successors(amc, x)
    assert s["collected"] == [m1, m2]
    assert s["follow_ups"] == [
        {"message_id": m1, "text": "open Wi-Fi settings", "data": None},
        {"message_id": m2, "text": "take a screenshot", "data": shot},
    ]
    assert s["plan"] == {"steps": [screenshot(f"{m2}.shot")]}
    assert [(m["id"], m["successor"], m["text"], m["data"]) for m in amc.acme.messages(x)] == [
        (m1, s["id"], "open Wi-Fi settings", None),
        (m2, s["id"], "take a screenshot", shot),
    ]
    assert amc.acme.messages(other)[0]["state"] == "queued"
    assert successors(amc, other) == []
    # The successor runs like any task, its steps named after the message that asked for them.
    assert amc.h1.claim("h1")["task_id"] == other
    turn = amc.h1.claim("h1")
    assert (turn["task_id"], turn["plan"]) == (s["id"], s["plan"])
    amc.h1.start(s["id"], 1, turn["lease_id"])
    assert amc.h1.renew(s["id"], 1, turn["lease_id"])["messages"] == []
    ended = amc.h1.report(s["id"], 1, turn["lease_id"], "done", steps=outcomes((f"{m2}.shot", "completed")))
    assert ended["status"] == "done" and ended["result"]["steps"][0]["id"] == f"{m2}.shot"


def test_a_successor_whose_follow_ups_carried_no_steps_has_an_empty_plan(amc):
    x, lease = amc.claimed(start=True)
    m1 = amc.acme.post_message(x, "follow_up", text="check the battery level")["id"]
    amc.h1.report(x, 1, lease["lease_id"], "done")

    [s] = successors(amc, x)

    assert s["plan"] == {"steps": []} and s["collected"] == [m1]
    turn = amc.h1.claim("h1")
    assert turn["task_id"] == s["id"] and turn["plan"] == {"steps": []}
    assert amc.h1.report(s["id"], 1, turn["lease_id"], "done", steps=[])["status"] == "done"


# -- STEER -----------------------------------------------------------------------------------


@pytest.mark.req("STEER/s3")
def test_a_scope_correction_changes_only_the_affected_work(amc):
    amc.h1.register("h1", ["d1", "d2"])
    x, y = amc.acme.submit(STEPS_ABC)["id"], amc.acme.submit(STEPS_ABC)["id"]
    lx, ly = amc.h1.claim("h1"), amc.h1.claim("h1")
    amc.h1.start(x, 1, lx["lease_id"])
    amc.h1.start(y, 1, ly["lease_id"])
    y_before = amc.acme.task(y), amc.acme.messages(y), amc.acme.history(y)
    amc.admin.advance(1)

    steer = amc.acme.post_message(x, "steer", data={"replace_remaining": [screenshot("b2")]})
    amc.h1.renew(x, 1, lx["lease_id"])
    x_before = amc.acme.task(x)
    amc.admin.advance(1)
    amc.h1.acknowledge(x, 1, lx["lease_id"], steer["id"], "admitted", boundary={"before_step": "b"})

    x_after = amc.acme.task(x)
    unchanged = ("status", "attempt", "attempts", "cancellation", "plan", "paused", "result")
    assert {k: x_after[k] for k in unchanged} == {k: x_before[k] for k in unchanged}
    assert (amc.acme.task(y), amc.acme.messages(y), amc.acme.history(y)) == y_before
    amc.h1.report(
        x,
        1,
        lx["lease_id"],
        "done",
        steps=outcomes(("a", "completed"), ("b", "completed"), ("c", "completed")),
        expect=400,
    )
    assert "steps" in amc.h1.last.json()["detail"]
    steps = outcomes(
        ("a", "completed"), ("b", "not_started", "steered"), ("c", "not_started", "steered"), ("b2", "completed")
    )
    assert amc.h1.report(x, 1, lx["lease_id"], "done", steps=steps)["result"]["steps"] == steps
    y_steps = outcomes(("a", "completed"), ("b", "completed"), ("c", "completed"))
    assert amc.h1.report(y, 1, ly["lease_id"], "done", steps=y_steps)["result"]["steps"] == y_steps


def test_a_later_attempt_is_handed_the_plan_as_steering_left_it(amc):
    task_id, lease, message_id = delivered(amc, intent="steer", data={"skip": ["c"]})
    amc.h1.acknowledge(task_id, 1, lease["lease_id"], message_id, "admitted", boundary={"before_step": "b"})
    amc.admin.advance(30)  # the lease lapses and the task is requeued

    again = amc.h1.claim("h1")

    assert (again["attempt"], [s["id"] for s in again["plan"]["steps"]]) == (2, ["a", "b"])
    assert amc.acme.task(task_id)["plan"] == STEPS_ABC  # the task keeps what was submitted


def test_structured_edits_are_refused_for_a_plan_of_stages(amc):
    staged = {"stages": [{"id": "st", "steps": [screenshot("a"), screenshot("b")]}]}
    task_id = amc.acme.submit(staged)["id"]
    before = snapshot(amc, task_id)

    amc.acme.post_message(task_id, "steer", data={"skip": ["b"]}, expect=400)

    assert problem(amc.acme) == (400, "invalid_request")
    assert "data" in amc.acme.last.json()["detail"] and snapshot(amc, task_id) == before
    assert amc.acme.post_message(task_id, "steer", text="take the screenshots in dark mode")["state"] == "queued"


# -- who may do what -------------------------------------------------------------------------

CALLERS = ["anon", "stranger", "admin", "acme", "beta", "h1", "h2"]
ACK = {"lease_id": "{lease}", "state": "admitted", "boundary": {"before_step": "b"}}
ENDPOINTS = {
    "post": (
        "POST",
        "/v1/tasks/{x}/messages",
        {"intent": "steer", "text": "go slower"},
        {"admin": 201, "acme": 201, "beta": 404, "h1": 403, "h2": 403},
    ),
    "list": ("GET", "/v1/tasks/{x}/messages", None, {"admin": 200, "acme": 200, "beta": 404, "h1": 403, "h2": 403}),
    "get": ("GET", "/v1/tasks/{x}/messages/{m}", None, {"admin": 200, "acme": 200, "beta": 404, "h1": 403, "h2": 403}),
    "acknowledge": (
        "POST",
        "/v1/tasks/{x}/attempts/1/messages/{m}",
        ACK,
        {"admin": 403, "acme": 403, "beta": 403, "h1": 200, "h2": 409},
    ),
}
CODES = {401: "unauthorized", 403: "forbidden", 404: "not_found", 409: "lease_foreign"}


def fill(value, **names):
    if isinstance(value, str):
        for name, text in names.items():
            value = value.replace("{" + name + "}", text)
        return value
    if isinstance(value, dict):
        return {k: fill(v, **names) for k, v in value.items()}
    return value


@pytest.mark.req("TENANCY/s1")
@pytest.mark.req("ACCESS/s1")
@pytest.mark.parametrize("caller", CALLERS)
@pytest.mark.parametrize("endpoint", list(ENDPOINTS))
def test_role_endpoint_tenant_matrix_for_messages(amc, endpoint, caller):
    method, path, body, expected = ENDPOINTS[endpoint]
    status = expected.get(caller, 401)
    task_id, lease, message_id = delivered(amc, intent="steer", text="look for the toggle")
    names = {"x": task_id, "lease": lease["lease_id"], "m": message_id}
    before = snapshot(amc, task_id)
    who = getattr(amc, caller)

    response = who.request(method, fill(path, **names), **({} if body is None else {"json": fill(body, **names)}))

    assert response.status_code == status, response.text
    if status >= 400:
        assert problem(who) == (status, CODES[status])
        assert snapshot(amc, task_id) == before
        assert "tok-" not in response.text


def test_an_admin_messages_any_tenants_task(amc):
    task_id = amc.beta.submit(PLAN)["id"]
    posted = amc.admin.post_message(task_id, "follow_up", text="then open the camera")
    assert amc.beta.messages(task_id) == [posted]
    amc.acme.messages(task_id, expect=404)


@pytest.mark.req("ACCESS/s3")
def test_the_order_of_checks_on_messages(amc):
    task_id, lease, message_id = delivered(amc, intent="steer", text="look for the toggle")
    ack_path = f"/v1/tasks/{task_id}/attempts/1/messages/{message_id}"
    huge = b"{" + b" " * (1024 * 1024) + b"}"
    amc.anon.request("POST", f"/v1/tasks/{task_id}/messages", content=huge, expect=413)
    amc.anon.request("POST", f"/v1/tasks/{task_id}/messages", json={"intent": "stop"}, expect=401)
    amc.h1.request("POST", f"/v1/tasks/{task_id}/messages", json={"intent": "stop"}, expect=403)
    amc.acme.request("POST", ack_path, content=b"{", expect=403)
    amc.beta.request("POST", f"/v1/tasks/{task_id}/messages", json={"intent": "stop"}, expect=404)
    amc.acme.request("POST", "/v1/tasks/t_nope/messages", json={"intent": "stop"}, expect=404)
    amc.acme.message(task_id, "m_nope", expect=404)
    amc.h1.request("POST", f"/v1/tasks/{task_id}/attempts/1/messages/m_nope", content=b"{", expect=404)
    amc.h1.request("POST", f"/v1/tasks/{task_id}/attempts/2/messages/{message_id}", content=b"{", expect=404)
    amc.h1.request("POST", f"/v1/tasks/t_nope/attempts/1/messages/{message_id}", content=b"{", expect=404)
    # The body before the rules: another host's lease with a malformed body is 400, then 409.
    amc.h2.request("POST", ack_path, json={"lease_id": lease["lease_id"], "state": "applied"}, expect=400)
    amc.h2.acknowledge(task_id, 1, lease["lease_id"], message_id, "completed", expect=409)
    assert problem(amc.h2) == (409, "lease_foreign")


def test_a_message_is_named_only_under_its_own_task(amc):
    _task_id, _lease, message_id = delivered(amc, intent="steer", text="look for the toggle")
    other = amc.acme.submit(PLAN)["id"]

    amc.acme.message(other, message_id, expect=404)
    amc.admin.message(other, message_id, expect=404)


@pytest.mark.parametrize("case", ["wrong lease", "queued message", "follow-up", "lease expired", "task ended"])
def test_acknowledgements_obey_the_lease_checks_and_the_delivery(amc, case):
    task_id, lease, message_id = delivered(amc, intent="steer", text="look for the toggle")
    lease_id, expected = lease["lease_id"], "message_conflict"
    if case == "wrong lease":
        lease_id, expected = "l_forged", "lease_unknown"
    elif case == "queued message":  # never delivered to the attempt
        message_id = amc.acme.post_message(task_id, "steer", text="and hurry")["id"]
    elif case == "follow-up":
        message_id = amc.acme.post_message(task_id, "follow_up", text="then the camera")["id"]
    elif case == "lease expired":
        amc.admin.advance(30)
        expected = "lease_expired"
    else:
        amc.h1.report(task_id, 1, lease_id, "done")
        expected = "lease_ended"
    before = snapshot(amc, task_id)

    amc.h1.acknowledge(task_id, 1, lease_id, message_id, "admitted", boundary={"before_step": "b"}, expect=409)

    assert problem(amc.h1) == (409, expected)
    assert snapshot(amc, task_id) == before


def test_the_messages_of_an_ended_attempt_are_not_admitted(amc):
    task_id, lease, message_id = delivered(amc, intent="steer", data={"skip": ["c"]})
    queued = amc.acme.post_message(task_id, "pause")["id"]

    amc.h1.report(task_id, 1, lease["lease_id"], "done")

    assert [(m["id"], m["state"]) for m in amc.acme.messages(task_id)] == [
        (message_id, "not_admitted"),
        (queued, "not_admitted"),
    ]


# -- bad input -------------------------------------------------------------------------------


def tap(step_id, **args):
    return {"id": step_id, "action": "tap", "args": args}


def steer(**data):
    return {"intent": "steer", "data": data}


def follow_up(steps):
    return {"intent": "follow_up", "data": {"steps": steps}}


BAD_MESSAGES = [
    # (name, body, the field the detail names)
    ("not json", b"{", "body"),
    ("a list", b"[]", "body"),
    ("empty", b"", "body"),
    ("NaN", b'{"intent": "steer", "text": NaN}', "body"),
    ("not UTF-8", b'{"intent": "steer", "text": "\xff"}', "body"),
    ("nested too deep", b'{"intent": "follow_up", "data": ' + b"[" * 2000 + b"]" * 2000 + b"}", "body"),
    ("no intent", {"text": "x"}, "intent"),
    ("intent unknown", {"intent": "stop"}, "intent"),
    ("intent cancel", {"intent": "cancel"}, "intent"),
    ("intent a number", {"intent": 1}, "intent"),
    ("unknown member", {"intent": "steer", "text": "x", "priority": 1}, "priority"),
    ("text a number", {"intent": "steer", "text": 5}, "text"),
    ("text too long", {"intent": "steer", "text": "x" * 16_385}, "text"),
    ("data a list", {"intent": "steer", "data": ["skip"]}, "data"),
    ("data a string", {"intent": "follow_up", "data": "steps"}, "data"),
    ("data too large", steer(skip=["x" * 70_000]), "data"),
    ("steer with nothing", {"intent": "steer"}, "data"),
    ("steer with empty text", {"intent": "steer", "text": ""}, "data"),
    ("steer edit unknown", steer(drop=["b"]), "data"),
    ("steer two edits", steer(skip=["b"], replace_remaining=[screenshot("x")]), "data.replace_remaining"),
    ("skip a string", steer(skip="b"), "data.skip"),
    ("skip empty", steer(skip=[]), "data.skip"),
    ("skip a number", steer(skip=[2]), "data.skip"),
    ("skip twice", steer(skip=["b", "b"]), "data.skip"),
    ("insert_after a number", steer(insert_after=1, steps=[screenshot("x")]), "data.insert_after"),
    ("insert without steps", steer(insert_after="a"), "data.steps"),
    ("insert no steps", steer(insert_after="a", steps=[]), "data.steps"),
    ("insert unknown action", steer(insert_after="a", steps=[{"id": "fly1", "action": "fly"}]), "data.steps[0]"),
    ("insert missing argument", steer(insert_after=None, steps=[screenshot("x"), tap("t1", x=1)]), "data.steps[1]"),
    ("insert unknown argument", steer(insert_after="a", steps=[tap("t1", x=1, y=2, z=3)]), "data.steps[0]"),
    ("insert argument wrong type", steer(insert_after="a", steps=[tap("t1", x="1", y=2)]), "data.steps[0]"),
    ("insert step id too long", steer(insert_after="a", steps=[screenshot("s" * 129)]), "data.steps[0]"),
    ("insert step unknown member", steer(insert_after="a", steps=[screenshot("x") | {"when": 1}]), "data.steps[0]"),
    ("insert step ids twice", steer(insert_after="a", steps=[screenshot("x"), screenshot("x")]), "data.steps"),
    ("replace with nothing", steer(replace_remaining=[]), "data.replace_remaining"),
    (
        "replace with a bad step",
        steer(replace_remaining=[screenshot("x"), {"id": "w", "action": "wait"}]),
        "data.replace_remaining[1]",
    ),
    ("follow-up steps empty", follow_up([]), "data.steps"),
    ("follow-up steps an object", follow_up({"id": "x"}), "data.steps"),
    ("follow-up step unknown action", follow_up([{"id": "x", "action": "fly"}]), "data.steps[0]"),
    ("follow-up step id too long for its successor", follow_up([screenshot("s" * 110)]), "data.steps[0]"),
    ("follow-up data misspelt", {"intent": "follow_up", "data": {"step": [screenshot("x")]}}, "data.step"),
    ("pause with data", {"intent": "pause", "data": {"until": "noon"}}, "data"),
    ("resume with data", {"intent": "resume", "data": {"at": "b"}}, "data"),
]

BAD_ACKS = [
    ("not json", b"{", "body"),
    ("a list", b"[]", "body"),
    ("no lease_id", {"state": "completed"}, "lease_id"),
    ("lease_id a number", {"lease_id": 5, "state": "completed"}, "lease_id"),
    ("no state", {"lease_id": "{lease}"}, "state"),
    ("state unknown", {"lease_id": "{lease}", "state": "applied"}, "state"),
    ("state delivered", {"lease_id": "{lease}", "state": "delivered"}, "state"),
    ("state not_admitted", {"lease_id": "{lease}", "state": "not_admitted"}, "state"),
    ("admitted without boundary", {"lease_id": "{lease}", "state": "admitted"}, "boundary"),
    ("admitted with a null boundary", {"lease_id": "{lease}", "state": "admitted", "boundary": None}, "boundary"),
    ("boundary a string", {"lease_id": "{lease}", "state": "admitted", "boundary": "b"}, "boundary"),
    ("boundary empty", {"lease_id": "{lease}", "state": "admitted", "boundary": {}}, "boundary.before_step"),
    (
        "before_step a number",
        {"lease_id": "{lease}", "state": "admitted", "boundary": {"before_step": 2}},
        "boundary.before_step",
    ),
    (
        "before_step empty",
        {"lease_id": "{lease}", "state": "admitted", "boundary": {"before_step": ""}},
        "boundary.before_step",
    ),
    (
        "boundary unknown member",
        {"lease_id": "{lease}", "state": "admitted", "boundary": {"before_step": "b", "after": "a"}},
        "after",
    ),
    ("rejected without detail", {"lease_id": "{lease}", "state": "rejected"}, "detail"),
    ("rejected with empty detail", {"lease_id": "{lease}", "state": "rejected", "detail": ""}, "detail"),
    ("detail a number", {"lease_id": "{lease}", "state": "rejected", "detail": 1}, "detail"),
    ("detail too long", {"lease_id": "{lease}", "state": "rejected", "detail": "d" * 1025}, "detail"),
    ("unknown member", {"lease_id": "{lease}", "state": "completed", "at": "now"}, "at"),
]


@pytest.fixture
def steered(amc):
    """Task X dispatched on h1 with a steer delivered to it, and another task queued."""
    task_id, lease, message_id = delivered(amc, intent="steer", text="look for the toggle")
    amc.acme.submit(PLAN)
    return amc, task_id, lease["lease_id"], message_id


def _expect_refusal(amc, task_id, caller, path, body, named):
    before = snapshot(amc, task_id)
    kwargs = {"content": body} if isinstance(body, bytes) else {"json": body}
    response = caller.request("POST", path, **kwargs, headers={"Content-Type": "application/json"})
    assert response.status_code == 400, response.text
    assert problem(caller) == (400, "invalid_request")
    assert named in response.json()["detail"], response.json()["detail"]
    assert snapshot(amc, task_id) == before


@pytest.mark.req("INPUT/s1")
@pytest.mark.parametrize("name, body, named", BAD_MESSAGES, ids=[case[0] for case in BAD_MESSAGES])
def test_bad_messages(steered, name, body, named):
    amc, task_id, _, _ = steered
    _expect_refusal(amc, task_id, amc.acme, f"/v1/tasks/{task_id}/messages", body, named)


@pytest.mark.req("INPUT/s1")
@pytest.mark.parametrize("name, body, named", BAD_ACKS, ids=[case[0] for case in BAD_ACKS])
def test_bad_acknowledgements(steered, name, body, named):
    amc, task_id, lease_id, message_id = steered
    if isinstance(body, dict):
        body = fill(body, lease=lease_id)
    _expect_refusal(amc, task_id, amc.h1, f"/v1/tasks/{task_id}/attempts/1/messages/{message_id}", body, named)


def test_a_refused_step_names_its_field_and_its_id(amc):
    task_id = amc.acme.submit(STEPS_ABC)["id"]
    amc.acme.post_message(task_id, **steer(insert_after="a", steps=[screenshot("x"), tap("tap9", x=1)]), expect=400)
    detail = amc.acme.last.json()["detail"]
    assert "data.steps[1]" in detail and "'tap9'" in detail and "'y'" in detail


def test_every_well_formed_message_is_accepted(amc):
    task_id, _ = amc.claimed(start=True, plan=STEPS_ABC)
    bodies = [
        {"intent": "steer", "text": "t" * 16_384},
        {"intent": "steer", "text": "only guidance", "data": None},
        steer(skip=["b", "c"]),
        steer(insert_after=None, steps=[tap("t1", x=1, y=2)]) | {"text": "tap first"},
        steer(insert_after="a", steps=[{"id": "s1", "action": "screenshot"}]),
        steer(replace_remaining=[{"id": "w1", "action": "wait", "args": {"seconds": 0.5}}]),
        {"intent": "follow_up"},
        {"intent": "follow_up", "text": "then the camera", "data": {"steps": [screenshot("s" * 105)]}},
        {"intent": "pause", "text": "hold on"},
        {"intent": "resume", "data": {}},
    ]
    for body in bodies:
        amc.acme.call("POST", f"/v1/tasks/{task_id}/messages", body, 201)
    assert [m["intent"] for m in amc.acme.messages(task_id)] == [b["intent"] for b in bodies]


def test_metrics_count_messages_and_acknowledgements(amc):
    task_id, lease, message_id = delivered(amc, intent="steer", text="look for the toggle")
    amc.h1.acknowledge(task_id, 1, lease["lease_id"], message_id, "completed", expect=409)
    amc.h1.acknowledge(task_id, 1, lease["lease_id"], message_id, "admitted", boundary={"before_step": "b"})

    found = samples(amc)

    def commands(kind, outcome):
        return found[("amc_commands_total", (("outcome", outcome), ("type", kind)))]

    assert commands("post_message", "accepted") == 1
    assert commands("acknowledge_message", "accepted") == 1
    assert commands("acknowledge_message", "message_conflict") == 1
