"""The optional event stream, specs/protocol.md Part E (specs/requirements/events.md): what
arrives for a change, who sees it, resuming with Last-Event-ID, and resets.

A target without the stream answers `GET /v1/events` 404: every scenario here is then
skipped. The suite shares the target with other tests, so the scenarios look only at their
own tasks' events. Keep-alives (15 s), liveness events and slow readers are left to the
implementation's own tests: they would take long, or depend on socket buffers.
"""

from __future__ import annotations

import pytest

from amc.conformance.events import EventStream


@pytest.fixture
def streams(scene):
    opened: list[EventStream] = []

    def open_stream(caller, **options) -> EventStream:
        stream = EventStream(scene.target.url, caller.token, **options)
        opened.append(stream)
        if stream.absent:
            pytest.skip("the target has no event stream (GET /v1/events is 404): Part E is optional")
        return stream

    yield open_stream
    for stream in opened:
        stream.close()


@pytest.mark.req("EVENTS/s1")
def test_a_tasks_changes_arrive_as_its_views_in_commit_order(scene, streams):
    """Submit, claim, start, result and cancel arrive as task events equal to a read."""
    acme, h1 = scene.acme, scene.h1
    admin = streams(scene.admin)
    assert admin.response.status_code == 200
    assert admin.response.headers["content-type"].split(";")[0].strip() == "text/event-stream"
    assert admin.response.headers["cache-control"] == "no-store"
    # When X runs to done on h1, and Y is submitted and cancelled
    task, lease = scene.running(h1)
    x = task["id"]
    h1.report(lease, "done")
    y = scene.submit()["id"]
    acme.cancel(y)
    admin.wait(lambda s: [v["status"] for v in s.tasks(y)][-1:] == ["cancelled"], what="Y cancelled")
    # Then X's statuses arrived in order, and the last view of each is what a read answers
    seen = [v["status"] for v in admin.tasks(x)]
    assert [s for i, s in enumerate(seen) if i == 0 or seen[i - 1] != s] == ["queued", "assigned", "dispatched", "done"]
    assert admin.tasks(x)[-1] == acme.get_task(x) and admin.tasks(y)[-1] == acme.get_task(y)
    # And the admin, who sees every event, got one run with seq counting up by one
    events = admin.snapshot()
    assert len({e.run for e in events}) == 1
    assert [e.seq for e in events] == list(range(events[0].seq, events[0].seq + len(events)))


@pytest.mark.req("EVENTS/s2")
def test_a_reader_sees_its_tenants_tasks_and_every_host_and_a_host_token_is_refused(scene, streams):
    """Another tenant sees nothing of the task; every reader sees the host; a host token is 403."""
    acme, beta, h1 = scene.acme, scene.beta, scene.h1
    refused = EventStream(scene.target.url, h1.caller.token)
    try:
        if refused.absent:
            pytest.skip("the target has no event stream (GET /v1/events is 404): Part E is optional")
        assert refused.response.status_code == 403
    finally:
        refused.close()
    mine, theirs = streams(acme), streams(beta)
    # When acme's task X is claimed by h1, and beta submits Z
    task, _lease = scene.running(h1, start=False)
    x = task["id"]
    z = scene.submit(beta)["id"]
    # Then acme sees X and not Z, beta Z and not X, and both see h1
    mine.wait(lambda s: s.tasks(x) and s.tasks(x)[-1]["status"] == "assigned", what="X assigned, to acme")
    theirs.wait(lambda s: s.tasks(z), what="Z, to beta")
    for stream in (mine, theirs):
        stream.wait(lambda s: any(e.type == "host" and e.json()["id"] == h1.id for e in s.snapshot()), what="h1")
    assert mine.tasks(z) == [] and theirs.tasks(x) == []


@pytest.mark.req("EVENTS/s3")
def test_resuming_with_last_event_id_replays_exactly_the_missed_events(scene, streams):
    """A reconnection with the last id gets the events after it, in order, then live ones."""
    admin = scene.admin
    first = streams(admin)
    x = scene.submit()["id"]
    last = first.wait(lambda s: [e for e in s.snapshot() if e.type == "task" and e.json()["id"] == x], what="X")[-1]
    first.close()
    missed = [scene.submit()["id"], scene.submit()["id"]]
    again = streams(admin, last_event_id=last.id)
    again.wait(lambda s: len(s.tasks(*missed)) >= 2, what="the two missed submissions")
    events = again.snapshot()
    assert events[0].type != "reset"
    assert [e.seq for e in events] == list(range(last.seq + 1, last.seq + 1 + len(events)))
    assert [v["id"] for v in again.tasks(*missed)][:2] == missed
    # And the query parameter does the same
    by_query = streams(admin, params={"last_event_id": last.id})
    by_query.wait(lambda s: len(s.tasks(*missed)) >= 2, what="the two missed submissions, resumed by query")
    assert by_query.snapshot()[0].seq == last.seq + 1


@pytest.mark.req("EVENTS/s4")
def test_an_id_of_another_run_or_malformed_gets_a_reset_and_a_fresh_reader_neither(scene, streams):
    """The first event is reset for an id the server cannot resume from; a fresh reader starts live."""
    for last_event_id in ("no-such-run-1", "nonsense"):
        stream = streams(scene.admin, last_event_id=last_event_id)
        first = stream.wait(lambda s: s.snapshot(), what=f"a reset for {last_event_id!r}")[0]
        assert (first.type, first.json()) == ("reset", {}), last_event_id
    fresh = streams(scene.admin)
    x = scene.submit()["id"]
    fresh.wait(lambda s: s.tasks(x), what="X")
    assert all(e.type != "reset" for e in fresh.snapshot())
