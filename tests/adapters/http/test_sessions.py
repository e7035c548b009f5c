"""Part D over HTTP: sessions, actions, the host's long poll, outcomes, end and idle.

The kernel's rules have model tests of the same ids (tests/model/test_sessions.py); here they
are checked through the wire, with real waiting: a poll answered when an action is posted, a
caller's wait answered when the outcome is reported. Every response is checked against
specs/openapi.yaml by the test client.
"""

from __future__ import annotations

import threading
import time

import pytest

from tests.support.http import problem

req = pytest.mark.req

TAP = {"id": "a1", "action": "tap", "args": {"x": 10, "y": 20}}


def session(amc, host: str = "h1", **submit) -> tuple[str, dict]:
    """A session dispatched on `host`: (task id, assignment)."""
    task = amc.acme.submit_session(**submit)
    getattr(amc, host).register(host, ["emulator-5554"])
    assignment = getattr(amc, host).claim(host, sessions=True)
    assert assignment["task_id"] == task["id"]
    getattr(amc, host).start(task["id"], 1, assignment["lease_id"])
    return task["id"], assignment


def in_thread(fn, *args, **kwargs) -> dict:
    """Run `fn` in a thread; the dict gets its answer under "answer"."""
    box: dict = {}

    def run():
        box["answer"] = fn(*args, **kwargs)

    box["thread"] = threading.Thread(target=run)
    box["thread"].start()
    return box


@req("SESSION/s1")
def test_a_session_is_submitted_instead_of_a_plan(amc):
    task = amc.acme.submit_session(idle_timeout_seconds=5)
    assert task["plan"] is None and task["status"] == "queued"
    assert task["session"] == {
        "idle_timeout_seconds": 5,
        "end_requested_at": None,
        "idle_expires_at": None,
        "actions": [],
    }
    assert amc.acme.submit_session()["session"]["idle_timeout_seconds"] == 300
    amc.acme.call("POST", "/v1/tasks", {"session": {}, "plan": {"steps": [TAP]}}, 400)
    amc.acme.call("POST", "/v1/tasks", {"labels": {}}, 400)
    amc.acme.call("POST", "/v1/tasks", {"session": {"idle_timeout_seconds": 0}}, 400)
    amc.acme.call("POST", "/v1/tasks", {"session": {"idle": 1}}, 400)
    assert amc.acme.submit({"steps": [TAP]})["session"] is None


@req("SESSION/s2")
def test_only_a_host_that_runs_sessions_claims_one(amc):
    task = amc.acme.submit_session()
    amc.h1.register("h1", ["emulator-5554"])
    assert amc.h1.claim("h1", expect=204) is None
    assignment = amc.h1.claim("h1", sessions=True)
    assert (assignment["task_id"], assignment["plan"], assignment["session"]) == (
        task["id"],
        None,
        {"idle_timeout_seconds": 300},
    )


@req("SESSION/s3")
def test_posting_an_action_is_checked_like_a_step_and_safe_to_retry(amc):
    task_id = amc.acme.submit_session()["id"]
    posted = amc.acme.act(task_id, TAP)
    assert amc.acme.last.headers["location"] == f"/v1/tasks/{task_id}/actions/a1"
    assert (posted["id"], posted["seq"], posted["status"], posted["attempt"], posted["args"]) == (
        "a1",
        1,
        "queued",
        None,
        {"x": 10, "y": 20},
    )
    assert amc.acme.act(task_id, TAP, expect=200) == posted
    amc.acme.act(task_id, {**TAP, "args": {"x": 1, "y": 1}}, expect=409)
    assert problem(amc.acme) == (409, "action_conflict")
    refused = amc.acme.act(task_id, {"id": "a2", "action": "fly"}, expect=400)
    assert "a2" in refused["detail"]
    amc.acme.act(task_id, TAP, wait=31, expect=400)
    plan_id = amc.acme.submit({"steps": [TAP]})["id"]
    amc.acme.act(plan_id, TAP, expect=409)
    assert problem(amc.acme) == (409, "not_a_session")
    amc.beta.act(task_id, TAP, expect=404)
    assert amc.acme.actions(task_id) == [posted] == amc.acme.task(task_id)["session"]["actions"]


@req("SESSION/s4", "SESSION/s5")
def test_a_waiting_poll_gets_the_action_at_once_and_a_waiting_caller_its_outcome(amc):
    task_id, a = session(amc)
    poll = in_thread(amc.caller(amc.h1.token, "h1b").poll, task_id, 1, a["lease_id"], wait=20)
    time.sleep(0.2)  # the poll is waiting
    started = time.monotonic()
    caller = in_thread(amc.caller(amc.acme.token, "acme2").act, task_id, TAP, wait=20)
    poll["thread"].join(10)
    polled = poll["answer"]
    assert polled["action"]["id"] == "a1" and polled["action"]["status"] == "delivered"
    assert polled["cancel_requested"] is False and polled["paused"] is False
    assert time.monotonic() - started < 2  # not at the end of a wait
    shot = amc.h1.upload(task_id, 1, a["lease_id"], "a1-screen.png", b"png", step="a1", content_type="image/png")
    amc.h1.report_action(task_id, 1, a["lease_id"], "a1", "completed", output="ok", artifacts=[shot["id"]])
    caller["thread"].join(10)
    ended = caller["answer"]
    assert (ended["status"], ended["output"], ended["artifacts"], ended["attempt"]) == (
        "completed",
        "ok",
        [shot["id"]],
        1,
    )
    again = amc.h1.report_action(task_id, 1, a["lease_id"], "a1", "completed", output="ok", artifacts=[shot["id"]])
    assert again == ended
    amc.h1.report_action(task_id, 1, a["lease_id"], "a1", "failed", reason="no", expect=409)
    assert problem(amc.h1) == (409, "result_conflict")
    amc.h1.report_action(task_id, 1, "l_wrong", "a1", "completed", expect=409)
    assert problem(amc.h1) == (409, "lease_unknown")
    assert amc.h1.poll(task_id, 1, a["lease_id"])["action"] is None


@req("SESSION/s4")
def test_the_poll_answers_the_delivered_action_until_its_outcome_then_the_next(amc):
    task_id, a = session(amc)
    amc.acme.act(task_id, TAP)
    amc.acme.act(task_id, {"id": "a2", "action": "screenshot"})
    assert amc.h1.poll(task_id, 1, a["lease_id"])["action"]["id"] == "a1"
    assert amc.h1.poll(task_id, 1, a["lease_id"])["action"]["id"] == "a1"
    amc.h1.report_action(task_id, 1, a["lease_id"], "a2", "completed", expect=409)
    assert problem(amc.h1) == (409, "action_conflict")
    amc.h1.report_action(task_id, 1, a["lease_id"], "a1", "completed")
    assert amc.h1.poll(task_id, 1, a["lease_id"])["action"]["id"] == "a2"


@req("SESSION/s6")
def test_a_cancel_wakes_the_poll_and_ends_the_actions_truthfully(amc):
    task_id, a = session(amc)
    amc.acme.act(task_id, {"id": "long", "action": "shell", "args": {"command": "sleep 60"}})
    amc.acme.act(task_id, TAP)
    assert amc.h1.poll(task_id, 1, a["lease_id"])["action"]["id"] == "long"
    amc.acme.cancel(task_id, expect=202)
    polled = amc.h1.poll(task_id, 1, a["lease_id"])
    assert (polled["action"]["id"], polled["cancel_requested"]) == ("long", True)
    amc.h1.report_action(task_id, 1, a["lease_id"], "long", "interrupted", reason="cancelled while running")
    assert amc.h1.poll(task_id, 1, a["lease_id"]) == {"action": None, "cancel_requested": True, "paused": False}
    amc.h1.report(task_id, 1, a["lease_id"], "cancelled")
    actions = {x["id"]: x for x in amc.acme.actions(task_id)}
    assert actions["long"]["status"] == "interrupted" and actions["a1"]["status"] == "not_started"
    assert amc.acme.task(task_id)["status"] == "cancelled"


@req("SESSION/s7")
def test_a_pause_holds_the_actions_until_resume(amc):
    task_id, a = session(amc)
    paused = amc.acme.post_message(task_id, "pause")
    assert amc.acme.message(task_id, paused["id"])["state"] == "completed"
    assert amc.acme.task(task_id)["paused"] is True
    amc.acme.act(task_id, TAP)
    assert amc.h1.poll(task_id, 1, a["lease_id"], wait=0.3) == {
        "action": None,
        "cancel_requested": False,
        "paused": True,
    }
    poll = in_thread(amc.caller(amc.h1.token, "h1b").poll, task_id, 1, a["lease_id"], wait=10)
    amc.acme.post_message(task_id, "resume")
    poll["thread"].join(10)
    assert poll["answer"]["action"]["id"] == "a1"


@req("SESSION/s8")
def test_ending_a_session_ends_it_done_once_its_actions_ended(amc):
    task_id, a = session(amc)
    amc.acme.act(task_id, TAP)
    amc.h1.poll(task_id, 1, a["lease_id"])
    ending = amc.acme.end(task_id)
    assert ending["status"] == "dispatched" and ending["session"]["end_requested_at"] is not None
    amc.acme.act(task_id, {**TAP, "id": "a2"}, expect=409)
    assert problem(amc.acme) == (409, "session_ended")
    amc.h1.report_action(task_id, 1, a["lease_id"], "a1", "completed")
    task = amc.acme.task(task_id)
    assert (task["status"], task["result"]["reason"], task["attempts"][0]["outcome"]) == (
        "done",
        "session_ended",
        "done",
    )
    assert amc.acme.host("h1")["devices"][0]["reservation"] is None
    amc.h1.poll(task_id, 1, a["lease_id"], expect=409)
    assert problem(amc.h1) == (409, "lease_ended")
    assert amc.acme.end(task_id)["status"] == "done"
    amc.acme.end(amc.acme.submit({"steps": [TAP]})["id"], expect=409)
    assert problem(amc.acme) == (409, "not_a_session")


@req("SESSION/s9")
def test_an_idle_session_is_released_not_failed(amc):
    task_id, _ = session(amc, idle_timeout_seconds=5)
    assert amc.acme.task(task_id)["session"]["idle_expires_at"] == amc.at(5_000)
    amc.admin.advance(5)
    task = amc.acme.task(task_id)
    assert (task["status"], task["result"]["reason"], task["attempts"][0]["outcome"]) == (
        "done",
        "session_idle",
        "done",
    )
    amc.acme.act(task_id, TAP, expect=409)
    assert problem(amc.acme) == (409, "task_terminal")


@req("SESSION/s10", "SESSION/s12")
def test_a_lost_attempt_ends_its_actions_and_the_next_attempt_gets_none(amc):
    task_id, a = session(amc, max_attempts=2)
    amc.acme.act(task_id, TAP)
    amc.acme.act(task_id, {**TAP, "id": "a2"})
    amc.h1.poll(task_id, 1, a["lease_id"])
    amc.admin.advance(30)
    actions = {x["id"]: x for x in amc.acme.actions(task_id)}
    assert actions["a1"]["status"] == "interrupted" and "may have taken effect" in actions["a1"]["reason"]
    assert actions["a2"]["status"] == "not_started" and "not replayed" in actions["a2"]["reason"]
    b = amc.h1.claim("h1", sessions=True)
    amc.h1.start(task_id, 2, b["lease_id"])
    assert amc.h1.poll(task_id, 2, b["lease_id"])["action"] is None
    types = amc.acme.types(task_id)
    assert types.count("action_posted") == 2 and types.count("action_ended") == 2
    assert "action_delivered" in types and "lease_expired" in types
