"""Pause and resume, specs/protocol.md Part B: PAUSE (specs/requirements/steering.md).

A pause to a queued task is applied by the server at once: the task is held (`held: true`)
and no claim returns it until a resume. A pause to a task in flight is carried to its host,
and the task reads `paused: true` only once the host admits it at a step boundary, until it
admits a resume. The test plays the host and checks what the server records: the task's
status and lease while paused, that claims skip a held task, and that renewals, repeated
acknowledgements, an expiry and (where the target can be restarted) a restart do not lift a
pause.
"""

from __future__ import annotations

import time

import pytest

from amc.conformance.client import PLAN_ABC, ids, ms, ran


def keep_renewing(host, lease, clock, periods: int) -> list[dict]:
    """Renew `lease` twice per lease period for `periods` periods, as a paused agent does."""
    answers = []
    for _ in range(2 * periods):
        if clock.manual:
            clock.advance(lease.lease_seconds / 2)
        else:
            time.sleep(lease.lease_seconds / 2)
        answers.append(host.renew(lease))
    return answers


def paused_in_flight(scene):
    """Given X dispatched on h1 with steps a, b, c, paused before b (the pause admitted)."""
    acme, h1, clock = scene.acme, scene.h1, scene.clock
    task, lease = scene.running(h1, plan=PLAN_ABC, max_attempts=2, lease_seconds=clock.short_lease)
    pause = acme.post_message(task["id"], "pause")
    assert ids(h1.renew(lease)["messages"]) == [pause["id"]]
    h1.admit(lease, pause["id"], "b")
    assert acme.get_task(task["id"])["paused"] is True
    return task["id"], lease, pause


@pytest.mark.req("PAUSE/s1")
def test_a_paused_attempt_admits_no_new_step_but_keeps_its_lease(scene):
    """A pause reaches h1 while a runs and is admitted before b: X stays dispatched, paused, its lease renewed."""
    acme, h1, clock = scene.acme, scene.h1, scene.clock
    # Given X dispatched on h1 with steps a, b, c, and a running
    task, lease = scene.running(h1, plan=PLAN_ABC, lease_seconds=clock.short_lease)
    x = task["id"]

    # When a pause is posted and reaches h1 in a renewal
    pause = acme.post_message(x, "pause", expect=201)
    assert (pause["intent"], pause["state"]) == ("pause", "queued")
    assert ids(h1.renew(lease)["messages"]) == [pause["id"]]
    # (delivered is not applied: X is not paused before h1 admits it)
    assert acme.get_task(x)["paused"] is False

    # Then, a having ended on its own terms, h1 admits it before b
    admitted = h1.admit(lease, pause["id"], "b")
    assert (admitted["state"], admitted["boundary"]) == ("admitted", {"before_step": "b"})
    # And X reads dispatched with paused: true
    paused = acme.get_task(x)
    assert (paused["status"], paused["paused"], paused["held"]) == ("dispatched", True, False)
    # And h1 keeps renewing, so the lease stays live over many lease periods, and X stays paused
    granted = lease.expires_ms
    for renewal in keep_renewing(h1, lease, clock, periods=3):
        assert (renewal["status"], renewal["cancel_requested"], renewal["messages"]) == ("dispatched", False, [])
    after = acme.get_task(x)
    assert (after["status"], after["paused"], after["attempt"]) == ("dispatched", True, 1)
    assert after["attempts"][0]["outcome"] is None
    assert after["attempts"][0]["renewals"] == paused["attempts"][0]["renewals"] + 6
    assert ms(after["attempts"][0]["lease_expires_at"]) > granted + 2 * lease.lease_seconds * 1000


@pytest.mark.req("PAUSE/s2")
def test_a_paused_queued_task_is_held_and_never_claimed_until_resumed(scene):
    """pause on queued X: held, claims 204; resume: released, and X is claimed ahead of a later equal task."""
    acme, h1 = scene.acme, scene.h1
    # Given X queued, and h1 with a matching free device
    h1.register(scene.device("emulator-5554"))
    x = scene.submit(plan=PLAN_ABC)["id"]

    # When a client posts a pause to X
    pause = acme.post_message(x, "pause", expect=201)

    # Then the server applies it at once: X reads held, and h1's claims answer 204
    assert pause == acme.get_message(x, pause["id"])
    assert pause["state"] == "completed" and pause["detail"]
    assert pause["delivered_at"] is None and pause["attempt"] is None
    held = acme.get_task(x)
    assert (held["status"], held["held"]) == ("queued", True)
    h1.claim(expect=204)
    h1.claim(expect=204)
    # (while a task of equal priority is submitted after X)
    later = scene.submit(plan=PLAN_ABC)["id"]

    # And after a resume, X is no longer held, and h1's next claim is X, ahead of the later task
    resume = acme.post_message(x, "resume", expect=201)
    assert resume["state"] == "completed" and resume["detail"]
    released = acme.get_task(x)
    assert (released["status"], released["held"]) == ("queued", False)
    assert h1.claim().task_id == x
    assert acme.get_task(later)["status"] == "queued"


@pytest.mark.req("PAUSE/s3")
def test_a_pause_stays_in_force_until_its_resume_is_admitted(scene):
    """Renewals and a repeated acknowledgement leave X paused; a resume lifts it only once admitted."""
    acme, h1, clock = scene.acme, scene.h1, scene.clock
    # Given X paused in flight before b
    x, lease, pause = paused_in_flight(scene)

    # When h1 renews many times, and repeats its acknowledgement of the pause
    for renewal in keep_renewing(h1, lease, clock, periods=2):
        assert renewal["messages"] == []
        assert acme.get_task(x)["paused"] is True
    h1.admit(lease, pause["id"], "b")

    # Then X still reads paused
    assert acme.get_task(x)["paused"] is True
    # And a resume lifts it only once h1 admits it: not when posted, not when delivered
    resume = acme.post_message(x, "resume", expect=201)
    assert (resume["state"], acme.get_task(x)["paused"]) == ("queued", True)
    assert ids(h1.renew(lease)["messages"]) == [resume["id"]]
    assert acme.get_task(x)["paused"] is True
    h1.admit(lease, resume["id"], "b")
    resumed = acme.get_task(x)
    assert (resumed["status"], resumed["paused"]) == ("dispatched", False)
    # And b and c run after it
    steps = ran("a", "b", "c")
    assert h1.report(lease, "done", steps=steps)["result"]["steps"] == steps


@pytest.mark.req("PAUSE/s3")
def test_a_pause_survives_a_restart(scene):
    """After the server is killed and restarted, X still reads paused, and a resume still lifts it."""
    if not scene.target.can_restart:
        pytest.skip("restarting the target needs --restart-command CMD (or the suite's own server)")
    acme, h1 = scene.acme, scene.h1
    # Given X paused in flight before b
    x, lease, _pause = paused_in_flight(scene)
    before = acme.get_task(x)

    # When the server process is killed and restarted
    scene.target.restart()

    # Then X reads as before, paused, and the pause is not handed out again
    assert acme.get_task(x) == before
    assert h1.renew(lease)["messages"] == []
    assert acme.get_task(x)["paused"] is True
    # And only an admitted resume lifts it
    resume = acme.post_message(x, "resume")
    h1.renew(lease)
    h1.admit(lease, resume["id"], "b")
    assert acme.get_task(x)["paused"] is False


@pytest.mark.req("PAUSE")
def test_a_task_whose_attempt_expires_while_paused_comes_back_held(scene):
    """X's lease runs out while paused: X is requeued held, not claimed until a resume."""
    acme, h1, h2, clock = scene.acme, scene.h1, scene.h2, scene.clock
    # Given X (max_attempts 2) paused in flight on h1, and h2 with a matching free device
    x, lease, _ = paused_in_flight(scene)
    h2.register(scene.device("emulator-5570"))

    # When its lease runs out
    clock.run_out(lease)

    # Then X is queued and held, and no claim returns it
    requeued = acme.get_task(x)
    assert (requeued["status"], requeued["held"]) == ("queued", True)
    h1.claim(expect=204)
    h2.claim(expect=204)
    # And after a resume, the next claim is its attempt 2
    acme.post_message(x, "resume", expect=201)
    assert acme.get_task(x)["held"] is False
    lease2 = h2.claim()
    assert (lease2.task_id, lease2.attempt) == (x, 2)


@pytest.mark.req("PAUSE")
def test_a_cancel_still_works_on_a_paused_or_held_task(scene):
    """A held task is cancelled at once; a paused task in flight gets its cancellation at the next renewal."""
    acme, h1 = scene.acme, scene.h1
    # Given Y queued and held, and X paused in flight on h1
    x, lease, _ = paused_in_flight(scene)
    y = scene.submit(plan=PLAN_ABC)["id"]
    acme.post_message(y, "pause")
    assert acme.get_task(y)["held"] is True

    # When its client cancels each
    assert acme.cancel(y, expect=200)["status"] == "cancelled"
    assert acme.cancel(x, expect=202)["cancellation"]["state"] == "pending"

    # Then X's host is told at its next renewal, and its cancelled report ends X
    assert h1.renew(lease)["cancel_requested"] is True
    ended = h1.report(lease, "cancelled")
    assert (ended["status"], ended["cancellation"]["state"]) == ("cancelled", "completed")
