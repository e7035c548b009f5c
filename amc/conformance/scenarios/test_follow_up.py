"""Follow-ups and their collection, specs/protocol.md Part B: FOLLOWUP and COLLECT
(specs/requirements/steering.md).

A follow-up waits on its task and is never handed to a host. When the task ends done, the
server collects every waiting follow-up into one successor task (`follow_up_of`,
`collected`); the test finds it in the listing of the tenant's tasks by its `follow_up_of`.
How the successor's plan is made from the follow-ups, and what else it carries over, the
protocol leaves to the server (amc's own choices are tested in amc's tests).
"""

from __future__ import annotations

import pytest

from amc.conformance.client import PLAN_ABC, ids


def successors_of(client, task_id: str) -> list[dict]:
    """Every task of the client's tenant that names `task_id` as the task it follows up."""
    return [t for t in client.all_tasks() if t.get("follow_up_of") == task_id]


@pytest.mark.req("FOLLOWUP/s1")
def test_follow_ups_to_a_task_that_ends_done_become_one_successor(scene):
    """m1, m2 wait on X; X ends done: one queued successor S with X's requirements and collected [m1, m2]."""
    acme, h1 = scene.acme, scene.h1
    # Given X of acme (model Pixel 7) dispatched on h1, and follow-ups m1 and m2
    h1.register(scene.device("emulator-5554", model="Pixel 7"))
    task = scene.submit(plan=PLAN_ABC, attributes={"model": "Pixel 7"}, priority=5, labels={"team": "qa"})
    x = task["id"]
    lease = h1.claim()
    assert lease.task_id == x
    h1.start(lease)
    m1 = acme.post_message(x, "follow_up", text="open Wi-Fi settings", expect=201)
    m2 = acme.post_message(x, "follow_up", text="then Bluetooth", expect=201)
    assert [m1["state"], m2["state"]] == ["queued", "queued"]
    # (they wait on the task: the attempt is never given them, and X carries on as it was)
    renewal = h1.renew(lease)
    assert (renewal["messages"], renewal["status"]) == ([], "dispatched")
    assert successors_of(acme, x) == []

    # When h1 reports done for X
    ended = h1.report(lease, "done", metadata={"screens": 2})

    # Then exactly one new task S exists: queued, following up X, collecting m1 and m2, with X's requirements
    found = successors_of(acme, x)
    assert len(found) == 1, f"one successor of {x}, found {[t['id'] for t in found]}"
    s = found[0]
    acme.created.append(s["id"])
    assert s["id"] != x
    assert (s["status"], s["follow_up_of"], s["collected"]) == ("queued", x, [m1["id"], m2["id"]])
    assert s["requirements"] == task["requirements"]
    assert s["tenant"] == task["tenant"]
    assert s["attempts"] == [] and s["result"] is None
    # And each follow-up is admitted into S
    assert [message["state"] for message in acme.messages(x)] == ["admitted", "admitted"]
    # And X's result is the one h1 reported
    assert acme.get_task(x)["result"] == ended["result"]
    assert ended["result"]["metadata"] == {"screens": 2}
    assert acme.get_task(x)["follow_up_of"] is None

    # And a follow-up m3 posted after X is done starts a second successor at once, holding m3 alone
    m3 = acme.post_message(x, "follow_up", text="and the battery page", expect=201)
    assert m3["state"] == "admitted"
    (second,) = [t for t in successors_of(acme, x) if t["id"] != s["id"]]
    acme.created.append(second["id"])
    assert (second["status"], second["follow_up_of"], second["collected"]) == ("queued", x, [m3["id"]])
    assert second["requirements"] == task["requirements"]
    assert sorted(t["id"] for t in successors_of(acme, x)) == sorted([s["id"], second["id"]])
    assert acme.get_task(s["id"])["collected"] == [m1["id"], m2["id"]]


@pytest.mark.req("FOLLOWUP/s2")
@pytest.mark.parametrize("how", ["failed", "attempts_exhausted", "cancelled"])
def test_follow_ups_to_a_task_that_ends_otherwise_are_not_admitted(scene, how):
    """X ends failed (reported or by expiry) or cancelled: its follow-up is not_admitted, no successor exists."""
    acme, h1, clock = scene.acme, scene.h1, scene.clock
    # Given X dispatched on h1 with a waiting follow-up m1
    lease_seconds = clock.short_lease if how == "attempts_exhausted" else None
    task, lease = scene.running(h1, plan=PLAN_ABC, max_attempts=1, lease_seconds=lease_seconds)
    x = task["id"]
    m1 = acme.post_message(x, "follow_up", text="then open the camera")

    # When X ends `how`
    if how == "failed":
        h1.report(lease, "failed")
    elif how == "attempts_exhausted":
        clock.run_out(lease)
    else:
        acme.cancel(x, expect=202)
        h1.report(lease, "cancelled")
    ended = acme.get_task(x)
    assert ended["status"] == ("cancelled" if how == "cancelled" else "failed")

    # Then m1 is not_admitted and no successor task exists
    after = acme.get_message(x, m1["id"])
    assert after["state"] == "not_admitted"
    assert successors_of(acme, x) == []
    assert ended["collected"] == [] and ended["follow_up_of"] is None
    # And a new follow-up to X is 409 task_terminal, and records nothing
    events = acme.history(x)
    acme.post_message(x, "follow_up", text="one more thing", expect=(409, "task_terminal"))
    assert ids(acme.messages(x)) == [m1["id"]]
    assert acme.history(x) == events


@pytest.mark.req("FOLLOWUP/s2")
def test_follow_ups_to_a_task_cancelled_while_queued_are_not_admitted(scene):
    """X cancelled while queued: its follow-up is not_admitted, no successor exists."""
    acme = scene.acme
    # Given a queued X with a follow-up m1
    x = scene.submit(plan=PLAN_ABC)["id"]
    m1 = acme.post_message(x, "follow_up", text="then open the camera")
    # When its client cancels X
    acme.cancel(x, expect=200)
    # Then m1 is not_admitted, and no successor exists
    assert acme.get_message(x, m1["id"])["state"] == "not_admitted"
    assert successors_of(acme, x) == []
    acme.post_message(x, "follow_up", text="one more thing", expect=(409, "task_terminal"))


@pytest.mark.req("COLLECT/s1")
def test_a_collected_successor_keeps_every_message_id_and_what_each_asked(scene):
    """S collects m1 and m2, in posting order; X's messages keep their ids, text and data; T is beta's alone."""
    acme, beta, h1, h2 = scene.acme, scene.beta, scene.h1, scene.h2
    # Given X of acme with follow-ups m1 (text) and m2 (text and steps), in that order, and Y of
    # beta, with the same requirements, with follow-up m3; both dispatched
    h1.register(scene.device("emulator-5554"))
    h2.register(scene.device("emulator-5570"))
    x = scene.submit(acme, plan=PLAN_ABC)["id"]
    y = scene.submit(beta, plan=PLAN_ABC)["id"]
    m1 = acme.post_message(x, "follow_up", text="open Wi-Fi settings")  # while X is queued
    lease_x, lease_y = h1.claim(), h2.claim()
    assert (lease_x.task_id, lease_y.task_id) == (x, y)
    h1.start(lease_x)
    h2.start(lease_y)
    shot = {"steps": [{"id": "shot", "action": "screenshot", "args": {}}]}
    m2 = acme.post_message(x, "follow_up", text="take a screenshot", data=shot)
    m3 = beta.post_message(y, "follow_up", text="read the battery level")

    # When X and Y end done, and successors S (of X) and T (of Y) are created
    h1.report(lease_x, "done")
    h2.report(lease_y, "done")
    (s,) = successors_of(acme, x)
    (t,) = successors_of(beta, y)
    s_id, t_id = s["id"], t["id"]
    acme.created.append(s_id)
    beta.created.append(t_id)

    # Then S's collected is [m1, m2], in posting order
    assert s["collected"] == [m1["id"], m2["id"]]
    # And GET /v1/tasks/X/messages still lists m1 and m2 under the same ids, with what each asked
    listed = acme.messages(x)
    assert ids(listed) == [m1["id"], m2["id"]]
    assert [(m["text"], m["data"]) for m in listed] == [("open Wi-Fi settings", None), ("take a screenshot", shot)]
    # And nothing of another task or tenant was merged: T holds m3 alone, in beta's tenant
    assert t_id != s_id
    assert (t["tenant"], t["follow_up_of"], t["collected"]) == (beta.tenant, y, [m3["id"]])
    acme.get_task(t_id, expect=(404, "not_found"))
