"""The agent through the real Debian `adb` server, `adb connect`ed to the simulated adbd.

Skipped with a reason when `adb` is not on PATH; with AMC_REQUIRE_ADB=1 they fail instead.
"""

from __future__ import annotations

import re
import time

import pytest

from tests.agent.helpers import device_commands, eventually, outcomes, shell, tap

req = pytest.mark.req

DUMP = re.compile(r"^uiautomator dump (\S+) && cat \1 && rm -f \1$")


@pytest.fixture
def connected(real_adb, make_sim):
    """A simulated device connected to the real adb server: (simulator, its adb serial)."""
    sim = make_sim("amc-sim-01")
    serial = real_adb.connect(sim.device_ports["amc-sim-01"])
    yield sim, serial
    real_adb.run("disconnect", serial)


def test_a_plan_runs_through_the_real_adb_server(real_adb, connected, server, make_agent):
    sim, serial = connected
    make_agent(server.url, real_adb.port)
    eventually(lambda: server.admin.serials("h1"), what="the device registered")
    host = server.admin.host("h1")
    assert host["devices"][0]["serial"] == serial
    assert host["devices"][0]["attributes"]["model"] == "Pixel 7"
    plan = {"steps": [tap("a", 5, 6), shell("b", "echo real"), {"id": "c", "action": "screenshot", "args": {}}]}
    task_id = server.api.submit(plan)["id"]

    task = server.api.wait_status(task_id)

    assert task["status"] == "done", task
    assert task["attempts"][0]["device"] == serial
    assert task["result"]["steps"][1]["output"] == "real\n"
    (shot,) = task["result"]["steps"][2]["artifacts"]
    assert server.api.download(task_id, shot).content.startswith(b"\x89PNG\r\n\x1a\n")
    assert [DUMP.sub("uiautomator dump", c) for c, _ in device_commands(sim, "amc-sim-01")] == [
        "input tap 5 6",
        "echo real",
        # The screenshot: a dump, the raw frame (exec:), a dump that agrees.
        "uiautomator dump",
        "screencap",
        "uiautomator dump",
    ]
    assert {r.via for r in sim.log("amc-sim-01")} == {"adbd"}  # it really went through adb


@req("CANCEL-OUTCOME/s1", "AGENT-STEPS/s2")
def test_a_cancellation_through_the_real_adb_server_interrupts_the_running_step(
    real_adb, connected, server, make_agent
):
    sim, serial = connected
    make_agent(server.url, real_adb.port, lease_seconds=1.5)
    eventually(lambda: server.admin.serials("h1") == [serial], what="the device registered")
    task_id = server.api.submit({"steps": [tap("a"), shell("b", "sleep 30"), tap("c")]})["id"]
    eventually(lambda: any(c == "sleep 30" for c, _ in device_commands(sim, "amc-sim-01")), what="b running")

    cancelled_at = time.monotonic()
    server.api.cancel(task_id)
    task = server.api.wait_status(task_id)

    assert time.monotonic() - cancelled_at < 0.5 + 1.5
    assert task["status"] == "cancelled"
    assert outcomes(task["result"]["steps"]) == [
        ("a", "completed", None),
        ("b", "interrupted", "cancelled"),
        ("c", "not_started", "cancelled"),
    ]
    commands = device_commands(sim, "amc-sim-01")
    assert commands[1][0] == "sleep 30" and commands[1][1] in ("interrupted", "killed")
    assert commands[2][0].startswith("pkill -f") and len(commands) == 3


@req("AGENT-DRAIN/s3")
def test_a_forced_stop_through_the_real_adb_server_interrupts_and_releases(real_adb, connected, server, make_agent):
    sim, serial = connected
    agent = make_agent(server.url, real_adb.port, lease_seconds=1.5)
    eventually(lambda: server.admin.serials("h1") == [serial], what="the device registered")
    task_id = server.api.submit({"steps": [tap("a"), shell("b", "sleep 30"), tap("c")]})["id"]
    eventually(lambda: any(c == "sleep 30" for c, _ in device_commands(sim, "amc-sim-01")), what="b running")

    agent.agent.request_stop()  # the drain: b goes on
    time.sleep(0.5)
    assert server.api.status(task_id) == "dispatched"
    agent.stop(force=True)  # the second signal

    task = server.api.task(task_id)
    assert task["status"] == "queued" and task["result"] is None
    (attempt,) = task["attempts"]
    assert attempt["outcome"] == "released"
    assert outcomes(attempt["steps"]) == [
        ("a", "completed", None),
        ("b", "interrupted", "host_stopping"),
        ("c", "not_started", "host_stopping"),
    ]
    commands = device_commands(sim, "amc-sim-01")
    assert commands[1][0] == "sleep 30" and commands[1][1] in ("interrupted", "killed")
