"""Pausing a running plan: the real server, the Host Agent and the device simulator.

A pause is posted while a long step runs; the agent admits it at the next boundary, sends
nothing more to the device, and keeps renewing its lease until a resume (or a stop).
"""

from __future__ import annotations

import time

import pytest

from tests.agent.helpers import commands, device_commands, device_log, echo, eventually, outcomes, shell, wait_running

req = pytest.mark.req

LEASE = 1.5  # renewals every 0.5 s
LONG = "sleep 3"  # the step during which the pause is posted: several renewals long
SERIAL = "amc-sim-01"


def renewals(server, task_id: str) -> int:
    return server.api.task(task_id)["attempts"][0]["renewals"]


def paused_during_a(server, sim, task_id: str) -> dict:
    """Post a pause while step `a` runs; wait until the agent admitted it (before `b`)."""
    wait_running(sim, SERIAL, LONG)
    pause = server.api.post_message(task_id, "pause")
    admitted = server.api.wait_message(task_id, pause["id"], "admitted", timeout=20)
    assert admitted["boundary"] == {"before_step": "b"}
    return admitted


def renewed_for(server, task_id: str, times: int) -> None:
    """Wait (generously) until the attempt was renewed `times` more times."""
    start = renewals(server, task_id)
    eventually(lambda: renewals(server, task_id) >= start + times, 10 + times, what=f"{times} more renewals")


@req("PAUSE/s1")
def test_a_paused_attempt_starts_no_step_and_keeps_its_lease_until_resumed(server, sim, make_agent):
    agent = make_agent(server.url, sim.server_port, lease_seconds=LEASE)
    task_id = server.api.submit({"steps": [shell("a", LONG), echo("b"), echo("c")]})["id"]

    pause = paused_during_a(server, sim, task_id)
    task = server.api.task(task_id)
    assert (task["status"], task["paused"]) == ("dispatched", True)
    renewed_for(server, task_id, 8)  # over two lease periods: the lease stays live while paused

    task = server.api.task(task_id)
    assert (task["status"], task["paused"], task["attempts"][0]["outcome"]) == ("dispatched", True, None)
    assert device_commands(sim, SERIAL) == [(LONG, "completed")]  # a ended on its own terms; b never began
    resumed_at = time.time()
    resume = server.api.post_message(task_id, "resume")
    done = server.api.wait_status(task_id)

    assert done["status"] == "done" and done["paused"] is False and len(done["attempts"]) == 1
    assert commands(sim, SERIAL) == [LONG, "echo b", "echo c"]
    assert all(r.started_at >= resumed_at for r in device_log(sim, SERIAL)[1:])  # nothing ran while paused
    assert outcomes(done["result"]["steps"]) == [(i, "completed", None) for i in "abc"]
    assert done["result"]["metadata"]["pauses"] == [
        {"message_id": pause["id"], "before_step": "b", "resumed_by": resume["id"]}
    ]
    for message_id in (pause["id"], resume["id"]):
        assert server.api.message(task_id, message_id)["state"] == "completed"
    assert server.api.message(task_id, resume["id"])["boundary"] == {"before_step": "b"}
    assert [(s.message_id, s.state) for s in agent.record(task_id).acknowledgements] == [
        (pause["id"], "admitted"),
        (resume["id"], "admitted"),
        (resume["id"], "completed"),
        (pause["id"], "completed"),
    ]


@req("PAUSE/s3")
def test_a_pause_holds_across_renewals_and_a_server_restart_until_its_resume(
    make_server, sim, make_agent, proxy_to, tmp_path
):
    server = make_server(data=tmp_path / "store")
    proxy = proxy_to(server.port)  # the agent keeps one address while the server moves
    lease = 6.0  # a restart takes well under the four seconds the lease has left after a renewal
    make_agent(proxy.url, sim.server_port, lease_seconds=lease)
    task_id = server.api.submit({"steps": [shell("a", LONG), echo("b"), echo("c")]})["id"]
    paused_during_a(server, sim, task_id)
    renewed_for(server, task_id, 2)

    server.restart()
    proxy.retarget(server.port)
    renewed_for(server, task_id, 3)

    task = server.api.task(task_id)
    assert (task["status"], task["paused"], len(task["attempts"])) == ("dispatched", True, 1)
    assert commands(sim, SERIAL) == [LONG]
    server.api.post_message(task_id, "resume")
    done = server.api.wait_status(task_id, timeout=30)
    assert done["status"] == "done" and done["paused"] is False and len(done["attempts"]) == 1
    assert commands(sim, SERIAL) == [LONG, "echo b", "echo c"]


@req("PAUSE/s1", "AGENT-STOP-REASON/s1")
def test_a_cancel_ends_a_paused_attempt_as_cancelled(server, sim, make_agent):
    agent = make_agent(server.url, sim.server_port, lease_seconds=LEASE)
    task_id = server.api.submit({"steps": [shell("a", LONG), echo("b"), echo("c")]})["id"]
    pause = paused_during_a(server, sim, task_id)

    assert server.api.cancel(task_id, expect=202)
    task = server.api.wait_status(task_id)

    assert task["status"] == "cancelled" and task["cancellation"]["state"] == "completed"
    assert outcomes(task["result"]["steps"]) == [
        ("a", "completed", None),
        ("b", "not_started", "paused"),
        ("c", "not_started", "paused"),
    ]
    metadata = task["result"]["metadata"]
    assert metadata["stop_reason"] == "cancelled"
    assert metadata["pauses"] == [{"message_id": pause["id"], "before_step": "b", "resumed_by": None}]
    assert commands(sim, SERIAL) == [LONG]
    assert agent.record(task_id).answer == 200
