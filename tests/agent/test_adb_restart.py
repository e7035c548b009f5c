"""The adb server restarts under a running step: the real Debian adb server, the simulator as its device.

In a module of its own: the module's `real_adb` server is killed and started again here.
Skipped with a reason when `adb` is not on PATH; with AMC_REQUIRE_ADB=1 it fails instead.
"""

from __future__ import annotations

import pytest

from tests.agent.helpers import eventually, outcomes, shell, tap, wait_running
from tests.support.waiting import port_open

req = pytest.mark.req


@req("AGENT-FAULT/s3", "AGENT-DRAIN/s4", "AGENT-STEPS/s2")
def test_an_adb_restart_mid_step_is_reported_truthfully_and_the_device_comes_back(
    real_adb, make_sim, server, make_agent
):
    sim = make_sim("amc-sim-01")
    device_port = sim.device_ports["amc-sim-01"]
    serial = real_adb.connect(device_port)
    agent = make_agent(server.url, real_adb.port, lease_seconds=3.0)
    eventually(lambda: server.admin.serials("h1") == [serial], what="the device registered")
    task_id = server.api.submit({"steps": [tap("a"), shell("b", "sleep 5"), tap("c")]})["id"]
    wait_running(sim, "amc-sim-01", "sleep 5")

    real_adb.run("kill-server")  # the step's connection to the device goes with it
    eventually(lambda: not port_open(real_adb.port), what="the adb server gone")
    first = agent.record(task_id, timeout=15)

    # The step in flight is not known to have completed: interrupted, with the reason; the
    # attempt is given back (the device went away), so the task is not failed for it.
    assert (first.attempt, first.status) == (1, "released")
    assert first.body["reason"] == "device_lost"
    steps = outcomes(first.body["steps"])
    assert steps[0] == ("a", "completed", None)
    assert steps[1][:2] == ("b", "interrupted") and "adb" in steps[1][2]
    assert steps[2] == ("c", "not_started", "device_lost")
    assert server.api.task(task_id)["attempts"][0]["outcome"] == "released"

    # adb comes back and sees the device again (`adb connect`, as a phone plugged in again).
    started = real_adb.run("start-server")
    assert started.returncode == 0, started
    real_adb.connect(device_port)

    # The agent finds the device again, registers it, and runs the task again, then another.
    task = server.api.wait_status(task_id, timeout=30)
    assert task["status"] == "done"
    assert [(a["host_id"], a["device"], a["outcome"]) for a in task["attempts"]] == [
        ("h1", serial, "released"),
        ("h1", serial, "done"),
    ]
    later = server.api.submit({"steps": [shell("after", "echo back")]})["id"]
    assert server.api.wait_status(later, timeout=15)["status"] == "done"
    assert server.admin.serials("h1") == [serial]
