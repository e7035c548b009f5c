"""Sessions in the kernel (specs/protocol.md Part D, specs/requirements/sessions.md).

Each test drives the pure kernel through `World`, which checks every invariant (I13 for
sessions) after every command and that a rejected command changed nothing; `restart()`
proves the log replays and the records rebuild the indexes, idle deadlines included.
"""

from __future__ import annotations

import pytest

from amc.core import history, kernel
from amc.core.commands import PollAction
from amc.core.errors import Code
from amc.core.events import ActionDelivered, ActionEnded, ActionPosted, SessionEndRequested, TaskEnded
from tests.model.world import LEASE_MS, World, code

req = pytest.mark.req


def running_session(world: World, host: str = "h1", idle_ms: int = 300_000, **submit) -> tuple[str, kernel.Assignment]:
    """A session dispatched on `host` (registered with one device if new)."""
    if host not in world.state.hosts:
        world.register(host, f"{host}-d1")
    task_id = world.submit_session(idle_ms=idle_ms, **submit)
    assignment = world.claim(host, sessions=True)
    assert assignment is not None and assignment.task_id == task_id
    assert world.start(assignment).accepted
    return task_id, assignment


def polled(world: World, a: kernel.Assignment) -> kernel.PollAnswer:
    decision = world.poll(a)
    assert decision.accepted, decision.rejection
    return decision.reply


@req("SESSION/s1")
def test_a_session_is_a_queued_task_without_steps():
    world = World()
    task_id = world.submit_session(idle_ms=5_000)
    task = world.task(task_id)
    assert (task.status, task.plan.steps, task.session.idle_ms, task.session.actions) == ("queued", (), 5_000, ())
    world.restart()


@req("SESSION/s2")
def test_only_a_claim_that_runs_sessions_gets_one():
    world = World()
    world.register("h1", "d1")
    task_id = world.submit_session()
    assert world.claim("h1") is None
    assert world.task(task_id).status == "queued"
    assignment = world.claim("h1", sessions=True)
    assert assignment is not None and (assignment.task_id, assignment.idle_ms) == (task_id, 300_000)
    world.restart()


@req("SESSION/s2")
def test_a_claim_that_runs_sessions_takes_the_better_task_of_both_kinds():
    world = World()
    world.register("h1", "d1", "d2")
    plan_id = world.submit()
    session_id = world.submit_session(priority=5)
    assert world.claim("h1", sessions=True).task_id == session_id
    assert world.claim("h1", sessions=True).task_id == plan_id


@req("SESSION/s3")
def test_posting_an_action_is_safe_to_retry_and_refused_where_it_cannot_run():
    world = World()
    task_id = world.submit_session()
    posted = world.act(task_id, "a1", x=5, y=6)
    assert posted.reply == kernel.ActionAccepted(task_id, "a1", created=True)
    action = world.action(task_id, "a1")
    assert (action.seq, action.status, action.attempt) == (1, "queued", None)
    assert world.act(task_id, "a1", x=5, y=6).reply == kernel.ActionAccepted(task_id, "a1", created=False)
    assert code(world.act(task_id, "a1", x=7, y=6)) == Code.action_conflict
    assert code(world.act(world.submit(), "a1")) == Code.not_a_session
    assert code(world.act(task_id, "a2", tenant="other")) == Code.not_found
    assert len(world.task(task_id).session.actions) == 1
    world.restart()


@req("SESSION/s4")
def test_the_host_gets_actions_in_order_one_at_a_time():
    world = World()
    task_id, a = running_session(world)
    assert polled(world, a) == kernel.PollAnswer(task_id, None)
    world.act(task_id, "a1")
    world.act(task_id, "a2")
    assert polled(world, a).action_id == "a1"
    assert (world.action(task_id, "a1").status, world.action(task_id, "a1").attempt) == ("delivered", 1)
    assert polled(world, a).action_id == "a1"  # again, until its outcome is in
    assert world.action(task_id, "a2").status == "queued"
    assert world.outcome(a, "a1").accepted
    assert polled(world, a).action_id == "a2"
    assert code(world.poll(a, host="h2")) == Code.lease_foreign
    assert code(world.poll(a, lease_id="nope")) == Code.lease_unknown
    world.restart()


@req("SESSION/s5")
def test_an_outcome_is_recorded_once_with_its_own_artifacts():
    world = World()
    task_id, a = running_session(world)
    world.act(task_id, "a1", action="screenshot")
    world.act(task_id, "a2")
    polled(world, a)
    assert code(world.outcome(a, "a2")) == Code.action_conflict  # not delivered yet
    stored = world.store(a, name="a1-screenshot.png", step="a1")
    artifact_id = stored.reply.artifact.id
    assert code(world.store(a, name="x.png", step="a2")) == Code.invalid_request  # not given to the attempt
    assert code(world.outcome(a, "a1", "failed")) == Code.invalid_request  # a failure says why
    world.now += 10
    assert world.outcome(a, "a1", artifacts=(artifact_id,), output="ok").reply == kernel.ActionRecorded(
        task_id, "a1", repeated=False
    )
    action = world.action(task_id, "a1")
    assert (action.status, action.artifacts, action.output, action.ended_at) == (
        "completed",
        (artifact_id,),
        "ok",
        world.now,
    )
    again = world.outcome(a, "a1", artifacts=(artifact_id,), output="ok")
    assert again.reply == kernel.ActionRecorded(task_id, "a1", repeated=True)
    assert code(world.outcome(a, "a1", "failed", reason="no")) == Code.result_conflict
    world.restart()


@req("SESSION/s6")
def test_a_cancel_interrupts_the_running_action_and_ends_the_queued_ones():
    world = World()
    task_id, a = running_session(world)
    world.act(task_id, "long", action="shell", command="sleep 60")
    world.act(task_id, "next")
    assert polled(world, a).action_id == "long"
    world.cancel(task_id)
    answer = polled(world, a)
    assert (answer.action_id, answer.cancel_requested) == ("long", True)  # the running one is still its
    assert world.outcome(a, "long", "interrupted", reason="cancelled while running").accepted
    answer = polled(world, a)
    assert (answer.action_id, answer.cancel_requested) == (None, True)
    assert world.action(task_id, "next").status == "queued"  # never delivered once a cancel is pending
    assert world.report(a, "cancelled").accepted
    task = world.task(task_id)
    assert task.status == "cancelled"
    assert world.action(task_id, "long").status == "interrupted"
    assert (world.action(task_id, "next").status, world.action(task_id, "next").reason) == ("not_started", "cancelled")
    world.restart()


@req("SESSION/s6")
def test_a_result_while_an_action_is_delivered_says_it_may_have_taken_effect():
    world = World()
    task_id, a = running_session(world)
    world.act(task_id, "a1")
    polled(world, a)
    world.cancel(task_id)
    assert world.report(a, "cancelled").accepted
    action = world.action(task_id, "a1")
    assert action.status == "interrupted" and "may have taken effect" in action.reason


@req("SESSION/s7")
def test_a_pause_delivers_no_action_until_resume():
    world = World()
    task_id, a = running_session(world)
    world.act(task_id, "a1")
    assert polled(world, a).action_id == "a1"
    paused = world.post(task_id, "pause")
    message = world.task(task_id).message(paused.reply.message_id)
    assert (message.state, world.task(task_id).paused) == ("completed", True)
    assert polled(world, a).action_id == "a1"  # the running one ends on its own terms
    world.outcome(a, "a1")
    world.act(task_id, "a2")
    assert polled(world, a) == kernel.PollAnswer(task_id, None, paused=True)
    assert world.action(task_id, "a2").status == "queued"
    world.post(task_id, "resume")
    assert polled(world, a).action_id == "a2"
    assert code(world.post(task_id, "steer", text="go left")) == Code.invalid_request
    world.restart()


@req("SESSION/s8")
def test_ending_a_session_waits_for_its_actions_then_ends_it_done():
    world = World()
    task_id, a = running_session(world)
    world.act(task_id, "a1")
    polled(world, a)
    assert world.end(task_id).accepted
    assert world.task(task_id).status == "dispatched"
    assert code(world.act(task_id, "a2")) == Code.session_ended
    world.outcome(a, "a1")
    task = world.task(task_id)
    assert (task.status, task.result.reason, task.attempts[0].outcome) == ("done", "session_ended", "done")
    assert world.device("h1", "h1-d1").reservation is None
    assert code(world.poll(a)) == Code.lease_ended
    assert world.end(task_id).accepted  # already ended: as it stands
    assert code(world.end(world.submit())) == Code.not_a_session
    world.restart()


@req("SESSION/s8")
def test_ending_a_queued_session_ends_it_at_once():
    world = World()
    task_id = world.submit_session()
    world.act(task_id, "a1")
    world.end(task_id)
    task = world.task(task_id)
    assert (task.status, task.result.reason, task.attempts) == ("done", "session_ended", ())
    assert world.action(task_id, "a1").status == "not_started"


@req("SESSION/s9")
def test_an_idle_session_is_released_not_failed():
    world = World()
    task_id, a = running_session(world, idle_ms=5_000)
    assert world.task(task_id).idle_expires_at == world.now + 5_000
    world.now += 3_000
    world.act(task_id, "a1")
    assert world.task(task_id).idle_expires_at is None  # busy
    polled(world, a)
    world.renew(a)
    world.outcome(a, "a1")
    ended_at = world.now
    assert world.task(task_id).idle_expires_at == ended_at + 5_000
    world.restart()  # the idle deadline is rebuilt from the records
    world.advance(4_999)
    assert world.task(task_id).status == "dispatched"
    world.advance(1)
    task = world.task(task_id)
    assert (task.status, task.result.reason, task.attempts[0].outcome) == ("done", "session_idle", "done")
    assert task.attempts[0].ended_at == ended_at + 5_000
    assert world.device("h1", "h1-d1").reservation is None
    assert code(world.act(task_id, "a2")) == Code.task_terminal
    world.restart()


@req("SESSION/s9")
def test_a_lease_expiring_with_the_idle_deadline_expires_first():
    world = World()
    task_id, _ = running_session(world, idle_ms=LEASE_MS, max_attempts=2)
    world.advance(LEASE_MS)
    task = world.task(task_id)
    assert (task.status, task.attempts[0].outcome) == ("queued", "expired")


@req("SESSION/s10")
def test_a_lost_attempt_ends_its_actions_and_a_new_attempt_never_replays_them():
    world = World()
    task_id, a = running_session(world, max_attempts=2)
    world.act(task_id, "a1")
    world.act(task_id, "a2")
    polled(world, a)
    world.advance(LEASE_MS)
    task = world.task(task_id)
    assert task.status == "queued"
    a1, a2 = world.action(task_id, "a1"), world.action(task_id, "a2")
    assert a1.status == "interrupted" and "may have taken effect" in a1.reason
    assert a2.status == "not_started" and "not replayed" in a2.reason
    b = world.claim("h1", sessions=True)
    world.start(b)
    assert polled(world, b) == kernel.PollAnswer(task_id, None)
    world.act(task_id, "a3")
    assert polled(world, b).action_id == "a3"
    assert code(world.outcome(a, "a1")) == Code.result_conflict  # the stale host cannot rewrite it
    world.restart()


@req("SESSION/s10")
def test_a_release_ends_the_actions_as_lost_too():
    world = World()
    task_id, a = running_session(world, max_attempts=1)
    world.act(task_id, "a1")
    polled(world, a)
    world.release(a, reason="device_lost")
    task = world.task(task_id)
    assert (task.status, task.result.reason) == ("failed", "attempts_exhausted")
    assert world.action(task_id, "a1").status == "interrupted"


@req("SESSION/s12")
def test_history_shows_every_action():
    world = World()
    task_id, a = running_session(world)
    seen = len(world.log)
    world.act(task_id, "a1")
    polled(world, a)
    world.outcome(a, "a1")
    world.end(task_id)
    events = [e for e in world.log[seen:] if history.history_type(e)]
    assert [type(e) for e in events] == [ActionPosted, ActionDelivered, ActionEnded, SessionEndRequested, TaskEnded]
    assert [history.history_type(e) for e in events][:4] == [
        "action_posted",
        "action_delivered",
        "action_ended",
        "session_end_requested",
    ]
    assert history.history_data(events[2]) == {"attempt": 1, "action_id": "a1", "status": "completed", "reason": None}
    assert history.history_data(events[4])["reason"] == "session_ended"


@req("SESSION/s4", "SESSION/s6")
def test_a_poll_naming_its_running_action_answers_only_a_cancel():
    world = World()
    task_id, a = running_session(world)
    world.act(task_id, "a1")
    world.act(task_id, "a2")
    assert polled(world, a).action_id == "a1"
    running = world.run(PollAction(now=0, host_id="h1", task_id=task_id, attempt=1, lease_id=a.lease_id, running="a1"))
    assert running.reply == kernel.PollAnswer(task_id, None)  # not a1 again, and not a2 before a1 ended
    world.cancel(task_id)
    running = world.run(PollAction(now=0, host_id="h1", task_id=task_id, attempt=1, lease_id=a.lease_id, running="a1"))
    assert running.reply == kernel.PollAnswer(task_id, None, cancel_requested=True)
    assert world.task(task_id).cancellation.delivered_at == world.now
