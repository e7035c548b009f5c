"""Steering corrections, specs/protocol.md Part B: STEER and BOUNDARY (specs/requirements/steering.md).

Which step a real Host Agent is running when a correction arrives is the agent's business;
here the test plays the agent, says in each Given where its steps stand, and checks what the
server makes of it: the steer is carried to the attempt, the acknowledgement that names the
boundary is recorded, an acknowledgement that would recall a started step is refused, and
the result's steps must follow the plan as the admitted edits left it.
"""

from __future__ import annotations

import pytest

from amc.conformance.client import PLAN_ABC, ids, not_started, plan_of, ran

PLAN_ABCD = plan_of("a", "b", "c", "d")


@pytest.mark.req("STEER/s1")
def test_a_correction_is_admitted_before_the_next_step_and_removes_what_it_names(scene):
    """skip d, carried by a renewal while b runs, admitted before c: the result reports d not_started, steered."""
    acme, h1 = scene.acme, scene.h1
    # Given X dispatched on h1 with steps a, b, c, d; a completed and b running
    task, lease = scene.running(h1, plan=PLAN_ABCD)
    x = task["id"]
    h1.renew(lease)

    # When a client posts a steer skipping d
    m1 = acme.post_message(x, "steer", data={"skip": ["d"]}, expect=201)
    assert m1["state"] == "queued"

    # Then h1's next renewal carries it, and h1 admits it before launching c
    assert ids(h1.renew(lease)["messages"]) == [m1["id"]]
    admitted = h1.admit(lease, m1["id"], "c")
    assert (admitted["state"], admitted["boundary"]) == ("admitted", {"before_step": "c"})
    # And the result reports a, b, c completed and d not_started with reason steered
    steps = ran("a", "b", "c") + not_started("d")
    ended = h1.report(lease, "done", steps=steps)
    assert ended["status"] == "done"
    assert ended["result"]["steps"] == steps
    # (the steer was applied: it is never dropped as not admitted when the task ends)
    assert acme.get_message(x, m1["id"])["state"] in ("admitted", "completed")


@pytest.mark.req("STEER/s2")
def test_a_step_that_already_started_is_never_recalled(scene):
    """skip b while b runs: admitting it before c is refused; h1 rejects it and reports b's true outcome."""
    acme, h1 = scene.acme, scene.h1
    # Given X dispatched on h1 with steps a, b, c, and b running
    task, lease = scene.running(h1, plan=PLAN_ABC)
    x = task["id"]

    # When a steer skipping b reaches h1 while b runs
    m1 = acme.post_message(x, "steer", data={"skip": ["b"]})
    assert ids(h1.renew(lease)["messages"]) == [m1["id"]]
    delivered = acme.get_message(x, m1["id"])

    # Then the server refuses to record it admitted at the next boundary (that would recall b)
    h1.admit(lease, m1["id"], "c", expect=(409, "message_conflict"))
    assert acme.get_message(x, m1["id"]) == delivered
    # And h1 acknowledges it rejected, saying b had already started
    rejected = h1.acknowledge(lease, m1["id"], "rejected", detail="step 'b' had already started")
    assert (rejected["state"], rejected["detail"]) == ("rejected", "step 'b' had already started")
    assert rejected["admitted_at"] is None and rejected["boundary"] is None
    # And the plan is unchanged: b is reported with its true outcome, never not_started
    h1.report(lease, "done", steps=ran("a", "c"), expect=(400, "invalid_request"))
    steps = ran("a", "b", "c")
    assert h1.report(lease, "done", steps=steps)["result"]["steps"] == steps


@pytest.mark.req("STEER/s3")
def test_a_scope_correction_changes_only_the_affected_work(scene):
    """replace_remaining [b2] admitted before b: X's result follows it; X's status and lease, and Y, are untouched."""
    acme, h1, h2 = scene.acme, scene.h1, scene.h2
    # Given X (steps a, b, c) dispatched on h1 with a completed, and Y of acme dispatched on h2
    task, lease = scene.running(h1, plan=PLAN_ABC)
    x = task["id"]
    other, other_lease = scene.running(h2, plan=PLAN_ABC, device="emulator-5570")
    y = other["id"]
    y_before, y_events = acme.get_task(y), acme.history(y)

    # When a client steers X with replace_remaining [b2], and h1 admits it before b
    b2 = {"id": "b2", "action": "screenshot", "args": {}}
    m1 = acme.post_message(x, "steer", data={"replace_remaining": [b2]})
    assert ids(h1.renew(lease)["messages"]) == [m1["id"]]
    x_before = acme.get_task(x)
    h1.admit(lease, m1["id"], "b")

    # Then X's status, attempt, lease and cancellation are unchanged
    x_after = acme.get_task(x)
    for member in ("status", "attempt", "attempts", "cancellation", "result", "plan", "paused"):
        assert x_after[member] == x_before[member], member
    # And Y's plan, messages and attempts are untouched, and h2 is given no message
    assert acme.get_task(y) == y_before
    assert acme.history(y) == y_events
    assert acme.messages(y) == []
    assert h2.renew(other_lease)["messages"] == []
    # And X's result reports a completed, b and c not_started (steered), and b2 with its outcome
    h1.report(lease, "done", steps=ran("a", "b", "c"), expect=(400, "invalid_request"))
    steps = ran("a") + not_started("b", "c") + ran("b2")
    assert h1.report(lease, "done", steps=steps)["result"]["steps"] == steps


@pytest.mark.req("STEER")
def test_guidance_without_an_edit_leaves_the_plan_as_it_was(scene):
    """A text-only steer is carried and may be admitted; the planned steps stay those of the plan."""
    acme, h1 = scene.acme, scene.h1
    # Given X dispatched on h1 with steps a, b, c, and a text steer admitted before b
    task, lease = scene.running(h1, plan=PLAN_ABC)
    m1 = acme.post_message(task["id"], "steer", text="prefer the dark theme")
    assert (m1["text"], m1["data"]) == ("prefer the dark theme", None)
    carried = h1.renew(lease)["messages"]
    assert (ids(carried), carried[0]["text"]) == ([m1["id"]], "prefer the dark theme")
    h1.admit(lease, m1["id"], "b")

    # Then the result still names a, b, c
    steps = ran("a", "b", "c")
    assert h1.report(lease, "done", steps=steps)["result"]["steps"] == steps


@pytest.mark.req("STEER")
def test_an_edit_that_names_no_step_still_to_run_cannot_be_admitted(scene):
    """Admitting a skip of an unknown step, or at a boundary that is no step still to run, is message_conflict."""
    acme, h1 = scene.acme, scene.h1
    # Given X dispatched on h1 with steps a, b, c, and steers inserting z, skipping z and skipping c,
    # delivered; h1 rejected the insertion, so z is in no plan
    task, lease = scene.running(h1, plan=PLAN_ABC)
    x = task["id"]
    insert_z = acme.post_message(
        x, "steer", data={"insert_after": "a", "steps": [{"id": "z", "action": "screenshot", "args": {}}]}
    )
    unknown = acme.post_message(x, "steer", data={"skip": ["z"]})
    skip_c = acme.post_message(x, "steer", data={"skip": ["c"]})
    h1.renew(lease)
    h1.acknowledge(lease, insert_z["id"], "rejected", detail="no room for z")
    before = acme.messages(x)

    # When h1 admits the first anywhere, or the second before a step that is not in the plan
    h1.admit(lease, unknown["id"], "b", expect=(409, "message_conflict"))
    h1.admit(lease, skip_c["id"], "z", expect=(409, "message_conflict"))

    # Then neither changed; h1 can still reject the first and admit the second
    assert acme.messages(x) == before
    h1.acknowledge(lease, unknown["id"], "rejected", detail="step 'z' is not in the plan")
    h1.admit(lease, skip_c["id"], "b")
    steps = ran("a", "b") + not_started("c")
    assert h1.report(lease, "done", steps=steps)["result"]["steps"] == steps


@pytest.mark.req("STEER-EARLY/s1")
def test_a_steer_naming_a_step_in_no_plan_is_refused_when_posted(scene):
    """Skipping or inserting after a step that neither the plan nor an earlier steer has is 400 naming it."""
    acme, h1 = scene.acme, scene.h1
    # Given X dispatched on h1 with steps a, b, c
    task, lease = scene.running(h1, plan=PLAN_ABC)
    x = task["id"]
    # When a client steers X to skip nosuch, or to insert after nosuch
    skip = acme.post_message(x, "steer", data={"skip": ["b", "nosuch"]}, expect=(400, "invalid_request"))
    shot = {"id": "y", "action": "screenshot", "args": {}}
    after = acme.post_message(x, "steer", data={"insert_after": "nosuch", "steps": [shot]}, expect=400)
    # Then each detail names the step, and no message was recorded
    assert "nosuch" in skip["detail"] and "nosuch" in after["detail"]
    assert acme.messages(x) == []
    # And a steer may name the step an earlier steer inserts, before any host applied it
    z = {"id": "z", "action": "screenshot", "args": {}}
    acme.post_message(x, "steer", data={"insert_after": "a", "steps": [z]})
    acme.post_message(x, "steer", data={"skip": ["z"]})
    acme.post_message(x, "steer", data={"insert_after": "z", "steps": [shot]})
    assert len(acme.messages(x)) == 3
    h1.report(lease, "done")


# ---------------------------------------------------------------------------------------
# BOUNDARY


@pytest.mark.req("BOUNDARY/s2")
@pytest.mark.parametrize("status", ["done", "failed", "cancelled"])
def test_the_result_names_every_step_of_the_edited_plan_once(scene, status):
    """a2 inserted after a: a result must list a, a2, b, c in that order, whatever ends the attempt."""
    acme, h1 = scene.acme, scene.h1
    # Given X dispatched on h1 with steps a, b, c, and a steer that inserted a2 after a, admitted before b
    task, lease = scene.running(h1, plan=PLAN_ABC)
    x = task["id"]
    a2 = {"id": "a2", "action": "screenshot", "args": {}}
    m1 = acme.post_message(x, "steer", data={"insert_after": "a", "steps": [a2]})
    h1.renew(lease)
    h1.admit(lease, m1["id"], "b")
    if status == "cancelled":
        acme.cancel(x, expect=202)
    before = acme.get_task(x)

    # When the attempt ends with `status`, reported with steps that miss a2, list a step twice, or
    # put a2 out of place
    stopped = "previous_step_failed" if status == "failed" else "cancelled"
    outcomes = {
        "a": ran("a"),
        "a2": ran("a2", status="failed" if status == "failed" else "completed"),
        "b": not_started("b", reason=stopped) if status != "done" else ran("b"),
        "c": not_started("c", reason=stopped) if status != "done" else ran("c"),
    }

    def steps(*order: str) -> list[dict]:
        return [outcome for step_id in order for outcome in outcomes[step_id]]

    for wrong in (("a", "b", "c"), ("a", "a2", "a2", "b", "c"), ("a", "b", "a2", "c"), ("a2", "a", "b", "c")):
        h1.report(lease, status, steps=steps(*wrong), expect=(400, "invalid_request"))
    assert acme.get_task(x) == before

    # Then the result with one entry for each of a, a2, b, c, in the edited order, is recorded as sent
    ended = h1.report(lease, status, steps=steps("a", "a2", "b", "c"))
    assert ended["status"] == status
    assert ended["result"]["steps"] == steps("a", "a2", "b", "c")
