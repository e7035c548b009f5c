"""What the server knows of the moment, specs/protocol.md "v1.1 additions to Part A":
PROGRESS, LIVENESS and WAITING (specs/requirements/protocol-rules.md).

None of it is history. Progress is what a host last sent with a start or renewal; liveness
is when each host last made an authenticated request; `waiting` says why a queued task
waits, computed when it is read. The test plays the hosts, so a host is silent exactly when
the test stops calling with its token.

A silent host reads offline once the target's host timeout has passed. With a manual clock
the scenario moves the clock there; in real time it waits, if the timeout is short
(`--host-timeout`, default the protocol's 60 s: then the scenario is skipped with that reason).
"""

from __future__ import annotations

import time

import pytest

from amc.conformance.client import PLAN_ABC, wire

REAL_TIME_WAIT_LIMIT = 10.0  # seconds: the longest host timeout the suite waits out in real time


def attempt_progress(scene, task_id: str) -> dict | None:
    return scene.task(task_id)["attempts"][-1]["progress"]


# ---------------------------------------------------------------------------------------
# PROGRESS


@pytest.mark.req("PROGRESS/s1")
def test_progress_sent_with_a_start_or_renewal_shows_on_the_attempt_and_is_no_history(scene):
    """progress is null until a host sends one, then reads as sent; it records no event."""
    acme, h1 = scene.acme, scene.h1
    # Given X assigned to h1 (not started)
    task, lease = scene.running(h1, start=False, plan=PLAN_ABC)
    x = task["id"]
    assert attempt_progress(scene, x) is None
    # When h1 starts it with progress on a, then renews with a ended and nothing running
    h1.start(lease, progress={"step": "a", "ended": 0})
    assert attempt_progress(scene, x) == {"step": "a", "ended": 0}
    events = acme.event_types(x)
    h1.renew(lease, progress={"step": None, "ended": 1})
    # Then the attempt reads the latest progress, and the history gained nothing
    assert attempt_progress(scene, x) == {"step": None, "ended": 1}
    assert acme.event_types(x) == events
    # And a renewal without progress leaves the latest one standing
    h1.renew(lease)
    assert attempt_progress(scene, x) == {"step": None, "ended": 1}
    assert acme.list_tasks(status="dispatched", limit=1000)["tasks"][-1]["attempts"][0]["progress"] is not None


@pytest.mark.req("PROGRESS/s2")
def test_progress_on_a_step_of_no_plan_is_refused(scene):
    """A step that is neither planned nor inserted by a steer is 400 naming it; a steer's step is fine."""
    acme, h1 = scene.acme, scene.h1
    # Given X dispatched on h1 with steps a, b, c, and a steer inserting x after a, delivered
    task, lease = scene.running(h1, plan=PLAN_ABC)
    x = task["id"]
    h1.renew(lease, progress={"step": "a", "ended": 0})
    steer = acme.post_message(
        x, "steer", data={"insert_after": "a", "steps": [{"id": "x", "action": "screenshot", "args": {}}]}
    )
    h1.renew(lease)
    before = scene.task(x)
    # When h1 renews with progress on nosuch, or with a negative count
    problem = h1.renew(lease, progress={"step": "nosuch", "ended": 1}, expect=(400, "invalid_request"))
    h1.renew(lease, progress={"step": "a", "ended": -1}, expect=(400, "invalid_request"))
    h1.renew(lease, progress={"step": "a"}, expect=(400, "invalid_request"))
    # Then the detail names the step, and nothing changed
    assert "nosuch" in problem["detail"]
    assert scene.task(x) == before
    # And progress on x, the step the steer inserts, is taken before and after its admission
    h1.renew(lease, progress={"step": "x", "ended": 1})
    h1.admit(lease, steer["id"], "b")
    h1.renew(lease, progress={"step": "x", "ended": 1})
    assert attempt_progress(scene, x) == {"step": "x", "ended": 1}


# ---------------------------------------------------------------------------------------
# LIVENESS


@pytest.mark.req("LIVENESS/s1")
def test_a_host_reads_when_it_was_last_seen_and_online(scene):
    """Every authenticated request of a host's token moves its last_seen_at; others' reads do not."""
    acme, h1, clock = scene.acme, scene.h1, scene.clock
    # Given h1 registers a device
    host = h1.register(scene.device("emulator-5554"))
    # Then h1 reads online, seen at the registration, and its device online
    assert host["online"] is True and host["last_seen_at"] is not None
    if clock.manual:
        assert host["last_seen_at"] == wire(clock.now())
    assert [d["online"] for d in scene.mine(host)] == [True]
    # And a client's read shows the same, and moves nothing
    seen = acme.get_host(h1.id)
    assert (seen["online"], seen["last_seen_at"]) == (True, host["last_seen_at"])
    listed = {h["id"]: h for h in acme.list_hosts()["hosts"]}
    assert listed[h1.id]["last_seen_at"] == host["last_seen_at"]
    # When time passes and h1 claims (204: nothing for it)
    clock.advance(1)
    h1.claim(expect=204)
    # Then that request counts too
    later = acme.get_host(h1.id)
    assert later["online"] is True and later["last_seen_at"] > host["last_seen_at"]
    if clock.manual:
        assert later["last_seen_at"] == wire(clock.now())


@pytest.mark.req("LIVENESS/s2", "WAITING/s4")
def test_a_silent_host_reads_offline_with_its_devices_until_it_calls_again(scene):
    """Past the host timeout a host and its devices read offline, and a task only they match waits offline."""
    acme, h2, clock, target = scene.acme, scene.h2, scene.clock, scene.target
    timeout = target.host_timeout
    if not clock.manual and timeout > REAL_TIME_WAIT_LIMIT:
        pytest.skip(
            f"the target's host timeout is {timeout:g} s (give --host-timeout if it is shorter): too long to wait "
            f"out in real time; a manual clock or a host timeout of at most {REAL_TIME_WAIT_LIMIT:g} s runs this"
        )
    # Given h2 registered a device, and a task only that device matches
    host = h2.register(scene.device("emulator-5554"))
    task = scene.submit(serial="emulator-5554")
    assert acme.get_task(task["id"])["waiting"] == {"reason": "ready", "matching_devices": 1}
    # When h2 makes no request for the host timeout
    if clock.manual:
        clock.advance_to(clock.now() + round(timeout * 1000) - 1)
        assert acme.get_host(h2.id)["online"] is True  # a millisecond before, still online
        clock.advance(0.001)
    else:
        time.sleep(timeout + 0.5)
    # Then h2 reads offline, seen when it registered, with its device offline
    silent = acme.get_host(h2.id)
    assert (silent["online"], silent["last_seen_at"]) == (False, host["last_seen_at"])
    assert [d["online"] for d in scene.mine(silent)] == [False]
    # And the task waits for a device that is offline
    assert acme.get_task(task["id"])["waiting"] == {"reason": "matching_devices_offline", "matching_devices": 1}
    # When h2 calls again (here, reading itself), it is online, and the task ready
    back = h2.read()
    assert back["online"] is True and [d["online"] for d in scene.mine(back)] == [True]
    assert acme.get_task(task["id"])["waiting"] == {"reason": "ready", "matching_devices": 1}


# ---------------------------------------------------------------------------------------
# WAITING


@pytest.mark.req("WAITING/s1")
def test_a_task_that_is_not_queued_waits_for_nothing_and_one_an_idle_device_matches_is_ready(scene):
    """waiting is null unless queued; ready when an online idle device matches (in reads and listings)."""
    acme, h1 = scene.acme, scene.h1
    # Given h1 with two devices of model M, and a task requiring M
    h1.register(scene.device("emulator-5554", model="M"), scene.device("emulator-5556", model="M"))
    task = scene.submit(attributes={"model": "M"})
    # Then it is ready, with two matching devices, read or listed
    ready = {"reason": "ready", "matching_devices": 2}
    assert task["waiting"] == ready and acme.get_task(task["id"])["waiting"] == ready
    listed = [t for t in acme.all_tasks("queued") if t["id"] == task["id"]]
    assert [t["waiting"] for t in listed] == [ready]
    # When h1 claims it, then starts, then reports
    lease = h1.claim()
    assert lease is not None and lease.task_id == task["id"]
    assert acme.get_task(task["id"])["waiting"] is None
    h1.start(lease)
    assert acme.get_task(task["id"])["waiting"] is None
    h1.report(lease, "done")
    assert acme.get_task(task["id"])["waiting"] is None


@pytest.mark.req("WAITING/s2")
def test_a_held_task_waits_held(scene):
    """A task paused while queued waits held, whatever its devices."""
    acme, h1 = scene.acme, scene.h1
    h1.register(scene.device("emulator-5554"))
    task = scene.submit()
    acme.post_message(task["id"], "pause")
    assert acme.get_task(task["id"])["waiting"] == {"reason": "held", "matching_devices": 1}
    acme.post_message(task["id"], "resume")
    assert acme.get_task(task["id"])["waiting"] == {"reason": "ready", "matching_devices": 1}


@pytest.mark.req("WAITING/s3")
def test_a_task_no_registered_device_matches(scene):
    """A task pinned to a serial no host lists, or an attribute no device has, matches no device."""
    acme, h1 = scene.acme, scene.h1
    h1.register(scene.device("emulator-5554", model="M"))
    pinned = scene.submit(serial="no-such-phone")
    other = scene.submit(attributes={"model": "N"})
    for task in (pinned, other):
        assert acme.get_task(task["id"])["waiting"] == {"reason": "no_device_matches", "matching_devices": 0}


@pytest.mark.req("WAITING/s5")
def test_a_task_whose_online_matching_devices_are_all_reserved_waits_busy(scene):
    """Online matching devices, all reserved: busy; when one frees up, ready."""
    acme, h1 = scene.acme, scene.h1
    # Given h1's only device runs X, and Y needs the same device
    _x, lease = scene.running(h1)
    y = scene.submit()
    # Then Y waits busy
    assert acme.get_task(y["id"])["waiting"] == {"reason": "matching_devices_busy", "matching_devices": 1}
    # And once X is done, Y is ready
    h1.report(lease, "done")
    assert acme.get_task(y["id"])["waiting"] == {"reason": "ready", "matching_devices": 1}
