"""Lease renewal, lease loss and the retried report, over real sockets (some through a TCP proxy)."""

from __future__ import annotations

import time

import pytest

from amc.core.times import from_rfc3339
from tests.agent.helpers import device_commands, device_log, eventually, outcomes, shell, tap

req = pytest.mark.req

PLAN_ABC = {"steps": [tap("a"), shell("b", "sleep 2"), tap("c")]}


def test_renewals_keep_a_lease_alive_through_a_plan_longer_than_the_lease(server, sim, make_agent):
    # The lease is generous enough that a loaded machine's scheduling hiccup cannot lose it; the
    # step still outlasts it more than twice over, so only renewals can carry the attempt through.
    make_agent(server.url, sim.server_port, lease_seconds=1.5)
    task_id = server.api.submit({"steps": [shell("long", "sleep 3.5"), tap("after")]})["id"]

    task = server.api.wait_status(task_id, timeout=20)

    assert task["status"] == "done", task.get("result")
    attempt = task["attempts"][0]
    assert len(task["attempts"]) == 1 and attempt["outcome"] == "done"
    assert attempt["renewals"] >= 5  # 3.5 s at one renewal per 0.5 s


@req("CANCEL-OUTCOME/s2", "AGENT-STOP-REASON/s2")
def test_an_unreachable_server_past_the_expiry_is_lease_loss_and_another_host_finishes(
    server, make_sim, make_agent, proxy_to
):
    sim1, sim2 = make_sim("dev-h1"), make_sim("dev-h2")
    proxy = proxy_to(server.port)
    h1 = make_agent(proxy.url, sim1.server_port, "h1", lease_seconds=1.0)
    task_id = server.api.submit(PLAN_ABC)["id"]
    eventually(lambda: any(c == "sleep 2" for c, _ in device_commands(sim1, "dev-h1")), what="b running on h1")

    proxy.pause()  # h1 can no longer reach the server: its renewals hang
    sleep = eventually(
        lambda: next((r for r in device_log(sim1, "dev-h1") if r.end != "running" and "sleep 2" in r.command), None),
        timeout=3,
        what="h1 stopping b",
    )
    queued = server.api.wait_status(task_id, "queued", timeout=3)  # the server expired attempt 1
    h2 = make_agent(server.url, sim2.server_port, "h2", lease_seconds=1.0)
    task = server.api.wait_status(task_id, timeout=10)
    proxy.resume()  # h1's report now gets through, and is refused
    record = h1.record(task_id)

    # h1 stopped on its own, before the server's expiry, and reported failed, not cancelled.
    assert sleep.end in ("interrupted", "killed")
    assert sleep.ended_at * 1000 <= from_rfc3339(queued["attempts"][0]["lease_expires_at"]) + 200
    assert record.status == "failed" and record.body["metadata"]["stop_reason"] == "lease_lost"
    assert outcomes(record.body["steps"]) == [
        ("a", "completed", None),
        ("b", "interrupted", "lease_lost"),
        ("c", "not_started", "lease_lost"),
    ]
    assert (record.answer, record.code) == (409, "lease_replaced")
    assert [c for c, _ in device_commands(sim1, "dev-h1")][:2] == ["input tap 10 20", "sleep 2"]
    assert "input tap 10 20" not in [c for c, _ in device_commands(sim1, "dev-h1")][2:]  # c never ran on h1
    # The task was requeued and h2 ran it to the end.
    assert task["status"] == "done"
    assert [(a["host_id"], a["outcome"]) for a in task["attempts"]] == [("h1", "expired"), ("h2", "done")]
    assert outcomes(task["result"]["steps"]) == [(s, "completed", None) for s in "abc"]
    assert [c for c, _ in device_commands(sim2, "dev-h2")] == ["input tap 10 20", "sleep 2", "input tap 10 20"]
    assert [r.task_id for r in h2.records] == [task_id]


@req("AGENT-STOP-REASON/s2")
def test_a_409_on_renewal_is_lease_loss(make_server, sim, make_agent):
    server = make_server(manual_clock=True)  # time moves only when the test says so
    agent = make_agent(server.url, sim.server_port, lease_seconds=1.5)
    task_id = server.api.submit({"steps": [tap("a"), shell("b", "sleep 30"), tap("c")]}, max_attempts=1)["id"]
    eventually(lambda: any(c == "sleep 30" for c, _ in device_commands(sim, "amc-sim-01")), what="b running")

    server.admin.advance(2)  # the server expires the lease; the agent learns it at its next renewal
    record = agent.record(task_id, timeout=5)

    assert record.status == "failed"
    assert record.body["metadata"]["stop_detail"] == "the renewal was refused: lease_expired"
    assert outcomes(record.body["steps"]) == [
        ("a", "completed", None),
        ("b", "interrupted", "lease_lost"),
        ("c", "not_started", "lease_lost"),
    ]
    assert (record.answer, record.code) == (409, "lease_expired")  # logged, not retried
    assert record.tries == 1
    task = server.api.task(task_id)
    assert (task["status"], task["result"]["reason"]) == ("failed", "attempts_exhausted")
    commands = device_commands(sim, "amc-sim-01")
    assert commands[1][0] == "sleep 30" and commands[1][1] in ("interrupted", "killed")
    assert [c for c, _ in commands].count("input tap 10 20") == 1


@req("AGENT-RETRY/s1")
def test_a_report_whose_response_was_lost_is_retried_with_the_identical_body(server, sim, make_agent, proxy_to):
    proxy = proxy_to(server.port)
    proxy.drop_response(b"/result")  # the first report reaches the server; its answer is lost
    agent = make_agent(proxy.url, sim.server_port)
    task_id = server.api.submit({"steps": [tap("a"), shell("b", "echo hi")]})["id"]

    record = agent.record(task_id)

    assert proxy.dropped == 1
    assert (record.status, record.answer, record.tries) == ("done", 200, 2)
    task = server.api.task(task_id)
    assert task["status"] == "done" and len(task["attempts"]) == 1
    # The retry was answered with what the first request recorded: the same steps, once.
    assert task["result"]["steps"] == record.body["steps"]
    assert task["result"]["metadata"] == record.body["metadata"]
    assert [e["type"] for e in server.api.history(task_id)].count("ended") == 1
    assert task["attempts"][0]["ended_at"] == task["result"]["recorded_at"]
    time.sleep(0.3)  # and nothing more is sent for the attempt
    assert agent.record(task_id).tries == 2
