"""Time without requests: long-poll claims wake as soon as work appears, and the expiry
timer expires leases when nobody calls. These run on the system clock, in real time."""

from __future__ import annotations

import threading
import time

import pytest

from tests.support.http import problem
from tests.support.waiting import eventually


def in_background(function, *args, **kwargs):
    """Run `function` in a thread; returns (thread, result dict with "value" and "seconds")."""
    result = {}

    def run():
        started = time.monotonic()
        result["value"] = function(*args, **kwargs)
        result["seconds"] = time.monotonic() - started

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, result


def claims(amc) -> float:
    """How many claims the server has executed so far."""
    return amc.app.state.context.metrics.commands.labels("claim_task", "accepted")._value.get()


def claim_in_background(amc, caller, host_id: str, **body):
    """Start a long-polling claim and return once it is waiting (it has tried once and found nothing)."""
    before = claims(amc)  # read before the claim starts: it may be quicker than this thread
    thread, result = in_background(caller.claim, host_id, **body)
    eventually(lambda: claims(amc) != before, timeout=5, interval=0.005, what="the claim reaching the server")
    time.sleep(0.02)
    return thread, result


@pytest.mark.req("CLAIM/s4")
def test_a_waiting_claim_answers_204_after_wait_seconds(make_amc):
    amc = make_amc(clock="system")
    amc.h1.register("h1", [{"serial": "R58M", "attributes": {"model": "Galaxy S21"}}])
    amc.acme.submit(requirements={"attributes": {"model": "Pixel 7"}})
    started = time.monotonic()
    amc.h1.claim("h1", wait_seconds=0.5, expect=204)
    assert 0.45 <= time.monotonic() - started < 2


@pytest.mark.req("CLAIM/s4")
@pytest.mark.parametrize("clock", ["system", "manual"])
def test_a_waiting_claim_wakes_when_a_matching_task_is_submitted(make_amc, clock):
    amc = make_amc(clock=clock)
    amc.h1.register("h1", [{"serial": "R58M", "attributes": {"model": "Galaxy S21"}}])
    amc.acme.submit(requirements={"attributes": {"model": "Pixel 7"}})
    h1 = amc.caller("tok-host-h1-00000000000000", "h1")  # its own connection
    thread, result = claim_in_background(amc, h1, "h1", wait_seconds=10)
    amc.acme.submit(requirements={"attributes": {"model": "Pixel 7"}})  # does not match: keeps waiting
    time.sleep(0.1)
    assert thread.is_alive()

    task = amc.acme.submit(requirements={"attributes": {"model": "Galaxy S21"}})
    thread.join(5)

    assert result["value"]["task_id"] == task["id"]
    assert result["seconds"] < 2


def test_a_waiting_claim_wakes_when_a_device_appears(make_amc):
    amc = make_amc(clock="system")
    task = amc.acme.submit()
    h1 = amc.caller("tok-host-h1-00000000000000", "h1")
    thread, result = claim_in_background(amc, h1, "h1", wait_seconds=10)
    amc.h1.register("h1", ["emulator-5554"])
    thread.join(5)
    assert result["value"]["task_id"] == task["id"] and result["seconds"] < 2


def test_a_waiting_claim_wakes_when_a_device_is_released(make_amc):
    amc = make_amc(clock="system")
    first, lease = amc.claimed(start=True)
    second = amc.acme.submit()
    h1 = amc.caller("tok-host-h1-00000000000000", "h1")
    thread, result = claim_in_background(amc, h1, "h1", wait_seconds=10)
    amc.h1.report(first, 1, lease["lease_id"], "done")
    thread.join(5)
    assert result["value"]["task_id"] == second["id"] and result["seconds"] < 2


@pytest.mark.req("ATTEMPTS/s1")
@pytest.mark.req("EXPIRY/s2")
def test_the_timer_expires_leases_when_nobody_calls(make_amc):
    amc = make_amc(clock="system", min_lease_seconds=0.1)
    task_id, _lease = amc.claimed(lease_seconds=0.3, max_attempts=2)
    expires = amc.service.task(task_id).attempts[0].lease_expires_at

    time.sleep(0.6)  # no request reaches the server meanwhile

    # Read the service directly: an HTTP read would apply the expiry itself.
    task = amc.service.task(task_id)
    assert task.status == "queued"
    assert task.attempts[0].outcome == "expired" and task.attempts[0].ended_at == expires
    assert amc.service.host("h1").devices[0].reservation is None
    assert amc.app.state.context.metrics.commands.labels("expire_leases", "accepted")._value.get() >= 1


def test_a_waiting_claim_gets_a_task_requeued_by_the_timer(make_amc):
    amc = make_amc(clock="system", min_lease_seconds=0.1)
    task_id, _ = amc.claimed(lease_seconds=0.3)
    amc.h2.register("h2", ["e1"])

    claimed = amc.h2.claim("h2", wait_seconds=5)  # nothing else calls the server meanwhile

    assert claimed["task_id"] == task_id and claimed["attempt"] == 2


def test_the_timer_rearms_for_an_earlier_lease(make_amc):
    amc = make_amc(clock="system", min_lease_seconds=0.1)
    amc.h1.register("h1", ["d1", "d2"])
    late = amc.acme.submit()["id"]
    early = amc.acme.submit()["id"]
    assert amc.h1.claim("h1", lease_seconds=60)["task_id"] == late
    assert amc.h1.claim("h1", lease_seconds=0.2)["task_id"] == early
    time.sleep(0.5)
    assert amc.service.task(early).status == "queued"
    assert amc.service.task(late).status == "assigned"


def test_renewals_keep_a_short_lease_alive(make_amc):
    amc = make_amc(clock="system", min_lease_seconds=0.1)
    task_id, lease = amc.claimed(lease_seconds=0.3, start=True)
    for _ in range(6):
        time.sleep(0.1)
        amc.h1.renew(task_id, 1, lease["lease_id"])
    assert amc.service.task(task_id).status == "dispatched"
    time.sleep(0.5)
    amc.h1.renew(task_id, 1, lease["lease_id"], expect=409)
    assert problem(amc.h1) == (409, "lease_expired")


def test_shutdown_releases_waiting_claims(make_amc):
    amc = make_amc(clock="system")
    h1 = amc.caller("tok-host-h1-00000000000000", "h1")
    thread, result = claim_in_background(amc, h1, "h1", wait_seconds=20, expect=204)
    amc.app.state.context.drain()  # what SIGTERM does first
    thread.join(5)
    assert not thread.is_alive() and result["seconds"] < 2
