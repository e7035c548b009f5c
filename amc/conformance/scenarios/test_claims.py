"""Claims and inventories: CLAIM, INVENTORY (specs/requirements/protocol-rules.md).

The target is shared with other tests, so every device serial and every task requirement
carries this test's run tag (`Scene.serial`, `Scene.requirements`); "the host lists exactly"
means: exactly, among this test's devices.
"""

from __future__ import annotations

import threading
import time

import pytest

from amc.conformance.client import wire


@pytest.mark.req("CLAIM/s1")
def test_claims_take_the_highest_priority_then_the_oldest(scene):
    """Tasks A (priority 0), B (5), C (5) are claimed as B, C, A."""
    h1 = scene.h1
    # Given h1 with three devices that match every task, and A, B, C submitted in that order
    h1.register(scene.device("emulator-5554"), scene.device("emulator-5556"), scene.device("emulator-5558"))
    a = scene.submit(priority=0)
    b = scene.submit(priority=5)
    c = scene.submit(priority=5)

    # When h1 claims three times
    leases = [h1.claim() for _ in range(3)]

    # Then it is assigned B, then C, then A, each as attempt 1
    assert [lease.task_id for lease in leases] == [b["id"], c["id"], a["id"]]
    assert [lease.attempt for lease in leases] == [1, 1, 1]


@pytest.mark.req("CLAIM/s1")
def test_a_requeued_task_keeps_its_place(scene):
    """A task requeued after expiry still comes before an equal-priority task submitted after it."""
    h1, clock = scene.h1, scene.clock
    # Given A submitted and claimed, then D submitted, then A's lease expired
    h1.register(scene.device("emulator-5554"), scene.device("emulator-5556"))
    a = scene.submit()
    first = h1.claim(lease_seconds=clock.short_lease)
    assert first.task_id == a["id"]
    d = scene.submit()
    clock.run_out(first)
    assert scene.task(a["id"])["status"] == "queued"

    # When h1 claims
    lease = h1.claim()

    # Then it gets A again (attempt 2), before D
    assert (lease.task_id, lease.attempt) == (a["id"], 2)
    assert h1.claim().task_id == d["id"]


@pytest.mark.req("CLAIM/s2")
def test_requirements_match_serial_and_attributes_first_device_in_serial_order(scene):
    """A requirement matches serial and every attribute; the first matching device in serial order is used."""
    h1 = scene.h1
    # Given h1 registered emulator-5556 {Pixel 7}, emulator-5554 {Pixel 7, sdk 34}, R58M {Galaxy S21}
    h1.register(
        scene.device("emulator-5556", model="Pixel 7"),
        scene.device("emulator-5554", model="Pixel 7", sdk="34"),
        scene.device("R58M", model="Galaxy S21"),
    )

    # When the only queued task requires {model: Pixel 7} and h1 claims
    pixel = scene.submit(attributes={"model": "Pixel 7"})
    lease = h1.claim()

    # Then it is assigned emulator-5554, the first of the two matching serials
    assert (lease.task_id, lease.device) == (pixel["id"], scene.serial("emulator-5554"))
    # And a task requiring serial R58M gets R58M; one requiring sdk 33 gets 204 and stays queued
    pinned = scene.submit(serial="R58M")
    on_r58m = h1.claim()
    assert (on_r58m.task_id, on_r58m.device) == (pinned["id"], scene.serial("R58M"))
    sdk33 = scene.submit(attributes={"model": "Pixel 7", "sdk": "33"})
    h1.claim(expect=204)
    assert scene.task(sdk33["id"])["status"] == "queued"
    # And a task nothing matches does not block a lower-priority task that R58M matches
    h1.report(on_r58m, "done")
    scene.submit(priority=9, attributes={"model": "Pixel 9"})
    galaxy = scene.submit(priority=0, attributes={"model": "Galaxy S21"})
    lease = h1.claim()
    assert (lease.task_id, lease.device) == (galaxy["id"], scene.serial("R58M"))


@pytest.mark.req("CLAIM/s3")
def test_reserved_and_offline_devices_are_never_offered(scene):
    """One attempt per device; a device that left the inventory is not offered until it is listed again."""
    h1 = scene.h1
    # Given h1 registered only emulator-5554, and tasks A and B queued, both matching it
    h1.register(scene.device("emulator-5554"))
    a = scene.submit()
    b = scene.submit()

    # When h1 claims twice
    lease = h1.claim()
    h1.claim(expect=204)

    # Then A is assigned on emulator-5554 and B stays queued
    assert (lease.task_id, lease.device) == (a["id"], scene.serial("emulator-5554"))
    assert scene.task(b["id"])["status"] == "queued"
    # And after h1 registers no devices, emulator-5554 stays reserved by A, offline
    host = h1.register()
    assert scene.mine(host) == [
        {**scene.device("emulator-5554"), "online": False, "reservation": {"task_id": a["id"], "attempt": 1}}
    ]
    h1.claim(expect=204)
    # And when A's attempt ends the device is dropped, and claims still answer 204
    h1.report(lease, "done")
    assert scene.mine(h1.read()) == []
    h1.claim(expect=204)
    # And only after h1 lists emulator-5554 again is B assigned on it
    h1.register(scene.device("emulator-5554"))
    again = h1.claim()
    assert (again.task_id, again.device) == (b["id"], scene.serial("emulator-5554"))


@pytest.mark.req("CLAIM/s4")
def test_a_claim_without_a_match_waits_then_answers_204(scene):
    """No matching device: 204 after wait_seconds; a match that appears while waiting is returned at once."""
    h1 = scene.h1
    # Given task A requiring a Pixel 7, and h1 registered with only a Galaxy S21
    a = scene.submit(attributes={"model": "Pixel 7"})
    h1.register(scene.device("R58M", model="Galaxy S21"))

    # When h1 claims with wait_seconds 2
    began = time.monotonic()
    h1.claim(wait_seconds=2, expect=204)
    waited = time.monotonic() - began

    # Then it answers 204 after about 2 seconds, and A stays queued
    assert 1.8 <= waited < 10, f"the claim answered after {waited:.2f} s"
    assert (scene.task(a["id"])["status"], scene.task(a["id"])["attempt"]) == ("queued", None)

    # And a task matching h1 submitted while its claim waits is returned at once
    answers: list = []
    waiting = threading.Thread(target=lambda: answers.append((h1.claim(wait_seconds=10), time.monotonic())))
    waiting.start()
    time.sleep(0.5)
    submitted = time.monotonic()
    galaxy = scene.submit(attributes={"model": "Galaxy S21"})
    waiting.join(15)
    assert answers, "the waiting claim did not answer"
    lease, answered = answers[0]
    assert lease.task_id == galaxy["id"]
    assert answered - submitted < 3, f"the waiting claim answered {answered - submitted:.2f} s after the submit"


@pytest.mark.req("CLAIM/s4")
def test_a_host_that_never_registered_gets_no_assignment(scene):
    """A host that never sent an inventory gets 204."""
    spare = scene.spare
    if spare is None:
        pytest.skip("needs a third host token that never registers (the tokens file has two hosts)")
    if scene.admin.send("GET", f"/v1/hosts/{spare.id}").status_code != 404:
        pytest.skip(f"host {spare.id!r} has registered before on this target")
    # Given a queued task (any host could run it)
    task = scene.submit()
    # When a host that never registered claims
    spare.claim(expect=204)
    # Then nothing is assigned
    assert scene.task(task["id"])["status"] == "queued"


@pytest.mark.req("CLAIM/s5")
def test_the_devices_filter_restricts_the_candidates(scene):
    """devices: [serial] restricts the claim; unknown serials and an empty list leave no candidate (204)."""
    h1 = scene.h1
    # Given h1 with emulator-5554 and emulator-5556 free, and task A matching both
    h1.register(scene.device("emulator-5554"), scene.device("emulator-5556"))
    a = scene.submit()

    # When h1 claims with devices [emulator-5556]
    lease = h1.claim(devices=[scene.serial("emulator-5556")])

    # Then A is assigned on emulator-5556
    assert (lease.task_id, lease.device) == (a["id"], scene.serial("emulator-5556"))
    # And a serial h1 does not have, or an empty list, is no error but 204
    b = scene.submit()
    h1.claim(devices=[scene.serial("emulator-9999")], expect=204)
    h1.claim(devices=[], expect=204)
    assert scene.task(b["id"])["status"] == "queued"


@pytest.mark.req("CLAIM/s6")
def test_lease_length_defaults_and_bounds(scene):
    """Default lease 30 s; 1 and 600 are granted; 0.5 and 601 are 400 (server run with 30/1/600)."""
    h1, clock = scene.h1, scene.clock
    # Given a server with the default lease settings, and matching queued tasks
    h1.register(*(scene.device(f"emulator-55{n}") for n in (54, 56, 58)))
    tasks = [scene.submit() for _ in range(4)]

    # When h1 claims with no lease_seconds at T
    default = h1.claim()

    # Then the lease is 30 s, to T+30 s
    assert default.lease_seconds == 30
    if clock.manual:
        assert default.lease_expires_at == wire(clock.now() + 30_000)
    # And 600 and 1 are granted as asked
    long = h1.claim(lease_seconds=600)
    assert long.lease_seconds == 600
    if clock.manual:
        assert long.lease_expires_at == wire(clock.now() + 600_000)
    short = h1.claim(lease_seconds=1)
    assert short.lease_seconds == 1
    assert [default.task_id, long.task_id, short.task_id] == [t["id"] for t in tasks[:3]]
    # And 0.5 or 601 are refused, and the task stays queued
    h1.report(short, "done")
    h1.claim(lease_seconds=0.5, expect=(400, "invalid_request"))
    h1.claim(lease_seconds=601, expect=(400, "invalid_request"))
    assert scene.task(tasks[3]["id"])["status"] == "queued"
    # And later starts and renewals extend the lease by the granted lease_seconds
    clock.advance(7)
    started = h1.start(long)
    renewed = h1.renew(default)
    if clock.manual:
        assert started["lease_expires_at"] == wire(clock.now() + 600_000)
        assert renewed["lease_expires_at"] == wire(clock.now() + 30_000)


@pytest.mark.req("CLAIM")
def test_only_the_host_itself_may_claim_and_wait_seconds_is_bounded(scene):
    """A claim for another host is 403; wait_seconds outside 0..30 is 400."""
    h1, h2 = scene.h1, scene.h2
    h1.register(scene.device("emulator-5554"))
    task = scene.submit()
    h2.caller.claim(h1.id, expect=(403, "forbidden"))
    scene.acme.claim(h1.id, expect=(403, "forbidden"))
    h1.claim(wait_seconds=31, expect=(400, "invalid_request"))
    h1.claim(wait_seconds=-1, expect=(400, "invalid_request"))
    assert scene.task(task["id"])["status"] == "queued"


# ---------------------------------------------------------------------------------------
# INVENTORY


@pytest.mark.req("INVENTORY/s1")
def test_registration_replaces_the_inventory(scene):
    """A PUT lists exactly the new devices, online and free; a device left out and not reserved is gone."""
    h1, clock = scene.h1, scene.clock
    # Given h1 registered emulator-5554 {Pixel 7} and emulator-5556 {}, neither reserved
    h1.register(scene.device("emulator-5554", model="Pixel 7"), scene.device("emulator-5556"))
    clock.advance(1)

    # When h1 puts emulator-5556 {Pixel 8} and R58M {}
    host = h1.register(scene.device("emulator-5556", model="Pixel 8"), scene.device("R58M"))

    # Then the host lists exactly those two, online and free, and emulator-5554 is gone
    assert host["id"] == h1.id
    expected = [
        {**scene.device("R58M"), "online": True, "reservation": None},
        {**scene.device("emulator-5556", model="Pixel 8"), "online": True, "reservation": None},
    ]
    assert sorted(scene.mine(host), key=lambda d: d["serial"]) == expected
    if clock.manual:
        assert host["updated_at"] == wire(clock.now())
    assert scene.mine(h1.read()) == scene.mine(host)
    assert scene.mine(scene.admin.get_host(h1.id)) == scene.mine(host)


@pytest.mark.req("INVENTORY/s2")
@pytest.mark.parametrize("ends_by", ["report", "expiry"])
def test_a_reserved_device_that_disappears_stays_reserved_and_offline(scene, ends_by):
    """A reserved device left out stays listed, offline, with its reservation, until its attempt ends."""
    h1, clock = scene.h1, scene.clock
    # Given emulator-5554 of h1 reserved by attempt 1 of X, dispatched
    task, lease = scene.running(h1, lease_seconds=clock.short_lease if ends_by == "expiry" else None)
    reserved = {"task_id": task["id"], "attempt": 1}

    # When h1 puts an empty inventory
    host = h1.register()

    # Then emulator-5554 is still listed, offline, with its reservation, and h1 can still renew
    assert scene.mine(host) == [{**scene.device("emulator-5554"), "online": False, "reservation": reserved}]
    h1.renew(lease)
    # And listed again it reads online with the reservation kept; left out again, offline
    host = h1.register(scene.device("emulator-5554"))
    assert scene.mine(host) == [{**scene.device("emulator-5554"), "online": True, "reservation": reserved}]
    h1.register()
    # And when attempt 1 ends, the device disappears
    if ends_by == "report":
        h1.report(lease, "done")
    else:
        clock.run_out(lease)
        assert scene.task(task["id"])["attempts"][0]["outcome"] == "expired"
    assert scene.mine(h1.read()) == []


@pytest.mark.req("INVENTORY")
def test_an_inventory_listing_a_serial_twice_is_refused(scene):
    """A serial listed twice is 400 and the inventory stays as it was; another host's inventory is 403."""
    h1, h2 = scene.h1, scene.h2
    before = h1.register(scene.device("emulator-5554"))
    h1.register(scene.device("emulator-5556"), scene.device("emulator-5556"), expect=(400, "invalid_request"))
    assert scene.mine(h1.read()) == scene.mine(before)
    h2.caller.register(h1.id, [scene.device("emulator-5558")], expect=(403, "forbidden"))
    scene.acme.register(h1.id, [scene.device("emulator-5558")], expect=(403, "forbidden"))
    h2.caller.get_host(h1.id, expect=(403, "forbidden"))
    assert scene.mine(scene.admin.register(h1.id, [scene.device("emulator-5558")])) == [
        {**scene.device("emulator-5558"), "online": True, "reservation": None}
    ]


@pytest.mark.req("INVENTORY/s3")
def test_a_host_lists_and_reads_only_itself(scene):
    """A host's GET /v1/hosts is {"hosts": [its own host]} (empty before it registered); another host is 403."""
    h1, h2 = scene.h1, scene.h2
    # Given h1 and h2 registered, each with a device
    h1.register(scene.device("emulator-5554"))
    h2.register(scene.device("emulator-5570"))
    # When each host lists the hosts
    for host, other in ((h1, h2), (h2, h1)):
        listing = host.caller.list_hosts()
        # Then it sees exactly its own host, as it reads itself
        assert isinstance(listing, dict) and isinstance(listing.get("hosts"), list), listing
        assert [entry["id"] for entry in listing["hosts"]] == [host.id]
        assert scene.mine(listing["hosts"][0]) == scene.mine(host.read())
        # And reading the other host is 403
        host.caller.get_host(other.id, expect=(403, "forbidden"))
    # And a host that never registered lists nothing
    spare = scene.spare
    if spare is not None and scene.admin.send("GET", f"/v1/hosts/{spare.id}").status_code == 404:
        assert spare.caller.list_hosts() == {"hosts": []}


@pytest.mark.req("INVENTORY/s4")
def test_clients_and_admins_list_every_host(scene):
    """GET /v1/hosts answers {"hosts": [...]} with every host, each as GET /v1/hosts/{id} shows it."""
    h1, h2 = scene.h1, scene.h2
    # Given h1 and h2 registered, each with devices of this test
    h1.register(scene.device("emulator-5554", model="Pixel 7"))
    h2.register(scene.device("emulator-5570"), scene.device("R58M"))
    for caller in (scene.acme, scene.beta, scene.admin):
        # When a client of either tenant, or an admin, lists the hosts
        listing = caller.list_hosts()
        # Then the answer is an object whose hosts hold both, as each reads on its own
        assert isinstance(listing, dict) and isinstance(listing.get("hosts"), list), listing
        by_id = {entry["id"]: entry for entry in listing["hosts"]}
        for host in (h1, h2):
            assert host.id in by_id, f"{caller.name}: GET /v1/hosts lacks {host.id}"
            assert scene.mine(by_id[host.id]) == scene.mine(caller.get_host(host.id))
        assert len(scene.mine(by_id[h2.id])) == 2


@pytest.mark.req("INVENTORY/s5")
def test_a_devices_attributes_may_be_left_out(scene):
    """A device listed without attributes is registered with {} and can be claimed."""
    h1 = scene.h1
    serial = scene.serial("emulator-5554")
    # When h1 registers a device without attributes
    host = h1.caller.call("PUT", f"/v1/hosts/{h1.id}", {"devices": [{"serial": serial}]})
    # Then it reads with attributes {}, online and free
    assert scene.mine(host) == [{"serial": serial, "attributes": {}, "online": True, "reservation": None}]
    # And a task pinned to that serial is assigned on it
    task = scene.acme.submit_task(requirements={"serial": serial, "attributes": {}})
    lease = h1.claim()
    assert (lease.task_id, lease.device) == (task["id"], serial)
    h1.report(lease, "done")
