"""Host liveness, progress and `waiting` over HTTP, in real time with a short host timeout.

The conformance suite checks the same rules (PROGRESS, LIVENESS, WAITING), mostly on a
manual clock; these tests let real time pass: a host that stops calling reads offline once
`--host-timeout` has passed, with its devices, and a task only they match waits offline.
"""

from __future__ import annotations

import time

import pytest

from tests.adapters.http.test_serve import TOKENS, Served, tokens_file  # noqa: F401  (a fixture)
from tests.support.plans import STEPS_ABC
from tests.support.waiting import eventually

req = pytest.mark.req

HOST_TIMEOUT = 2.0  # seconds: short, yet long enough for a busy machine to make a few requests


def online(amc, host_id: str) -> tuple[bool, list[bool]]:
    host = amc.acme.host(host_id)
    return host["online"], [d["online"] for d in host["devices"]]


@req("LIVENESS/s2", "WAITING/s4")
def test_a_host_that_goes_silent_reads_offline_within_the_host_timeout_and_back_when_it_calls(make_amc):
    amc = make_amc(clock="system", host_timeout_seconds=HOST_TIMEOUT)
    registered = amc.h1.register("h1", [{"serial": "emulator-5554", "attributes": {}}])
    silent_since = time.monotonic()  # h1's last request answered (it was seen a moment before)
    task = amc.acme.submit(requirements={"serial": "emulator-5554"})
    assert online(amc, "h1") == (True, [True])
    assert amc.acme.task(task["id"])["waiting"] == {"reason": "ready", "matching_devices": 1}

    # h1 makes no request: within the timeout (and not before) it reads offline, with its device
    eventually(lambda: online(amc, "h1") == (False, [False]), timeout=HOST_TIMEOUT + 2, what="h1 offline")
    assert time.monotonic() - silent_since >= HOST_TIMEOUT - 0.1
    assert amc.acme.host("h1")["last_seen_at"] == registered["last_seen_at"]
    assert amc.acme.task(task["id"])["waiting"] == {"reason": "matching_devices_offline", "matching_devices": 1}

    # a client reading it does not bring it back; its own request (a claim, here) does
    assert online(amc, "h1") == (False, [False])
    lease = amc.h1.claim("h1")
    assert lease["task_id"] == task["id"]
    assert online(amc, "h1") == (True, [True])
    assert amc.acme.task(task["id"])["waiting"] is None


@req("LIVENESS/s1")
def test_a_host_never_seen_since_the_start_reads_offline_with_no_last_seen(make_amc):
    amc = make_amc(clock="system", host_timeout_seconds=HOST_TIMEOUT)
    amc.admin.register("h2", [{"serial": "d1", "attributes": {}}])  # an admin's request is not h2's
    host = amc.acme.host("h2")
    assert (host["last_seen_at"], host["online"], host["devices"][0]["online"]) == (None, False, False)
    assert amc.h2.host("h2")["online"] is True


@req("PROGRESS/s1")
def test_progress_is_kept_in_memory_and_a_refused_renewal_records_none(make_amc):
    amc = make_amc()
    task_id, lease = amc.claimed(start=True, plan=STEPS_ABC)
    renew = f"/v1/tasks/{task_id}/attempts/1/renew"
    amc.h1.call("POST", renew, {"lease_id": lease["lease_id"], "progress": {"step": "b", "ended": 1}})
    assert amc.acme.task(task_id)["attempts"][0]["progress"] == {"step": "b", "ended": 1}
    # a renewal refused by the lease checks (409) records no progress
    amc.h1.call("POST", renew, {"lease_id": "l_wrong", "progress": {"step": "c", "ended": 2}}, expect=409)
    assert amc.acme.task(task_id)["attempts"][0]["progress"] == {"step": "b", "ended": 1}
    # progress naming no step of the plan is 400, even where the lease checks would refuse too
    problem = amc.h1.call("POST", renew, {"lease_id": "l_wrong", "progress": {"step": "zz", "ended": 2}}, expect=400)
    assert "'zz'" in problem["detail"]


def test_serve_takes_a_host_timeout(tmp_path, tokens_file):  # noqa: F811  (the fixture)
    served = Served(tmp_path / "data", "--host-timeout", "0.5", tokens=tokens_file)
    try:
        token = {entry.get("host_id") or entry.get("tenant") or "admin": entry["token"] for entry in TOKENS}
        host, client = served.caller(token["h1"]), served.caller(token["acme"])
        host.register("h1", [{"serial": "d1", "attributes": {}}])
        assert client.host("h1")["online"] is True
        eventually(lambda: client.host("h1")["online"] is False, timeout=3, what="h1 offline after 0.5 s")
    finally:
        served.stop()


@req("WAITING/s4")
def test_a_listed_page_says_why_each_queued_task_waits_by_its_own_requirements(make_amc):
    """A listing works out `waiting` once per set of requirements (and held or not), and each
    task still reads its own: the answer of one is never another's."""
    amc = make_amc(clock="system")
    amc.h1.register("h1", [{"serial": "d1", "attributes": {"model": "Pixel 7", "sdk": "34"}}])
    specs = [
        {"requirements": {"attributes": {"model": "Pixel 7", "sdk": "34"}}},
        {"requirements": {"attributes": {"sdk": "34", "model": "Pixel 7"}}},  # the same, in another order
        {"requirements": {"attributes": {"model": "Pixel 8"}}},
        {"requirements": {"attributes": {"model": "Pixel 7", "sdk": "34"}}, "held": True},
    ]
    ids = []
    for spec in specs:
        task = amc.acme.submit(requirements=spec["requirements"])
        if spec.get("held"):
            amc.acme.post_message(task["id"], "pause")
        ids.append(task["id"])
    listed = {t["id"]: t["waiting"] for t in amc.acme.tasks()["tasks"]}
    assert [listed[i] for i in ids] == [
        {"reason": "ready", "matching_devices": 1},
        {"reason": "ready", "matching_devices": 1},
        {"reason": "no_device_matches", "matching_devices": 0},
        {"reason": "held", "matching_devices": 1},
    ]
    assert [amc.acme.task(i)["waiting"] for i in ids] == [listed[i] for i in ids]
