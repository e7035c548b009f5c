"""Interactive sessions (SESSION, specs/requirements/sessions.md; specs/protocol.md Part D).

The test plays both the caller, who sends actions one at a time, and the Host Agent, which
polls `actions/next` and reports each outcome. The scenarios hold under either clock; the
idle timeout needs the manual one.
"""

from __future__ import annotations

import pytest

TAP = {"id": "a1", "action": "tap", "args": {"x": 10, "y": 20}}
SHOT = {"id": "a2", "action": "screenshot", "args": {}}


def session(scene, client=None, **fields) -> dict:
    """Submit a session only this test's devices match."""
    client = client or scene.acme
    body = {"session": fields.pop("session", {}), "requirements": scene.requirements(), **fields}
    task = client.call("POST", "/v1/tasks", body, expect=201)
    client.created.append(task["id"])
    return task


def running_session(scene, **fields):
    """Given a session dispatched as attempt 1 on h1."""
    scene.h1.register(scene.device("emulator-5554"))
    task = session(scene, **fields)
    lease = scene.h1.claim(sessions=True)
    assert lease is not None and lease.task_id == task["id"]
    scene.h1.start(lease)
    return task, lease


def act(caller, task_id: str, action: dict, *, expect=201, wait: float | None = None):
    params = None if wait is None else {"wait_seconds": str(wait)}
    return caller.call("POST", f"/v1/tasks/{task_id}/actions", action, expect=expect, params=params)


def poll(h1, lease, *, expect=200, wait: float = 0, **extra):
    body = {"lease_id": lease.lease_id, "wait_seconds": wait, **extra}
    return h1.caller.call(
        "POST", f"/v1/tasks/{lease.task_id}/attempts/{lease.attempt}/actions/next", body, expect=expect
    )


def report(h1, lease, action_id: str, status: str = "completed", *, expect=200, **extra):
    body = {"lease_id": lease.lease_id, "status": status, **extra}
    path = f"/v1/tasks/{lease.task_id}/attempts/{lease.attempt}/actions/{action_id}"
    return h1.caller.call("POST", path, body, expect=expect)


def actions(caller, task_id: str) -> dict:
    return {a["id"]: a for a in caller.call("GET", f"/v1/tasks/{task_id}/actions")["actions"]}


@pytest.mark.req("SESSION/s1")
def test_a_session_is_submitted_instead_of_a_plan(scene):
    """`session` in place of `plan`: a queued task with plan null; both or neither is 400."""
    task = session(scene, session={"idle_timeout_seconds": 5})
    assert (task["status"], task["plan"]) == ("queued", None)
    assert task["session"] == {
        "idle_timeout_seconds": 5,
        "end_requested_at": None,
        "idle_expires_at": None,
        "actions": [],
    }
    both = {"session": {}, "plan": {"steps": [TAP]}, "requirements": scene.requirements()}
    scene.acme.call("POST", "/v1/tasks", both, expect=(400, "invalid_request"))
    scene.acme.call("POST", "/v1/tasks", {"requirements": scene.requirements()}, expect=(400, "invalid_request"))


@pytest.mark.req("SESSION/s2")
def test_only_a_host_that_runs_sessions_claims_one(scene):
    """A claim without `sessions` never returns a session; with it, the assignment has no plan."""
    scene.h1.register(scene.device("emulator-5554"))
    task = session(scene)
    assert scene.h1.claim(expect=204) is None
    answer = scene.h1.caller.claim(scene.h1.id, sessions=True)
    assert (answer["task_id"], answer["plan"], answer["session"]) == (task["id"], None, {"idle_timeout_seconds": 300})


@pytest.mark.req("SESSION/s3")
def test_an_action_is_checked_like_a_step_and_safe_to_retry(scene):
    """201 queued with Location; the same body again 200; another body 409 action_conflict; a bad step 400."""
    task = session(scene)
    posted = act(scene.acme, task["id"], TAP)
    assert (posted["status"], posted["seq"], posted["attempt"]) == ("queued", 1, None)
    assert scene.acme.last.headers["location"] == f"/v1/tasks/{task['id']}/actions/a1"
    assert act(scene.acme, task["id"], TAP, expect=200) == posted
    act(scene.acme, task["id"], {**TAP, "args": {"x": 1, "y": 1}}, expect=(409, "action_conflict"))
    act(scene.acme, task["id"], {"id": "bad", "action": "fly"}, expect=(400, "invalid_request"))
    plan_task = scene.submit()
    act(scene.acme, plan_task["id"], TAP, expect=(409, "not_a_session"))


@pytest.mark.req("SESSION/s4", "SESSION/s5", "SESSION/s12")
def test_actions_reach_the_host_in_order_one_at_a_time_and_each_outcome_once(scene):
    """The poll hands out a1 until its outcome is in, then a2; a repeat is 200, another outcome 409."""
    task, lease = running_session(scene)
    act(scene.acme, task["id"], TAP)
    act(scene.acme, task["id"], SHOT)
    first = poll(scene.h1, lease)
    assert (first["action"]["id"], first["action"]["status"], first["action"]["attempt"]) == ("a1", "delivered", 1)
    assert poll(scene.h1, lease)["action"]["id"] == "a1"
    report(scene.h1, lease, "a2", expect=(409, "action_conflict"))
    ended = report(scene.h1, lease, "a1", output="ok")
    assert (ended["status"], ended["output"]) == ("completed", "ok")
    assert report(scene.h1, lease, "a1", output="ok") == ended
    report(scene.h1, lease, "a1", "failed", reason="no", expect=(409, "result_conflict"))
    waited = scene.acme.call("GET", f"/v1/tasks/{task['id']}/actions/a1", params={"wait_seconds": "1"})
    assert waited == ended
    assert poll(scene.h1, lease)["action"]["id"] == "a2"
    types = scene.acme.event_types(task["id"])
    assert types.count("action_posted") == 2 and types.count("action_delivered") == 2 and "action_ended" in types


@pytest.mark.req("SESSION/s6")
def test_a_cancel_reaches_a_host_running_an_action_and_ends_the_rest_not_started(scene):
    """A poll naming its action `running` answers the cancel; queued actions end not_started."""
    task, lease = running_session(scene)
    act(scene.acme, task["id"], {"id": "long", "action": "shell", "args": {"command": "sleep 60"}})
    act(scene.acme, task["id"], TAP)
    assert poll(scene.h1, lease)["action"]["id"] == "long"
    scene.acme.cancel(task["id"], expect=202)
    assert poll(scene.h1, lease, running="long") == {"action": None, "cancel_requested": True, "paused": False}
    report(scene.h1, lease, "long", "interrupted", reason="cancelled while running")
    scene.h1.report(lease, "cancelled")
    ended = actions(scene.acme, task["id"])
    assert ended["long"]["status"] == "interrupted"
    assert (ended["a1"]["status"], ended["a1"]["reason"]) == ("not_started", "cancelled")


@pytest.mark.req("SESSION/s7")
def test_a_pause_delivers_no_action_until_resume(scene):
    """The server applies a session's pause at once; the poll answers paused until the resume."""
    task, lease = running_session(scene)
    message = scene.acme.post_message(task["id"], "pause")
    assert scene.acme.get_message(task["id"], message["id"])["state"] == "completed"
    act(scene.acme, task["id"], TAP)
    assert poll(scene.h1, lease) == {"action": None, "cancel_requested": False, "paused": True}
    scene.acme.post_message(task["id"], "resume")
    assert poll(scene.h1, lease)["action"]["id"] == "a1"


@pytest.mark.req("SESSION/s8")
def test_ending_a_session_ends_it_done_once_its_actions_ended(scene):
    """No new action after the end; the last outcome ends the task done, session_ended."""
    task, lease = running_session(scene)
    act(scene.acme, task["id"], TAP)
    poll(scene.h1, lease)
    ending = scene.acme.call("POST", f"/v1/tasks/{task['id']}/end")
    assert ending["status"] == "dispatched" and ending["session"]["end_requested_at"] is not None
    act(scene.acme, task["id"], SHOT, expect=(409, "session_ended"))
    report(scene.h1, lease, "a1")
    done = scene.acme.get_task(task["id"])
    assert (done["status"], done["result"]["reason"], done["attempts"][0]["outcome"]) == (
        "done",
        "session_ended",
        "done",
    )
    poll(scene.h1, lease, expect=(409, "lease_ended"))


@pytest.mark.req("SESSION/s9")
def test_an_idle_session_ends_done(scene):
    """Idle for its timeout: done, session_idle (manual clock)."""
    scene.clock.need_manual("the scenario moves the clock past the idle timeout")
    task, _ = running_session(scene, session={"idle_timeout_seconds": 5})
    scene.clock.advance(5)
    done = scene.acme.get_task(task["id"])
    assert (done["status"], done["result"]["reason"]) == ("done", "session_idle")


@pytest.mark.req("SESSION/s10")
def test_a_released_attempt_ends_its_actions_and_the_next_attempt_gets_none(scene):
    """The delivered action is interrupted (it may have run), the queued one not_started; nothing replayed."""
    task, lease = running_session(scene, max_attempts=2)
    act(scene.acme, task["id"], TAP)
    act(scene.acme, task["id"], SHOT)
    poll(scene.h1, lease)
    scene.h1.release(lease, reason="host_stopping")
    ended = actions(scene.acme, task["id"])
    assert ended["a1"]["status"] == "interrupted" and "may have taken effect" in ended["a1"]["reason"]
    assert ended["a2"]["status"] == "not_started"
    lease2 = scene.h1.claim(sessions=True)
    assert (lease2.task_id, lease2.attempt) == (task["id"], 2)
    scene.h1.start(lease2)
    assert poll(scene.h1, lease2)["action"] is None
