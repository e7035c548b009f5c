"""Release in the kernel: a host gives an attempt back (specs/requirements/release.md).

Each test drives the pure kernel through `World`, which checks every invariant after every
command and that a rejected command changed nothing; `restart()` proves the log replays.
"""

from __future__ import annotations

import pytest

from amc.core import history, kernel
from amc.core.errors import Code
from amc.core.events import AttemptReleased, MessagesNotAdmitted, TaskEnded, TaskRequeued
from tests.model.world import LEASE_MS, World, code, outcomes

req = pytest.mark.req


def dispatched(world: World, host: str = "h1", **submit) -> tuple[str, kernel.Assignment]:
    """A task running on `host` (registered with one device if new)."""
    if host not in world.state.hosts:
        world.register(host, f"{host}-d1")
    task_id = world.submit(**submit)
    assignment = world.claim(host)
    assert assignment is not None and assignment.task_id == task_id
    assert world.start(assignment).accepted
    return task_id, assignment


@req("RELEASE/s1")
def test_a_release_with_attempts_left_requeues_the_task_at_once():
    world = World()
    task_id, a = dispatched(world, max_attempts=2)
    world.now += 1_000
    seen = len(world.log)
    decision = world.release(a, reason="host_stopping")
    assert decision.accepted and decision.reply == kernel.ReleaseRecorded(task_id, repeated=False)
    task = world.task(task_id)
    attempt = task.attempts[0]
    assert (task.status, task.result) == ("queued", None)
    assert (attempt.outcome, attempt.ended_at, attempt.release_reason) == ("released", world.now, "host_stopping")
    assert world.device("h1", "h1-d1").reservation is None
    assert [type(e) for e in world.log[seen:]] == [AttemptReleased, TaskRequeued]
    released = world.log[seen]
    assert history.history_type(released) == "released"
    assert history.history_data(released) == {"attempt": 1, "reason": "host_stopping"}
    again = world.claim("h1")
    assert again is not None and (again.task_id, again.attempt) == (task_id, 2)
    world.restart()


@req("RELEASE/s2")
def test_a_release_with_a_pending_cancellation_cancels_the_task():
    world = World()
    task_id, a = dispatched(world, max_attempts=3)
    world.cancel(task_id)
    assert world.release(a).accepted
    task = world.task(task_id)
    assert task.status == "cancelled"
    assert (task.result.reason, task.result.attempt) == ("released_with_cancellation", 1)
    assert task.cancellation.state == "completed"
    assert world.claim("h1") is None
    world.restart()


@req("RELEASE/s3")
def test_a_release_of_the_last_allowed_attempt_fails_the_task():
    world = World()
    task_id, a = dispatched(world, max_attempts=1)
    seen = len(world.log)
    assert world.release(a, reason="device_lost").accepted
    task = world.task(task_id)
    assert task.status == "failed" and (task.result.reason, task.result.attempt) == ("attempts_exhausted", 1)
    assert [type(e) for e in world.log[seen:]] == [AttemptReleased, TaskEnded]
    assert world.claim("h1") is None


@req("RELEASE/s3")
def test_released_attempts_count_toward_max_attempts():
    world = World()
    world.register("h1", "d1")
    task_id = world.submit(max_attempts=2)
    first = world.claim("h1")
    assert world.release(first).accepted
    second = world.claim("h1")
    assert second.attempt == 2 and world.release(second).accepted
    assert world.task(task_id).status == "failed"
    assert [a.outcome for a in world.task(task_id).attempts] == ["released", "released"]


@req("RELEASE/s4")
def test_the_identical_release_repeats_after_a_new_claim_and_a_different_one_conflicts():
    world = World()
    _, a = dispatched(world, max_attempts=3)
    steps = outcomes(("open", "completed"), ("look", "interrupted"))
    assert world.release(a, reason="device_lost", steps=steps).accepted
    again = world.claim("h1")
    assert again.attempt == 2
    before = world.state.records_copy()
    seen = len(world.log)
    repeated = world.release(a, reason="device_lost", steps=steps)
    assert repeated.accepted and repeated.reply.repeated and world.state == before and len(world.log) == seen
    assert code(world.release(a, reason="host_stopping", steps=steps)) is Code.result_conflict
    assert code(world.release(a, reason="device_lost")) is Code.result_conflict
    other = outcomes(("open", "completed"), ("look", "completed"))
    assert code(world.release(a, reason="device_lost", steps=other)) is Code.result_conflict
    # the foreign and unknown checks still come first
    world.register("h2", "h2-d1")
    assert code(world.release(a, reason="device_lost", steps=steps, host="h2")) is Code.lease_foreign
    assert code(world.release(a, reason="device_lost", steps=steps, lease_id="forged")) is Code.lease_unknown


@req("RELEASE/s5")
def test_a_result_after_a_release_is_lease_ended_then_lease_replaced():
    world = World()
    task_id, a = dispatched(world, max_attempts=3)
    assert world.release(a).accepted
    for status in ("done", "failed", "cancelled"):
        assert code(world.report(a, status)) is Code.lease_ended
    assert code(world.renew(a)) is Code.lease_ended
    assert code(world.start(a)) is Code.lease_ended
    assert world.claim("h1").attempt == 2
    assert code(world.report(a, "done")) is Code.lease_replaced
    assert code(world.renew(a)) is Code.lease_replaced
    assert world.task(task_id).status == "assigned"


@req("RELEASE/s5")
def test_renew_after_release_is_refused_and_revives_nothing():
    world = World()
    task_id, a = dispatched(world, max_attempts=1)
    assert world.release(a).accepted
    assert code(world.renew(a)) is Code.lease_ended
    assert world.task(task_id).status == "failed"
    assert world.task(task_id).attempts[0].outcome == "released"


@req("RELEASE/s5")
def test_a_release_after_expiry_or_after_a_report_meets_the_lease_checks():
    world = World()
    task_id, a = dispatched(world, max_attempts=3)
    world.advance(LEASE_MS)
    assert code(world.release(a)) is Code.lease_expired
    b = world.claim("h1")
    assert world.report(b, "done").accepted
    assert code(world.release(b)) is Code.lease_ended
    assert code(world.release(a)) is Code.lease_replaced
    missing = kernel.Assignment(task_id, 9, "L", 0, LEASE_MS, "h1-d1", world.task(task_id).plan)
    assert code(world.release(missing, host="h1")) is Code.not_found


@req("RELEASE/s6")
def test_the_steps_of_a_release_are_kept_on_the_attempt_not_as_the_result():
    world = World()
    task_id, a = dispatched(world, max_attempts=3)
    assert code(world.release(a, steps=outcomes(("open", "completed")))) is Code.invalid_request
    assert code(world.release(a, steps=outcomes(("look", "completed"), ("open", "completed")))) is Code.invalid_request
    assert world.task(task_id).active_attempt is not None
    steps = outcomes(("open", "completed"), ("look", "interrupted"))
    assert world.release(a, steps=steps).accepted
    task = world.task(task_id)
    assert task.attempts[0].steps == steps and task.result is None
    b = world.claim("h1")
    assert world.report(b, "done", steps=outcomes(("open", "completed"), ("look", "completed"))).accepted
    task = world.task(task_id)
    assert task.attempts[1].steps is None and task.attempts[0].steps == steps
    world.restart()


@req("RELEASE/s1")
def test_a_release_treats_messages_as_an_expiry_does():
    """What the attempt was given and did not apply is not admitted; a pause it never received
    the server applies itself, so the task comes back held."""
    world = World()
    world.register("h1", "h1-d1")
    task_id = world.submit(max_attempts=3)
    a = world.claim("h1")
    steer = world.post(task_id, "steer", text="use the other account").reply.message_id
    assert world.start(a).accepted  # delivers the steer
    pause = world.post(task_id, "pause").reply.message_id  # not delivered yet
    seen = len(world.log)
    assert world.release(a).accepted
    assert any(isinstance(e, MessagesNotAdmitted) and steer in e.message_ids for e in world.log[seen:])
    task = world.task(task_id)
    assert task.message(steer).state == "not_admitted"
    assert task.message(pause).state == "completed" and task.held
    assert world.claim("h1") is None
    world.restart()
