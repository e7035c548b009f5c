"""The event stream, `GET /v1/events` (specs/protocol.md Part E), over a real socket: what
arrives for each change, who sees it, resuming with Last-Event-ID, resets, keep-alives,
liveness events, and a slow reader that must not slow anyone down."""

from __future__ import annotations

import socket
import time

import pytest

from tests.adapters.http.conftest import TOKENS
from tests.support.sse import EventReader, run_of, seq

ADMIN, ACME, BETA, H1 = (TOKENS[name][0] for name in ("admin", "acme", "beta", "h1"))


@pytest.fixture
def readers():
    opened: list[EventReader] = []

    def open_reader(url: str, token: str | None, **options) -> EventReader:
        opened.append(EventReader(url, token, **options))
        return opened[-1]

    yield open_reader
    for reader in opened:
        reader.close()


def statuses(reader: EventReader, task_id: str) -> list[str]:
    """The task's statuses as its events showed them, repeats folded."""
    seen: list[str] = []
    for view in reader.tasks(task_id):
        if not seen or seen[-1] != view["status"]:
            seen.append(view["status"])
    return seen


# ---------------------------------------------------------------------------------------
# EVENTS/s1: what arrives


@pytest.mark.req("EVENTS/s1")
def test_submit_claim_start_result_and_cancel_arrive_as_the_views_a_read_answers(amc_any_store, readers):
    amc = amc_any_store
    admin = readers(amc.url, ADMIN)
    assert admin.response.status_code == 200
    assert admin.response.headers["content-type"] == "text/event-stream"
    assert admin.response.headers["cache-control"] == "no-store"
    # A task runs to done on h1, another is cancelled while queued
    x = amc.acme.submit()["id"]
    amc.h1.register("h1", ["emulator-5554"])
    lease = amc.h1.claim("h1")
    amc.h1.start(x, 1, lease["lease_id"])
    amc.h1.report(x, 1, lease["lease_id"], "done")
    y = amc.acme.submit()["id"]
    amc.acme.cancel(y)
    admin.wait_for(lambda r: [v["status"] for v in r.tasks(y)][-1:] == ["cancelled"], what="y cancelled")
    # Then each change arrived, in commit order, as the task read at that moment
    assert statuses(admin, x) == ["queued", "assigned", "dispatched", "done"]
    assert statuses(admin, y) == ["queued", "cancelled"]
    assert admin.tasks(x)[-1] == amc.acme.task(x) and admin.tasks(y)[-1] == amc.acme.task(y)
    # And the host's device was reserved and freed by the claim and the result
    reservations = [v["devices"][0]["reservation"] for v in admin.hosts("h1")]
    assert reservations[0] is None and reservations[-1] is None and any(r is not None for r in reservations)
    assert admin.hosts("h1")[-1] == amc.acme.host("h1")
    # And the ids are <run>-<seq>, one run, counting up by one from the first event
    events = admin.snapshot()
    assert len({run_of(e) for e in events}) == 1
    assert [seq(e) for e in events] == list(range(1, len(events) + 1))
    assert all(e.type in ("task", "host") for e in events)


@pytest.mark.req("EVENTS/s1")
def test_a_renewal_with_progress_arrives_with_that_progress(amc_any_store, readers):
    amc = amc_any_store  # the durable store commits on its writer thread: the view is rendered after the reply
    acme = readers(amc.url, ACME)
    x, lease = amc.claimed(start=True)
    body = {"lease_id": lease["lease_id"], "progress": {"step": "open", "ended": 0}}
    amc.h1.call("POST", f"/v1/tasks/{x}/attempts/1/renew", body)
    acme.wait_for(lambda r: r.tasks(x)[-1:] and r.tasks(x)[-1]["attempts"][0]["progress"] is not None)
    assert acme.tasks(x)[-1]["attempts"][0]["progress"] == {"step": "open", "ended": 0}


# ---------------------------------------------------------------------------------------
# EVENTS/s2: who sees what


@pytest.mark.req("EVENTS/s2")
def test_a_tenant_sees_its_own_tasks_and_every_host_and_nothing_of_another_tenants_tasks(amc, readers):
    acme, beta, admin = readers(amc.url, ACME), readers(amc.url, BETA), readers(amc.url, ADMIN)
    x = amc.acme.submit()["id"]
    amc.h1.register("h1", ["emulator-5554"])
    lease = amc.h1.claim("h1")
    amc.acme.cancel(x)
    amc.h1.report(x, 1, lease["lease_id"], "cancelled")
    z = amc.beta.submit()["id"]
    for reader in (acme, beta, admin):
        reader.wait_for(lambda r: r.hosts("h1") and r.hosts("h1")[-1]["devices"][0]["reservation"] is None)
    admin.wait_for(lambda r: r.tasks(z))
    beta.wait_for(lambda r: r.tasks(z))
    assert statuses(acme, x)[-1] == "cancelled" and acme.tasks(z) == []
    assert beta.tasks(x) == [] and [v["id"] for v in beta.tasks()] == [z]
    assert len(beta.hosts("h1")) == len(acme.hosts("h1")) == len(admin.hosts("h1")) >= 3
    assert {v["id"] for v in admin.tasks()} == {x, z}


@pytest.mark.req("EVENTS/s2")
def test_a_host_token_is_refused_403_and_no_token_401(amc, readers):
    host = readers(amc.url, H1)
    assert host.response.status_code == 403
    assert host.response.headers["content-type"].startswith("application/problem+json")
    assert readers(amc.url, None).response.status_code == 401
    assert readers(amc.url, "tok-nobody-knows-this-one").response.status_code == 401


# ---------------------------------------------------------------------------------------
# EVENTS/s3, EVENTS/s4: resuming


@pytest.mark.req("EVENTS/s3")
@pytest.mark.parametrize("how", ["header", "query"])
def test_resuming_with_the_last_event_id_replays_exactly_the_missed_events(amc, readers, how):
    first = readers(amc.url, ADMIN)
    amc.acme.submit()
    [seen] = first.wait_count(1)
    first.close()
    # While nobody reads: three more changes, two of them another tenant's
    missed = [amc.acme.submit()["id"], amc.beta.submit()["id"], amc.beta.submit()["id"]]
    resume = {"last_event_id": seen.id} if how == "header" else {"params": {"last_event_id": seen.id}}
    again = readers(amc.url, ADMIN, **resume)
    acme_again = readers(amc.url, ACME, **resume)
    events = again.wait_count(3)
    assert [v["id"] for v in again.tasks()] == missed
    assert [seq(e) for e in events] == [seq(seen) + 1, seq(seen) + 2, seq(seen) + 3]
    assert [v["id"] for v in acme_again.wait_for(lambda r: r.tasks())] == missed[:1]  # its scope only
    # And then it goes on live
    live = amc.acme.submit()["id"]
    again.wait_for(lambda r: len(r.tasks()) == 4)
    assert again.tasks()[-1]["id"] == live and seq(again.snapshot()[-1]) == seq(seen) + 4
    assert not again.of_type("reset") and not acme_again.of_type("reset")


@pytest.mark.req("EVENTS/s4")
def test_an_id_of_another_run_too_old_or_malformed_gets_a_reset_and_a_fresh_reader_neither(make_amc, readers):
    amc = make_amc(events=_events(ring_events=3))
    first = readers(amc.url, ADMIN)
    for _ in range(5):
        amc.acme.submit()
    events = first.wait_count(5)
    run, latest = run_of(events[0]), seq(events[-1])
    for last_event_id in ("0123abcd0000-2", f"{run}-1", f"{run}-{latest + 1}", "nonsense", f"{run}-x"):
        reader = readers(amc.url, ADMIN, last_event_id=last_event_id)
        [reset] = reader.wait_count(1)
        assert (reset.type, reset.data, reset.id) == ("reset", "{}", f"{run}-{latest}"), last_event_id
    # The oldest id the ring still follows resumes; a fresh reader gets neither replay nor reset
    resumed = readers(amc.url, ADMIN, last_event_id=f"{run}-{latest - 3}")
    assert [seq(e) for e in resumed.wait_count(3)] == [latest - 2, latest - 1, latest]
    fresh = readers(amc.url, ADMIN)
    time.sleep(0.2)
    assert fresh.snapshot() == []
    amc.acme.submit()
    assert [e.type for e in fresh.wait_count(1)] == ["task"] and seq(fresh.snapshot()[0]) == latest + 1


# ---------------------------------------------------------------------------------------
# EVENTS/s5: liveness


@pytest.mark.req("EVENTS/s5")
def test_a_host_going_offline_and_back_online_is_an_event(make_amc, readers):
    amc = make_amc(host_timeout_seconds=60.0, events=_events(liveness_check_seconds=0.05))
    acme = readers(amc.url, ACME)
    amc.h1.register("h1", ["emulator-5554"])
    acme.wait_for(lambda r: r.hosts("h1"))
    assert acme.hosts("h1")[-1]["online"] is True
    # When the clock passes h1's timeout without a request of h1, h1 goes offline
    amc.admin.call("POST", "/v1/admin/clock", {"advance_seconds": 60})
    acme.wait_for(lambda r: r.hosts("h1")[-1]["online"] is False, what="h1 offline")
    assert len(acme.hosts("h1")) == 2
    # And its next request brings it back
    amc.h1.host("h1")
    acme.wait_for(lambda r: r.hosts("h1")[-1]["online"] is True, what="h1 online")
    assert len(acme.hosts("h1")) == 3
    assert acme.hosts("h1")[-1] == amc.acme.host("h1")


# ---------------------------------------------------------------------------------------
# EVENTS/s6: keep-alive


@pytest.mark.req("EVENTS/s6")
def test_a_quiet_stream_sends_keep_alive_comments(make_amc, readers):
    amc = make_amc(events=_events(keepalive_seconds=0.1))
    reader = readers(amc.url, ACME)
    reader.wait_for(lambda r: r.lines.count(": keep-alive") >= 2, timeout=5)
    assert reader.snapshot() == []  # comments are not events
    assert reader.response.headers["amc-keep-alive"] == "0.1"  # the interval, said (BOUNDED/s1)


# ---------------------------------------------------------------------------------------
# EVENTS/s7: a slow reader


BIG_PLAN = {"steps": [{"id": "run", "action": "shell", "args": {"command": "echo " + "x" * 60_000}}]}


@pytest.mark.req("EVENTS/s7")
def test_a_reader_that_does_not_read_is_reset_and_slows_nobody(make_amc, readers):
    amc = make_amc(events=_events(queue_events=4))
    # A reader that asks for the stream and then reads nothing, with a tiny receive buffer
    stalled = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stalled.connect(("127.0.0.1", int(amc.url.rpartition(":")[2])))
    try:
        request = f"GET /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ADMIN}\r\n\r\n"
        stalled.sendall(request.encode())
        fast = readers(amc.url, ADMIN)
        # When far more than the socket buffers hold is published (~60 KB per event)
        started = time.monotonic()
        submitted = [amc.acme.submit(BIG_PLAN)["id"] for _ in range(200)]
        elapsed = time.monotonic() - started
        # Then the fast reader got every event, and nobody waited for the stalled one
        fast.wait_for(lambda r: len(r.tasks()) == 200, timeout=30)
        assert [v["id"] for v in fast.tasks()] == submitted and not fast.of_type("reset")
        assert elapsed < 20, f"200 submissions took {elapsed:.1f} s"
        # And the stalled reader, once it reads, finds a reset in place of what it missed
        stalled.setblocking(False)
        received = _drain(stalled, until=b"event: reset")
        assert b"event: reset\ndata: {}\n" in received
    finally:
        stalled.close()


def _drain(sock: socket.socket, until: bytes, timeout: float = 10.0) -> bytes:
    chunks, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(1 << 16)
        except BlockingIOError:
            if until in b"".join(chunks[-3:]) or until in b"".join(chunks):
                break
            time.sleep(0.01)
            continue
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def _events(**options):
    from amc.adapters.http.settings import EventSettings

    return EventSettings(**options)
