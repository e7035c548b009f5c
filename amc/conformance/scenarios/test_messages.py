"""Messages to a task, specs/protocol.md Part B: DELIVERY, STATUS-READ, and the refusals of the
message endpoints (specs/requirements/steering.md).

The test plays the client that posts the messages and the Host Agent that receives them in
its start and renewal responses and acknowledges them. What it checks is what the server
records and answers: the message states and times, what each response carries, and which
acknowledgements it refuses.
"""

from __future__ import annotations

import pytest

from amc.conformance.client import MESSAGE_MEMBERS, PLAN_ABC, ids, ms, plan_of, ran, wire

PLAN_ABCD = plan_of("a", "b", "c", "d")


def without(problem: dict, task_id: str) -> dict:
    """A problem document with the task id it may quote replaced, for comparing two 404s."""
    return {key: value.replace(task_id, "<id>") if isinstance(value, str) else value for key, value in problem.items()}


def unset_members(message: dict) -> list[str]:
    """The members of a message that are still null."""
    return sorted(k for k in MESSAGE_MEMBERS if message[k] is None)


# ---------------------------------------------------------------------------------------
# DELIVERY


@pytest.mark.req("DELIVERY/s1")
def test_queued_delivered_admitted_and_completed_are_distinct_states(scene):
    """A steer reads queued, then delivered (renewal), admitted (boundary), completed, each with its own time."""
    acme, h1, clock = scene.acme, scene.h1, scene.clock
    # Given task X dispatched on h1 with steps a, b, c, d, and steer m1 posted to it
    task, lease = scene.running(h1, plan=PLAN_ABCD)
    x = task["id"]
    events = acme.event_types(x)
    clock.advance(1)
    m1 = acme.post_message(x, "steer", data={"skip": ["d"]}, expect=201)
    assert set(m1) >= MESSAGE_MEMBERS, f"a message has the members {sorted(MESSAGE_MEMBERS)}: {m1}"
    assert (m1["intent"], m1["state"], m1["text"], m1["data"]) == ("steer", "queued", None, {"skip": ["d"]})
    assert unset_members(m1) == ["admitted_at", "attempt", "boundary", "completed_at", "delivered_at", "detail", "text"]
    if clock.manual:
        assert m1["created_at"] == wire(clock.now())
    assert acme.get_message(x, m1["id"]) == m1
    assert acme.messages(x) == [m1]
    assert acme.event_types(x) == events + ["message_posted"]

    # When h1's renewal carries m1
    clock.advance(2)
    carried = h1.renew(lease)["messages"]

    # Then m1 reads delivered, to attempt 1, with delivered_at set and admitted_at still null
    delivered = acme.get_message(x, m1["id"])
    assert ids(carried) == [m1["id"]]
    assert carried[0] == delivered, "a renewal carries the message as it reads once delivered"
    assert (delivered["state"], delivered["attempt"], delivered["created_at"]) == ("delivered", 1, m1["created_at"])
    assert delivered["delivered_at"] is not None
    if clock.manual:
        assert delivered["delivered_at"] == wire(clock.now())
    assert unset_members(delivered) == ["admitted_at", "boundary", "completed_at", "detail", "text"]
    assert acme.event_types(x) == events + ["message_posted", "message_delivered"]

    # And after h1 acknowledges admitted before c, m1 reads admitted with its boundary and time
    clock.advance(2)
    admitted = h1.admit(lease, m1["id"], "c")
    assert admitted == acme.get_message(x, m1["id"])
    assert (admitted["state"], admitted["boundary"]) == ("admitted", {"before_step": "c"})
    assert admitted["delivered_at"] == delivered["delivered_at"]
    assert admitted["admitted_at"] is not None and admitted["completed_at"] is None
    if clock.manual:
        assert admitted["admitted_at"] == wire(clock.now())
    # (an acknowledged message is no longer carried)
    assert h1.renew(lease)["messages"] == []

    # And after h1 acknowledges completed, m1 reads completed, its earlier times kept
    clock.advance(2)
    completed = h1.acknowledge(lease, m1["id"], "completed")
    assert completed == acme.get_message(x, m1["id"])
    assert completed["state"] == "completed"
    assert completed["boundary"] == {"before_step": "c"}
    assert (completed["delivered_at"], completed["admitted_at"]) == (delivered["delivered_at"], admitted["admitted_at"])
    assert completed["completed_at"] is not None
    if clock.manual:
        assert completed["completed_at"] == wire(clock.now())
        times = [m1["created_at"], delivered["delivered_at"], admitted["admitted_at"], completed["completed_at"]]
        assert [ms(t) for t in times] == sorted(set(ms(t) for t in times)), f"each state has its own time: {times}"
    assert acme.event_types(x) == events + [
        "message_posted",
        "message_delivered",
        "message_acknowledged",
        "message_acknowledged",
    ]


@pytest.mark.req("DELIVERY/s2")
def test_a_redelivered_message_keeps_its_id_and_a_repeated_acknowledgement_changes_nothing(scene):
    """Unacknowledged, m1 is carried again under its id; a repeated admitted is 200 and changes nothing."""
    acme, h1, clock = scene.acme, scene.h1, scene.clock
    # Given steer m1 inserting a2 after a, to X dispatched on h1 (steps a, b, c), carried by a renewal
    task, lease = scene.running(h1, plan=PLAN_ABC)
    x = task["id"]
    a2 = {"id": "a2", "action": "screenshot", "args": {}}
    m1 = acme.post_message(x, "steer", data={"insert_after": "a", "steps": [a2]})
    first = h1.renew(lease)["messages"]
    assert ids(first) == [m1["id"]]

    # When the next renewal comes before any acknowledgement
    clock.advance(2)
    again = h1.renew(lease)["messages"]

    # Then it carries m1 again, under the same id, still delivered at the first time, delivered once
    assert again == first
    assert acme.event_types(x).count("message_delivered") == 1

    # When h1 admits m1 before b, and repeats that acknowledgement (its response was lost)
    admitted = h1.admit(lease, m1["id"], "b")
    events = acme.history(x)
    before = acme.get_task(x)
    clock.advance(2)
    repeated = h1.admit(lease, m1["id"], "b")

    # Then the repeat answers 200 with the message as it stands, and records nothing
    assert repeated == admitted
    assert acme.history(x) == events
    assert acme.get_task(x) == before
    assert h1.renew(lease)["messages"] == []
    # And once completed, admitted again is moving backwards: a conflict that changes nothing
    completed = h1.acknowledge(lease, m1["id"], "completed")
    h1.admit(lease, m1["id"], "b", expect=(409, "message_conflict"))
    assert acme.get_message(x, m1["id"]) == completed
    # And the edit counted once: the result names a, a2, b, c (a2 inserted once)
    steps = ran("a", "a2", "b", "c")
    assert h1.report(lease, "done", steps=steps)["result"]["steps"] == steps


@pytest.mark.req("DELIVERY/s3")
def test_pending_messages_survive_a_restart(scene):
    """After a restart, a queued and a delivered steer read as before; the next renewal carries each once."""
    if not scene.target.can_restart:
        pytest.skip("restarting the target needs --restart-command CMD (or the suite's own server)")
    acme, h1 = scene.acme, scene.h1
    # Given X dispatched on h1 with steer m2 delivered but not acknowledged, and steer m1 queued
    task, lease = scene.running(h1, plan=PLAN_ABC)
    x = task["id"]
    m2 = acme.post_message(x, "steer", data={"skip": ["c"]})
    assert ids(h1.renew(lease)["messages"]) == [m2["id"]]
    m1 = acme.post_message(x, "steer", text="use the staging server")
    before = acme.messages(x)
    assert [m["state"] for m in before] == ["delivered", "queued"]

    # When the server process is killed and restarted
    scene.target.restart()

    # Then both read as before, with the same ids and states
    assert acme.messages(x) == before
    # And h1's next renewal carries both, once each
    carried = h1.renew(lease)["messages"]
    assert sorted(ids(carried)) == sorted([m1["id"], m2["id"]])
    assert [m["state"] for m in acme.messages(x)] == ["delivered", "delivered"]


@pytest.mark.req("DELIVERY")
def test_the_start_response_carries_messages_posted_before_it(scene):
    """Steers posted while the task was queued and while it was assigned are carried by the start response."""
    acme, h1 = scene.acme, scene.h1
    # Given a queued task X and a steer m1 to it, then X assigned to h1 and a steer m2
    h1.register(scene.device("emulator-5554"))
    task = scene.submit(plan=PLAN_ABC)
    m1 = acme.post_message(task["id"], "steer", data={"skip": ["c"]})
    lease = h1.claim()
    assert lease.task_id == task["id"]
    m2 = acme.post_message(task["id"], "steer", text="take your time")
    assert [m["state"] for m in acme.messages(task["id"])] == ["queued", "queued"]

    # When h1 starts attempt 1
    started = h1.start(lease)

    # Then the start response carries both, in posting order, now delivered to attempt 1
    assert ids(started["messages"]) == [m1["id"], m2["id"]]
    for message in acme.messages(task["id"]):
        assert (message["state"], message["attempt"]) == ("delivered", 1)
    assert started["messages"] == acme.messages(task["id"])


@pytest.mark.req("DELIVERY")
def test_acknowledgements_that_move_backwards_or_skip_a_state_are_conflicts(scene):
    """message_conflict: a message not delivered to this attempt, a follow-up, completed before admitted, and
    any move out of rejected or completed; repeats answer 200."""
    acme, h1 = scene.acme, scene.h1
    # Given X dispatched on h1 with steers m1 and m2 delivered by a renewal, then a steer m3 and a
    # follow-up f posted after it (so neither is delivered)
    task, lease = scene.running(h1, plan=PLAN_ABC)
    x = task["id"]
    m1 = acme.post_message(x, "steer", data={"skip": ["c"]})
    m2 = acme.post_message(x, "steer", text="be gentle")
    assert ids(h1.renew(lease)["messages"]) == [m1["id"], m2["id"]]
    m3 = acme.post_message(x, "steer", text="not delivered yet")
    f = acme.post_message(x, "follow_up", text="then open the camera")
    before = acme.messages(x)
    events = acme.history(x)

    # When h1 acknowledges a message never delivered to it, a follow-up, or m1 completed before admitted
    h1.admit(lease, m3["id"], "b", expect=(409, "message_conflict"))
    h1.admit(lease, f["id"], "b", expect=(409, "message_conflict"))
    h1.acknowledge(lease, f["id"], "completed", expect=(409, "message_conflict"))
    h1.acknowledge(lease, m1["id"], "completed", expect=(409, "message_conflict"))
    # Then nothing changed
    assert acme.messages(x) == before
    assert acme.history(x) == events

    # When m1 is rejected (twice: the repeat is a no-op), then admitted or completed
    rejected = h1.acknowledge(lease, m1["id"], "rejected", detail="the runner cannot skip c")
    assert (rejected["state"], rejected["detail"]) == ("rejected", "the runner cannot skip c")
    assert h1.acknowledge(lease, m1["id"], "rejected", detail="the runner cannot skip c") == rejected
    h1.admit(lease, m1["id"], "b", expect=(409, "message_conflict"))
    h1.acknowledge(lease, m1["id"], "completed", expect=(409, "message_conflict"))
    # And m2 is admitted, then rejected, completed, and admitted again
    h1.admit(lease, m2["id"], "b")
    h1.acknowledge(lease, m2["id"], "rejected", detail="too late", expect=(409, "message_conflict"))
    completed = h1.acknowledge(lease, m2["id"], "completed")
    assert h1.acknowledge(lease, m2["id"], "completed") == completed
    h1.admit(lease, m2["id"], "b", expect=(409, "message_conflict"))
    h1.acknowledge(lease, m2["id"], "rejected", detail="too late", expect=(409, "message_conflict"))

    # Then each message reads as its last accepted acknowledgement left it
    assert acme.get_message(x, m1["id"]) == rejected
    assert acme.get_message(x, m2["id"]) == completed
    assert [m["state"] for m in acme.messages(x)] == ["rejected", "completed", "queued", "queued"]


@pytest.mark.req("DELIVERY")
def test_acknowledgements_pass_the_lease_checks(scene):
    """Another host's acknowledgement is lease_foreign, a wrong lease lease_unknown, after the report lease_ended;
    a message the ended attempt had not applied is not_admitted."""
    acme, h1, h2 = scene.acme, scene.h1, scene.h2
    # Given X dispatched on h1 with steer m1 delivered
    task, lease = scene.running(h1, plan=PLAN_ABC)
    x = task["id"]
    m1 = acme.post_message(x, "steer", data={"skip": ["c"]})
    h1.renew(lease)
    _other, other_lease = scene.running(h2, device="emulator-5570")
    delivered = acme.get_message(x, m1["id"])

    # When h2 acknowledges it, or h1 with another attempt's lease
    h2.admit(lease, m1["id"], "b", expect=(409, "lease_foreign"))
    h1.acknowledge(
        lease,
        m1["id"],
        "admitted",
        boundary={"before_step": "b"},
        lease_id=other_lease.lease_id,
        expect=(409, "lease_unknown"),
    )
    # Then m1 is unchanged
    assert acme.get_message(x, m1["id"]) == delivered

    # When h1 reports done without applying m1, then acknowledges it
    h1.report(lease, "done")
    h1.admit(lease, m1["id"], "b", expect=(409, "lease_ended"))
    # Then m1 is not_admitted: its attempt ended first
    assert acme.get_message(x, m1["id"])["state"] == "not_admitted"


@pytest.mark.req("DELIVERY")
def test_an_expired_attempt_drops_what_it_was_given_and_keeps_what_it_was_not(scene):
    """Attempt 1 expires: its delivered steer is not_admitted; a steer still queued goes to attempt 2's start."""
    acme, h1, h2, clock = scene.acme, scene.h1, scene.h2, scene.clock
    # Given X (max_attempts 2) dispatched on h1, steer m1 delivered to attempt 1, steer m2 queued
    task, lease1 = scene.running(h1, plan=PLAN_ABC, max_attempts=2, lease_seconds=clock.short_lease)
    x = task["id"]
    m1 = acme.post_message(x, "steer", text="first")
    assert ids(h1.renew(lease1)["messages"]) == [m1["id"]]
    m2 = acme.post_message(x, "steer", text="second")

    # When attempt 1's lease runs out and h2 starts attempt 2
    clock.run_out(lease1)
    assert acme.get_task(x)["status"] == "queued"
    h1.admit(lease1, m1["id"], "b", expect=(409, "lease_expired"))
    h2.register(scene.device("emulator-5570"))
    lease2 = h2.claim()
    assert (lease2.task_id, lease2.attempt) == (x, 2)
    started = h2.start(lease2)

    # Then m1 is not_admitted, and m2 is carried to attempt 2
    assert acme.get_message(x, m1["id"])["state"] == "not_admitted"
    assert ids(started["messages"]) == [m2["id"]]
    assert (started["messages"][0]["state"], started["messages"][0]["attempt"]) == ("delivered", 2)
    # (attempt 2 cannot acknowledge what attempt 1 was given)
    h2.admit(lease2, m1["id"], "b", expect=(409, "message_conflict"))


@pytest.mark.req("DELIVERY/s4")
def test_every_message_not_admitted_or_rejected_says_why(scene):
    """not_admitted and rejected messages carry a detail; a rejection without one is refused."""
    acme, h1 = scene.acme, scene.h1
    # Given X dispatched on h1; steer m1 delivered and rejected by h1, steer m2 delivered, m3 queued
    task, lease = scene.running(h1, plan=PLAN_ABC)
    x = task["id"]
    m1 = acme.post_message(x, "steer", text="first")
    m2 = acme.post_message(x, "steer", text="second")
    h1.renew(lease)
    m3 = acme.post_message(x, "pause")
    h1.acknowledge(lease, m1["id"], "rejected", expect=(400, "invalid_request"))
    h1.acknowledge(lease, m1["id"], "rejected", detail="no planner here")
    # When X ends done before h1 applied m2 or received m3
    h1.report(lease, "done")
    # Then m1 keeps h1's reason, and m2 and m3 are not_admitted, each saying why
    messages = {m["id"]: m for m in acme.messages(x)}
    assert (messages[m1["id"]]["state"], messages[m1["id"]]["detail"]) == ("rejected", "no planner here")
    for message in (m2, m3):
        got = messages[message["id"]]
        assert got["state"] == "not_admitted"
        assert isinstance(got["detail"], str) and got["detail"].strip(), got


# ---------------------------------------------------------------------------------------
# Refusals of the message endpoints


@pytest.mark.req("DELIVERY")
def test_unknown_messages_tasks_and_attempts_are_not_found(scene):
    """An unknown task's messages, a message or attempt acknowledged that does not exist: 404."""
    acme, h1 = scene.acme, scene.h1
    # Given X dispatched on h1 with steer m1 delivered, and another task Y of acme
    task, lease = scene.running(h1, plan=PLAN_ABC)
    x = task["id"]
    m1 = acme.post_message(x, "steer", text="hello")
    h1.renew(lease)
    y = scene.submit()["id"]
    unknown_task, unknown_message = f"t_unknown{scene.tag}", f"m_unknown{scene.tag}"
    before = acme.messages(x)

    # When a client lists the messages of an unknown task, or posts to it
    acme.messages(unknown_task, expect=(404, "not_found"))
    acme.post_message(unknown_task, "steer", text="hello", expect=(404, "not_found"))
    # (and m1 is X's alone)
    assert m1["id"] not in ids(acme.messages(y))
    # And h1 acknowledges an unknown message, m1 under attempt 2 or under an unknown task
    h1.admit(lease, unknown_message, "b", expect=(404, "not_found"))
    h1.admit(lease, m1["id"], "b", attempt=2, expect=(404, "not_found"))
    h1.caller.acknowledge(
        unknown_task, 1, m1["id"], lease.lease_id, "admitted", boundary={"before_step": "b"}, expect=(404, "not_found")
    )
    # (404 comes before any check of the body)
    h1.acknowledge(lease, unknown_message, "bogus", expect=(404, "not_found"))

    # Then each is 404, and X's messages are unchanged
    assert acme.messages(x) == before


@pytest.mark.req("TENANCY")
def test_only_the_tasks_tenant_and_the_admin_send_and_read_messages(scene):
    """Another tenant gets 404 as for an unknown task; a host is forbidden to post; the admin may."""
    acme, beta, admin, h1 = scene.acme, scene.beta, scene.admin, scene.h1
    anonymous = scene.connection.caller(None, "no token")
    # Given X of acme, dispatched on h1, with a steer m1
    task, _lease = scene.running(h1, plan=PLAN_ABC)
    x = task["id"]
    m1 = acme.post_message(x, "steer", text="hello")
    unknown = f"t_unknown{scene.tag}"

    # When beta posts to X, lists X's messages or reads m1
    refused = [
        beta.post_message(x, "pause", expect=(404, "not_found")),
        beta.messages(x, expect=(404, "not_found")),
        beta.get_message(x, m1["id"], expect=(404, "not_found")),
    ]
    # Then each is the 404 of an unknown task, word for word but for the id
    expected = [
        beta.post_message(unknown, "pause", expect=(404, "not_found")),
        beta.messages(unknown, expect=(404, "not_found")),
        beta.get_message(unknown, m1["id"], expect=(404, "not_found")),
    ]
    assert [without(r, x) for r in refused] == [without(e, unknown) for e in expected]
    # And a host may not post, nor anyone without a token
    h1.caller.post_message(x, "pause", expect=(403, "forbidden"))
    anonymous.post_message(x, "pause", expect=(401, "unauthorized"))
    anonymous.messages(x, expect=(401, "unauthorized"))
    assert acme.messages(x) == [m1]
    # And the admin posts and reads any tenant's messages
    m2 = admin.post_message(x, "steer", text="from the operator")
    assert ids(admin.messages(x)) == [m1["id"], m2["id"]]
    assert admin.get_message(x, m1["id"]) == acme.get_message(x, m1["id"])


@pytest.mark.req("STEER", "PAUSE")
@pytest.mark.parametrize("status", ["done", "failed", "cancelled"])
def test_a_steer_pause_or_resume_to_an_ended_task_is_task_terminal(scene, status):
    """steer, pause and resume to a done, failed or cancelled task: 409 task_terminal, nothing recorded."""
    acme, h1 = scene.acme, scene.h1
    # Given task X that ended with `status`
    if status == "cancelled":
        task = scene.submit(plan=PLAN_ABC)
        acme.cancel(task["id"])
    else:
        task, lease = scene.running(h1, plan=PLAN_ABC)
        h1.report(lease, status)
    x = task["id"]
    before, events = acme.get_task(x), acme.history(x)

    # When its client steers, pauses or resumes it
    acme.post_message(x, "steer", data={"skip": ["c"]}, expect=(409, "task_terminal"))
    acme.post_message(x, "steer", text="too late", expect=(409, "task_terminal"))
    acme.post_message(x, "pause", expect=(409, "task_terminal"))
    acme.post_message(x, "resume", expect=(409, "task_terminal"))

    # Then no message exists and nothing was recorded
    assert acme.messages(x) == []
    assert acme.get_task(x) == before
    assert acme.history(x) == events


@pytest.mark.req("STEER")
def test_malformed_messages_are_refused(scene):
    """An unknown intent, a steer without text or edit, a malformed edit, an edit of a staged plan: 400."""
    acme, h1 = scene.acme, scene.h1
    # Given X dispatched on h1 with steps a, b, c, and a queued task W whose plan has stages
    task, _lease = scene.running(h1, plan=PLAN_ABC)
    x = task["id"]
    staged = scene.submit(plan={"stages": [{"id": "s1", "steps": PLAN_ABC["steps"]}]})["id"]
    bad_step = {"id": "x", "action": "fly", "args": {}}
    bodies = [
        {},  # no intent
        {"intent": "cancel"},  # cancellation is POST /cancel, not a message
        {"intent": "bogus"},
        {"intent": "steer"},  # neither text nor an edit
        {"intent": "steer", "text": 3},
        {"intent": "steer", "text": "x", "colour": "red"},  # unknown member
        {"intent": "steer", "data": ["skip", "c"]},
        {"intent": "steer", "data": {"skip": []}},
        {"intent": "steer", "data": {"skip": "c"}},
        {"intent": "steer", "data": {"hop": ["c"]}},
        {"intent": "steer", "data": {"skip": ["c"], "replace_remaining": [bad_step]}},
        {"intent": "steer", "data": {"insert_after": "a"}},  # no steps
        {"intent": "steer", "data": {"insert_after": "a", "steps": []}},
        {"intent": "steer", "data": {"insert_after": "a", "steps": [bad_step]}},  # unknown action
        {"intent": "steer", "data": {"replace_remaining": []}},
        {
            "intent": "steer",
            "data": {
                "replace_remaining": [
                    {"id": "d", "action": "screenshot", "args": {}},
                    {"id": "d", "action": "screenshot", "args": {}},
                ]
            },
        },
    ]

    # When its client posts each of these bodies
    for body in bodies:
        acme.post_message(x, body=body, expect=(400, "invalid_request"))
    # And a structured edit to the staged task
    acme.post_message(staged, "steer", data={"skip": ["b"]}, expect=(400, "invalid_request"))

    # Then no message was recorded
    assert acme.messages(x) == [] and acme.messages(staged) == []
    # (a text steer to the staged task is fine: it is guidance, not an edit)
    acme.post_message(staged, "steer", text="go easy", expect=201)


@pytest.mark.req("DELIVERY")
def test_malformed_acknowledgements_are_refused(scene):
    """No lease_id, an unknown state, admitted without a boundary, rejected without a detail: 400."""
    acme, h1 = scene.acme, scene.h1
    # Given X dispatched on h1 with steer m1 delivered
    task, lease = scene.running(h1, plan=PLAN_ABC)
    x = task["id"]
    m1 = acme.post_message(x, "steer", data={"skip": ["c"]})
    h1.renew(lease)
    delivered = acme.get_message(x, m1["id"])
    path = f"/v1/tasks/{x}/attempts/1/messages/{m1['id']}"
    lid = lease.lease_id
    bodies = [
        {"state": "admitted", "boundary": {"before_step": "b"}},  # no lease_id
        {"lease_id": lid},  # no state
        {"lease_id": lid, "state": "delivered"},
        {"lease_id": lid, "state": "queued"},
        {"lease_id": lid, "state": "bogus"},
        {"lease_id": lid, "state": "admitted"},  # no boundary
        {"lease_id": lid, "state": "admitted", "boundary": {"step": "b"}},
        {"lease_id": lid, "state": "admitted", "boundary": "b"},
        {"lease_id": lid, "state": "rejected"},  # no detail
        {"lease_id": lid, "state": "admitted", "boundary": {"before_step": "b"}, "colour": "red"},
    ]

    # When h1 sends each of these bodies
    for body in bodies:
        h1.caller.call("POST", path, body, expect=(400, "invalid_request"))

    # Then m1 is unchanged
    assert acme.get_message(x, m1["id"]) == delivered


# ---------------------------------------------------------------------------------------
# STATUS-READ


@pytest.mark.req("STATUS-READ/s1")
def test_reading_status_changes_nothing(scene):
    """Reading X, its history, its messages, the task list and the hosts, many times, changes nothing."""
    acme, admin, h1, clock = scene.acme, scene.admin, scene.h1, scene.clock
    # Given X dispatched on h1, not paused, with a queued steer m1 and no cancellation
    task, lease = scene.running(h1, plan=PLAN_ABC)
    x = task["id"]
    m1 = acme.post_message(x, "steer", data={"skip": ["c"]})
    before, events, messages = acme.get_task(x), acme.history(x), acme.messages(x)
    assert before["cancellation"] is None and before["paused"] is False
    assert [m["state"] for m in messages] == ["queued"]

    # When its client (and the admin, and h1) read X, X's history and X's messages many times
    for _ in range(5):
        clock.advance(1)
        for reader in (acme, admin):
            reader.get_task(x)
            reader.history(x)
            reader.messages(x)
            reader.get_message(x, m1["id"])
            reader.list_tasks(status="dispatched")
            reader.list_hosts()
        h1.read_task(x)
        h1.read()

    # Then X, its history and its messages are exactly as before
    after = acme.get_task(x)
    assert after == before
    assert (after["cancellation"], after["paused"], after["updated_at"]) == (None, False, before["updated_at"])
    assert acme.history(x) == events
    assert acme.messages(x) == messages
    # And h1's next renewal is not asked to cancel (it carries m1, still the only message)
    renewal = h1.renew(lease)
    assert renewal["cancel_requested"] is False
    assert ids(renewal["messages"]) == [m1["id"]]
