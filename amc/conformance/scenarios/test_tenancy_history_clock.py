"""Tenants, task history and server time: TENANCY, HISTORY, CLOCK
(specs/requirements/protocol-rules.md)."""

from __future__ import annotations

import time

import pytest

from amc.conformance.client import WIRE_TIME, ms


def without(problem: dict, task_id: str) -> dict:
    """A problem document with the task id it may quote replaced, for comparing two 404s."""
    return {key: value.replace(task_id, "<id>") if isinstance(value, str) else value for key, value in problem.items()}


# ---------------------------------------------------------------------------------------
# TENANCY


@pytest.mark.req("TENANCY/s1")
def test_a_client_never_sees_or_changes_another_tenants_task(scene):
    """Another tenant's task is 404 to read, to read the history of and to cancel, exactly like an unknown id."""
    acme, beta = scene.acme, scene.beta
    # Given task X of acme, queued
    x = scene.submit(acme)
    unknown = f"t_unknown{scene.tag}"
    not_found = without(beta.get_task(unknown, expect=(404, "not_found")), unknown)

    # When beta reads X, reads X's history and cancels X
    answers = [
        beta.get_task(x["id"], expect=(404, "not_found")),
        beta.history(x["id"], expect=(404, "not_found")),
        beta.cancel(x["id"], expect=(404, "not_found")),
    ]

    # Then each is a 404 with the same body as for an unknown id
    assert without(answers[0], x["id"]) == not_found
    assert without(answers[1], x["id"]) == without(beta.history(unknown, expect=(404, "not_found")), unknown)
    assert without(answers[2], x["id"]) == without(beta.cancel(unknown, expect=(404, "not_found")), unknown)
    # And X is unchanged, and beta's list does not show it
    assert acme.get_task(x["id"]) == x
    assert x["id"] not in {t["id"] for t in beta.all_tasks(status="queued")}
    assert x["id"] in {t["id"] for t in acme.all_tasks(status="queued")}


@pytest.mark.req("TENANCY/s2")
def test_an_admin_acts_across_tenants(scene):
    """An admin lists and cancels any tenant's tasks, submits into any tenant, and never claims or reports."""
    acme, beta, admin, h1 = scene.acme, scene.beta, scene.admin, scene.h1
    running, lease = scene.running(h1)
    # Given task X of acme and task Y of beta, both queued
    x, y = scene.submit(acme), scene.submit(beta)

    # When an admin lists tasks and cancels X
    listed = {t["id"] for t in admin.all_tasks(status="queued")}
    cancelled = admin.cancel(x["id"], expect=200)

    # Then the list holds X and Y, and X is cancelled
    assert {x["id"], y["id"]} <= listed
    assert cancelled["status"] == "cancelled"
    # And an admin submits into a named tenant, or into "default"
    assert scene.submit(admin, tenant=beta.tenant)["tenant"] == beta.tenant
    assert scene.submit(admin)["tenant"] == "default"
    # And an admin's claim for h1, or result for an attempt, is forbidden
    admin.claim(h1.id, expect=(403, "forbidden"))
    admin.report(running["id"], 1, lease.lease_id, "done", expect=(403, "forbidden"))
    admin.renew(running["id"], 1, lease.lease_id, expect=(403, "forbidden"))
    assert acme.get_task(running["id"])["status"] == "dispatched"


@pytest.mark.req("TENANCY")
def test_a_host_reads_only_tasks_it_held_an_attempt_of(scene):
    """A host reads a task it holds (200); another host, and tasks it never held, are 404 to it."""
    h1, h2 = scene.h1, scene.h2
    task, _ = scene.running(h1)
    other = scene.submit()
    assert h1.read_task(task["id"])["id"] == task["id"]
    h2.read_task(task["id"], expect=(404, "not_found"))
    h1.read_task(other["id"], expect=(404, "not_found"))
    h1.caller.list_tasks(expect=(403, "forbidden"))


# ---------------------------------------------------------------------------------------
# HISTORY


@pytest.mark.req("HISTORY/s1")
def test_history_lists_every_recorded_event_in_order(scene):
    """A full life: ten events, seq 1 to 10, times never decreasing, nothing for renewals or a repeated start."""
    acme, h1, h2, clock = scene.acme, scene.h1, scene.h2, scene.clock
    # Given X submitted, claimed by h1, started, renewed twice, expired and requeued,
    task, lease1 = scene.running(h1, lease_seconds=clock.short_lease)
    h1.renew(lease1)
    h1.renew(lease1)
    clock.run_out(lease1)
    # claimed by h2, started twice, cancelled, delivered at h2's renewal, and reported cancelled
    h2.register(scene.device("emulator-5570"))
    lease2 = h2.claim()
    h2.start(lease2)
    h2.start(lease2)
    acme.cancel(task["id"], expect=202)
    assert h2.renew(lease2)["cancel_requested"] is True
    h2.report(lease2, "cancelled")

    # When its client reads X's history
    events = acme.history(task["id"])

    # Then the events are these ten, numbered 1 to 10, in order of time
    assert [(e["seq"], e["type"]) for e in events] == list(
        enumerate(
            [
                "submitted",
                "assigned",
                "dispatched",
                "lease_expired",
                "requeued",
                "assigned",
                "dispatched",
                "cancellation_requested",
                "cancellation_delivered",
                "ended",
            ],
            start=1,
        )
    )
    assert events[-1]["data"]["status"] == "cancelled"
    assert events[-1]["data"]["reason"] == "reported"
    times = [ms(e["at"]) for e in events]
    assert times == sorted(times)
    # And a refused request, a repeated cancel and an identical repeated result record nothing
    acme.cancel(task["id"], expect=200)
    h2.report(lease2, "cancelled")
    h2.renew(lease2, expect=(409, "lease_ended"))
    assert acme.history(task["id"]) == events


@pytest.mark.req("HISTORY")
def test_history_is_for_clients_of_the_tenant_and_admins(scene):
    """An admin reads any task's history; a host may not read histories (403)."""
    task = scene.submit()
    assert scene.admin.history(task["id"]) == scene.acme.history(task["id"])
    scene.h1.caller.history(task["id"], expect=(403, "forbidden"))


# ---------------------------------------------------------------------------------------
# CLOCK


@pytest.mark.req("CLOCK/s1")
def test_server_time_never_goes_backwards_and_has_the_wire_form(scene):
    """Times of one task's life never decrease, and every time on the wire so far had the form."""
    acme, h1, clock = scene.acme, scene.h1, scene.clock
    # Given a task submitted, claimed, started, renewed and reported, with time passing in between
    seen = []
    task, lease = scene.running(h1, start=False)
    seen.append(task["created_at"])
    for step in (lambda: h1.start(lease), lambda: h1.renew(lease), lambda: h1.report(lease, "done")):
        clock.advance(1.5)
        step()
        current = acme.get_task(task["id"])
        seen.append(current["updated_at"])
    ended = acme.get_task(task["id"])
    attempt = ended["attempts"][0]

    # Then the times of its life never go backwards
    life = [ended["created_at"], attempt["assigned_at"], attempt["dispatched_at"], attempt["ended_at"]]
    assert [ms(t) for t in life] == sorted(ms(t) for t in life)
    assert [ms(t) for t in seen] == sorted(ms(t) for t in seen)
    assert ms(ended["result"]["recorded_at"]) == ms(attempt["ended_at"])
    # And every time on the wire, in this test and before it, had the form YYYY-MM-DDTHH:MM:SS.mmmZ
    for text in life + seen:
        assert WIRE_TIME.match(text), text
    assert scene.connection.bad_times == []


@pytest.mark.req("CLOCK/s1")
def test_the_clock_resumes_after_a_restart(scene):
    """After a restart, times continue from where they stood: a manual clock resumes, system time never goes back."""
    if not scene.target.can_restart:
        pytest.skip("restarting the target needs --restart-command CMD (or the suite's own server)")
    acme, clock = scene.acme, scene.clock
    # Given a store whose last recorded time is T
    last = scene.submit()["created_at"]

    # When the server restarts
    scene.target.restart()

    # Then a manual clock resumes where it stood, and a new task is never older than T
    if clock.manual:
        before = clock.now()
        clock.advance(1.5)
        assert clock.now() == before + 1500
    else:
        time.sleep(0.01)
    assert ms(scene.submit(acme)["created_at"]) >= ms(last)


@pytest.mark.req("CLOCK")
def test_the_clock_endpoint_exists_only_with_a_manual_clock(scene):
    """Manual clock: advance_seconds must be > 0 (else 400). Without one: 404."""
    admin, clock = scene.admin, scene.clock
    if clock.manual:
        admin.advance_clock(0, expect=(400, "invalid_request"))
        admin.advance_clock(-1, expect=(400, "invalid_request"))
        before = clock.now()
        clock.advance(0.25)
        assert clock.now() == before + 250
    else:
        admin.advance_clock(1, expect=(404, "not_found"))


@pytest.mark.req("CLOCK/s2")
def test_only_an_admin_may_call_the_clock_endpoint_whatever_the_clock(scene):
    """A client or a host is 403 on POST /v1/admin/clock, manual clock or not; no token is 401."""
    clock = scene.clock
    anonymous = scene.connection.caller(None, "no token")
    for caller in (scene.acme, scene.beta, scene.h1.caller):
        # A well-formed advance and a malformed one alike: the role is checked before the body
        caller.advance_clock(1, expect=(403, "forbidden"))
        caller.call("POST", "/v1/admin/clock", {"advance_seconds": "soon"}, expect=(403, "forbidden"))
    anonymous.advance_clock(1, expect=(401, "unauthorized"))
    # And an admin's advance works with a manual clock, and is 404 without one
    if clock.manual:
        before = clock.now()
        clock.advance(0.001)
        assert clock.now() == before + 1
    else:
        scene.admin.advance_clock(1, expect=(404, "not_found"))
