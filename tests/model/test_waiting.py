"""Why a queued task waits (`amc.core.waiting`): each reason, from the kernel's own state.

Liveness is the caller's (the server keeps it in memory), so each test passes the set of
hosts it calls online.
"""

from __future__ import annotations

import pytest

from amc.core.records import Requirements
from amc.core.waiting import Waiting, WaitingReason, waiting
from tests.model.world import World

req = pytest.mark.req


def why(w: World, task_id: str, online: set[str]) -> Waiting | None:
    return waiting(w.task(task_id), w.state.hosts.values(), lambda host_id: host_id in online)


def pixel(w: World) -> str:
    return w.submit(requirements=Requirements(attributes={"model": "Pixel 7"}))


@req("WAITING/s1")
def test_a_task_that_is_not_queued_is_not_waiting_and_one_an_idle_online_device_matches_is_ready():
    w = World()
    w.register("h1", "d1", "d2", attributes={"model": "Pixel 7"})
    w.register("h2", "d3", attributes={"model": "Pixel 8"})
    task_id = pixel(w)
    assert why(w, task_id, {"h1", "h2"}) == Waiting(WaitingReason.ready, 2)
    w.claim("h1")
    assert why(w, task_id, {"h1", "h2"}) is None  # assigned


@req("WAITING/s2")
def test_a_held_task_waits_held_whatever_the_devices():
    w = World()
    w.register("h1", "d1", attributes={"model": "Pixel 7"})
    task_id = pixel(w)
    w.post(task_id, "pause")
    assert why(w, task_id, {"h1"}) == Waiting(WaitingReason.held, 1)
    w.post(task_id, "resume")
    assert why(w, task_id, {"h1"}) == Waiting(WaitingReason.ready, 1)


@req("WAITING/s3")
def test_no_registered_device_matches():
    w = World()
    w.register("h1", "d1", attributes={"model": "Pixel 8"})
    pinned = w.submit(requirements=Requirements(serial="no-such-phone"))
    assert why(w, pixel(w), {"h1"}) == Waiting(WaitingReason.no_device_matches, 0)
    assert why(w, pinned, {"h1"}) == Waiting(WaitingReason.no_device_matches, 0)


@req("WAITING/s4")
def test_matching_devices_whose_hosts_are_offline():
    w = World()
    w.register("h1", "d1", attributes={"model": "Pixel 7"})
    w.register("h2", "d2", attributes={"model": "Pixel 7"})
    task_id = pixel(w)
    assert why(w, task_id, set()) == Waiting(WaitingReason.matching_devices_offline, 2)
    assert why(w, task_id, {"h2"}) == Waiting(WaitingReason.ready, 2)


@req("WAITING/s4")
def test_a_device_that_left_its_inventory_while_reserved_is_offline_though_its_host_is_not():
    w = World()
    w.register("h1", "d1", attributes={"model": "Pixel 7"})
    first = pixel(w)
    a = w.claim("h1")
    assert a is not None and a.task_id == first
    w.register("h1", "d9")  # d1 left while reserved: kept, offline, until its attempt ends
    task_id = pixel(w)
    assert why(w, task_id, {"h1"}) == Waiting(WaitingReason.matching_devices_offline, 1)


@req("WAITING/s5")
def test_matching_devices_online_and_all_reserved_are_busy():
    w = World()
    w.register("h1", "d1", attributes={"model": "Pixel 7"})
    w.register("h2", "d2", attributes={"model": "Pixel 7"})
    pixel(w)
    w.claim("h1")
    task_id = pixel(w)
    # h2's idle device is offline; h1's online one is reserved
    assert why(w, task_id, {"h1"}) == Waiting(WaitingReason.matching_devices_busy, 2)
    assert why(w, task_id, {"h1", "h2"}) == Waiting(WaitingReason.ready, 2)
