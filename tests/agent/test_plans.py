"""Plans run to their end: the device gets the right commands in order, the report is true."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree

import pytest

from amc.core.times import from_rfc3339
from tests.agent.helpers import device_commands, device_log, eventually, outcomes, shell, tap

req = pytest.mark.req

DUMP = re.compile(r"^uiautomator dump (\S+) && cat \1 && rm -f \1$")


def test_a_plan_completes_and_the_device_received_its_commands_in_order(server, sim, make_agent):
    agent = make_agent(server.url, sim.server_port)
    plan = {
        "steps": [
            shell("probe", "getprop ro.product.model"),
            tap("tap", 540, 1200),
            {"id": "swipe", "action": "swipe", "args": {"x1": 1, "y1": 2, "x2": 3, "y2": 4, "duration_ms": 100}},
            {"id": "type", "action": "text", "args": {"text": "hi there"}},
            {"id": "home", "action": "keyevent", "args": {"key": "HOME"}},
            {"id": "open", "action": "launch", "args": {"package": "com.android.settings"}},
            {"id": "pause", "action": "wait", "args": {"seconds": 0.05}},
            {"id": "shot", "action": "screenshot", "args": {}},
        ]
    }
    task_id = server.api.submit(plan)["id"]

    task = server.api.wait_status(task_id)

    assert task["status"] == "done", task
    result = task["result"]
    assert outcomes(result["steps"]) == [(s["id"], "completed", None) for s in plan["steps"]]
    assert result["steps"][0]["output"] == "Pixel 7\n"
    times = [(from_rfc3339(s["started_at"]), from_rfc3339(s["ended_at"])) for s in result["steps"]]
    assert all(start <= end for start, end in times)
    assert all(times[i][1] <= times[i + 1][0] for i in range(len(times) - 1)), "steps overlap"
    assert [DUMP.sub("uiautomator dump", c) for c, _ in device_commands(sim, "amc-sim-01")] == [
        "getprop ro.product.model",
        "input tap 540 1200",
        "input swipe 1 2 3 4 100",
        "input text hi%sthere",
        "input keyevent KEYCODE_HOME",
        "monkey -p com.android.settings -c android.intent.category.LAUNCHER 1",
        # The screenshot: a dump, the raw frame (exec:), a dump that agrees.
        "uiautomator dump",
        "screencap",
        "uiautomator dump",
    ]
    (shot_id,) = result["steps"][-1]["artifacts"]
    assert server.api.download(task_id, shot_id).content.startswith(b"\x89PNG")
    assert "metadata" not in result or "artifacts" not in result["metadata"]  # no local paths any more
    assert sim.device("amc-sim-01").foreground.startswith("com.android.settings/")
    record = agent.record(task_id)
    assert (record.status, record.answer, record.tries) == ("done", 200, 1)
    assert server.admin.host("h1")["devices"][0]["reservation"] is None


def test_observation_steps_leave_a_ui_dump_and_a_logcat_excerpt(server, sim, make_agent):
    make_agent(server.url, sim.server_port)
    plan = {
        "steps": [
            {"id": "open", "action": "launch", "args": {"package": "com.android.settings"}},
            {"id": "ui", "action": "ui_dump", "args": {}},
            {"id": "log", "action": "logcat", "args": {"lines": 50}},
            {"id": "log-default", "action": "logcat", "args": {}},
        ]
    }
    task_id = server.api.submit(plan)["id"]

    task = server.api.wait_status(task_id)

    assert task["status"] == "done", task
    assert outcomes(task["result"]["steps"]) == [(s["id"], "completed", None) for s in plan["steps"]]
    stored = {a["step"]: server.api.download(task_id, a["id"]).content for a in server.api.artifacts(task_id)}
    assert set(stored) == {"ui", "log", "log-default"}
    root = ElementTree.fromstring(stored["ui"])
    assert root.tag == "hierarchy"
    assert "Network & internet" in [node.get("text") for node in root.iter("node")]
    assert {node.get("package") for node in root.iter("node")} == {"com.android.settings"}
    for step in ("log", "log-default"):
        assert re.search(r" I ActivityManager: Start proc \d+:com\.android\.settings/", stored[step].decode())
    commands = [command for command, _ in device_commands(sim, "amc-sim-01")]
    assert commands[0] == "monkey -p com.android.settings -c android.intent.category.LAUNCHER 1"
    assert commands[1].startswith("uiautomator dump /data/local/tmp/amc-ui-")
    assert commands[3:] == ["logcat -d -v threadtime -t 50", "logcat -d -v threadtime -t 200"]


def test_a_staged_plan_records_a_checkpoint_after_each_stage(server, sim, make_agent):
    make_agent(server.url, sim.server_port)
    plan = {
        "stages": [
            {"id": "login", "steps": [tap("a"), shell("b", "echo b")]},
            {"id": "check", "steps": [shell("c", "echo c")]},
        ]
    }
    task_id = server.api.submit(plan)["id"]

    task = server.api.wait_status(task_id)

    assert task["status"] == "done"
    assert task["result"]["metadata"]["checkpoints"] == ["login", "check"]
    assert [s["id"] for s in task["result"]["steps"]] == ["a", "b", "c"]
    assert [c for c, _ in device_commands(sim, "amc-sim-01")] == ["input tap 10 20", "echo b", "echo c"]


def test_a_failed_step_stops_the_plan(server, sim, make_agent):
    make_agent(server.url, sim.server_port)
    task_id = server.api.submit({"steps": [tap("a"), shell("b", "echo oops; exit 3"), tap("c")]})["id"]

    task = server.api.wait_status(task_id)

    assert task["status"] == "failed"
    steps = task["result"]["steps"]
    assert outcomes(steps) == [
        ("a", "completed", None),
        ("b", "failed", "command exited with status 3"),
        ("c", "not_started", "previous_step_failed"),
    ]
    assert steps[1]["output"] == "oops\n"
    assert task["result"]["metadata"]["stop_reason"] == "step_failed"
    assert len(device_log(sim, "amc-sim-01")) == 2  # c never reached the device


def test_a_step_the_policy_refuses_is_refused_and_never_sent(server, sim, make_agent):
    make_agent(server.url, sim.server_port, policy={"shell": {"deny": ["*reboot*"]}})
    task_id = server.api.submit({"steps": [tap("a"), shell("b", "echo hi; reboot"), tap("c")]})["id"]

    task = server.api.wait_status(task_id)

    assert task["status"] == "failed"
    steps = outcomes(task["result"]["steps"])
    assert steps[0] == ("a", "completed", None)
    assert steps[1][:2] == ("b", "refused") and "reboot" in steps[1][2]
    assert steps[2] == ("c", "not_started", "previous_step_refused")
    assert [c for c, _ in device_commands(sim, "amc-sim-01")] == ["input tap 10 20"]


def test_devices_run_attempts_in_parallel_one_attempt_per_device(server, make_sim, make_agent):
    sim = make_sim("amc-sim-01", "amc-sim-02", "amc-sim-03")
    make_agent(server.url, sim.server_port)
    eventually(lambda: len(server.admin.serials("h1")) == 3, what="three devices registered")
    task_ids = [server.api.submit({"steps": [shell("nap", "sleep 1")]})["id"] for _ in range(4)]

    tasks = [server.api.wait_status(task_id, timeout=20) for task_id in task_ids]

    assert [t["status"] for t in tasks] == ["done"] * 4
    devices = [t["attempts"][0]["device"] for t in tasks]
    assert sorted(set(devices)) == ["amc-sim-01", "amc-sim-02", "amc-sim-03"]
    naps = sorted((r.started_at, r.ended_at) for serial in sim.devices for r in device_log(sim, serial))
    assert len(naps) == 4
    # The first three ran side by side; the fourth waited for a free device.
    assert max(start for start, _ in naps[:3]) < min(end for _, end in naps[:3])
    for serial in sim.devices:  # never two attempts at once on one device
        spans = sorted((r.started_at, r.ended_at) for r in device_log(sim, serial))
        assert all(spans[i][1] <= spans[i + 1][0] for i in range(len(spans) - 1))


def test_the_host_registers_its_devices_and_follows_them_coming_and_going(server, make_sim, make_agent):
    sim = make_sim("amc-sim-01", "amc-sim-02")
    make_agent(server.url, sim.server_port)

    eventually(lambda: len(server.admin.serials("h1")) == 2, what="two devices registered")
    host = server.admin.host("h1")
    assert host["devices"][0] == {
        "serial": "amc-sim-01",
        "online": True,
        "reservation": None,
        "attributes": {"model": "Pixel 7", "manufacturer": "Google", "sdk": "34", "screen_size": "1080x2400"},
    }

    sim.set_state("amc-sim-02", "absent")
    eventually(lambda: server.admin.serials("h1") == ["amc-sim-01"], what="amc-sim-02 dropped")
    sim.set_state("amc-sim-02", "device")
    eventually(lambda: server.admin.serials("h1") == ["amc-sim-01", "amc-sim-02"], what="amc-sim-02 back")

    # The device that came back gets work again.
    task_id = server.api.submit({"steps": [tap("a")]}, requirements={"serial": "amc-sim-02"})["id"]
    assert server.api.wait_status(task_id)["status"] == "done"
