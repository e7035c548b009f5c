"""Cancellation reaches the running agent at its next renewal and stops it at a step boundary."""

from __future__ import annotations

import time

import pytest

from amc.core.times import from_rfc3339
from tests.agent.helpers import device_commands, device_log, eventually, outcomes, shell, tap

req = pytest.mark.req

LEASE = 1.5  # renewals every 0.5 s
INTERVAL = LEASE / 3


@req("CANCEL-QUEUED/s1")
def test_a_task_cancelled_while_queued_is_never_run(server, sim, make_agent):
    agent = make_agent(server.url, sim.server_port)
    busy = server.api.submit({"steps": [shell("hold", "sleep 1")]})["id"]
    eventually(lambda: device_log(sim, "amc-sim-01"), what="the first task running")
    queued = server.api.submit({"steps": [tap("never")]})["id"]

    answer = server.api.cancel(queued, expect=200)

    assert answer["status"] == "cancelled"
    assert server.api.wait_status(busy)["status"] == "done"
    time.sleep(2 * 0.5)  # two more claim rounds of the now idle device
    task = server.api.task(queued)
    assert task["attempts"] == [] and task["attempt"] is None
    assert [c for c, _ in device_commands(sim, "amc-sim-01")] == ["sleep 1"]
    assert [r.task_id for r in agent.records] == [busy]


@req("CANCEL-INFLIGHT/s2", "LEASE-RENEW/s3", "AGENT-STEPS/s2", "CANCEL-OUTCOME/s1")
@pytest.mark.parametrize(
    "long_step",
    [
        shell("b", "sleep 30"),
        {"id": "b", "action": "wait", "args": {"seconds": 30}},
    ],
    ids=["shell", "wait"],
)
def test_a_long_running_step_is_interrupted_by_a_cancellation(server, sim, make_agent, long_step):
    agent = make_agent(server.url, sim.server_port, lease_seconds=LEASE)
    task_id = server.api.submit({"steps": [tap("a"), long_step, tap("c")]})["id"]
    server.api.wait_status(task_id, "dispatched")
    eventually(
        lambda: len(device_log(sim, "amc-sim-01")) == 1 + (long_step["action"] == "shell"), what="step b running"
    )
    time.sleep(0.3)

    cancelled_at = time.time()
    assert server.api.cancel(task_id, expect=202)
    task = server.api.wait_status(task_id)
    stopped_in = time.time() - cancelled_at

    assert task["status"] == "cancelled" and task["cancellation"]["state"] == "completed"
    steps = task["result"]["steps"]
    assert outcomes(steps) == [
        ("a", "completed", None),
        ("b", "interrupted", "cancelled"),
        ("c", "not_started", "cancelled"),
    ]
    assert "started_at" in steps[1] and "started_at" not in steps[2]
    assert task["result"]["metadata"]["stop_reason"] == "cancelled"
    # Delivered by the next renewal, one interval at most after the request.
    delivered = from_rfc3339(task["cancellation"]["delivered_at"]) - from_rfc3339(task["cancellation"]["requested_at"])
    assert delivered <= INTERVAL * 1000 + 250
    assert stopped_in < INTERVAL + 1.5
    assert server.admin.host("h1")["devices"][0]["reservation"] is None  # the device is free
    commands = device_commands(sim, "amc-sim-01")
    if long_step["action"] == "shell":  # stopped on the device too, and c never sent
        assert commands[0] == ("input tap 10 20", "completed")
        assert commands[1][0] == "sleep 30" and commands[1][1] in ("interrupted", "killed")
        assert commands[2][0].startswith("pkill -f") and len(commands) == 3
    else:
        assert commands == [("input tap 10 20", "completed")]
    assert agent.record(task_id).answer == 200


@req("AGENT-STOP-REASON/s1", "AGENT-STEPS/s1")
def test_a_cancellation_mid_plan_stops_before_the_next_step(server, sim, make_agent):
    make_agent(server.url, sim.server_port, lease_seconds=LEASE)
    plan = {"steps": [shell(f"s{i:02d}", "sleep 0.1") for i in range(40)]}
    task_id = server.api.submit(plan)["id"]
    eventually(lambda: len(device_log(sim, "amc-sim-01")) >= 4, what="a few steps done")

    cancelled_at = time.time()
    server.api.cancel(task_id)
    task = server.api.wait_status(task_id)

    assert task["status"] == "cancelled"
    steps = task["result"]["steps"]
    statuses = [s["status"] for s in steps]
    ran = [s for s in steps if s["status"] != "not_started"]
    # A prefix ran (the last of it perhaps interrupted); everything after is not_started, cancelled.
    assert statuses == ["completed"] * statuses.count("completed") + ["interrupted"] * statuses.count("interrupted") + [
        "not_started"
    ] * statuses.count("not_started")
    assert statuses.count("interrupted") <= 1 and 4 <= len(ran) < 40
    assert all(s.get("reason") == "cancelled" and "started_at" not in s for s in steps[len(ran) :])
    # Truthful: each completed step completed on the device, and nothing after the stop was sent.
    log = [r for r in device_log(sim, "amc-sim-01") if not r.command.startswith("pkill")]
    assert len(log) == len(ran)
    for step, record in zip(ran, log):
        if step["status"] == "completed":
            assert record.end == "completed"
    last_command = max(r.started_at for r in device_log(sim, "amc-sim-01"))
    assert last_command - cancelled_at < INTERVAL + 0.5


def test_a_cancellation_carried_by_the_start_answer_stops_before_the_first_step(server, sim, make_agent, proxy_to):
    proxy = proxy_to(server.port)
    proxy.hold(b"/start")  # the agent's start waits in the proxy while the task is cancelled
    agent = make_agent(proxy.url, sim.server_port, lease_seconds=LEASE)
    task_id = server.api.submit({"steps": [tap("a"), tap("b")]})["id"]
    server.api.wait_status(task_id, "assigned")
    eventually(lambda: proxy.held == 1, what="the start held")
    assert server.api.cancel(task_id, expect=202)

    proxy.release()
    task = server.api.wait_status(task_id)

    assert task["status"] == "cancelled"
    assert outcomes(task["result"]["steps"]) == [("a", "not_started", "cancelled"), ("b", "not_started", "cancelled")]
    assert device_log(sim, "amc-sim-01") == []
    assert agent.record(task_id).answer == 200
