"""Every plan action through ppadb against the simulator; the device log shows what was sent."""

from __future__ import annotations

import socket

import pytest

from amc.adapters.adb.client import BoundedClient
from amc.adapters.adb.discovery import list_serials
from amc.adapters.adb.errors import DeviceUnavailable, StepFailed
from amc.adapters.adb.executor import AdbExecutor

from .helpers import SERIAL


def shell_commands(sim, serial=SERIAL):
    return sim.commands(serial)


def test_actions_send_exact_commands_in_order(executor, sim):
    executor.run("tap", {"x": 540, "y": 1200})
    executor.run("swipe", {"x1": 100, "y1": 2000, "x2": 100, "y2": 400, "duration_ms": 300})
    executor.run("swipe", {"x1": 1, "y1": 2, "x2": 3, "y2": 4})
    executor.run("text", {"text": "hello world"})
    executor.run("keyevent", {"key": "HOME"})
    executor.run("keyevent", {"key": 4})
    executor.run("launch", {"package": "com.example.app", "activity": ".MainActivity"})
    executor.run("launch", {"package": "com.android.settings"})
    executor.run("wait", {"seconds": 0.01})
    assert shell_commands(sim) == [
        "input tap 540 1200",
        "input swipe 100 2000 100 400 300",
        "input swipe 1 2 3 4",
        "input text hello%sworld",
        "input keyevent KEYCODE_HOME",
        "input keyevent 4",
        "am start -n com.example.app/.MainActivity",
        "monkey -p com.android.settings -c android.intent.category.LAUNCHER 1",
    ]
    device = sim.device(SERIAL)
    assert device.input_events == [
        "tap 540 1200",
        "swipe 100 2000 100 400 300",
        "swipe 1 2 3 4",
        "text hello world",
        "keyevent 3",
        "keyevent 4",
    ]
    assert device.foreground == "com.android.settings/.Settings"
    assert all(record.end == "completed" for record in sim.log(SERIAL))


def test_result_records(executor):
    tap = executor.run("tap", {"x": 1, "y": 2})
    assert (tap.action, tap.output, tap.artifact, tap.commands) == ("tap", "", None, ("input tap 1 2",))
    launch = executor.run("launch", {"package": "com.example.app", "activity": ".DetailActivity"})
    assert launch.output == "Starting: Intent { cmp=com.example.app/.DetailActivity }\n"


def test_text_with_shell_metacharacters(executor, sim):
    tricky = 'it\'s "fine" & $HOME; (ok)'
    result = executor.run("text", {"text": tricky})
    assert result.commands == ("input text 'it'\"'\"'s%s\"fine\"%s&%s$HOME;%s(ok)'",)
    assert sim.device(SERIAL).typed_text == tricky


def test_shell_returns_output_and_exit_status(executor, sim):
    result = executor.run("shell", {"command": "getprop ro.product.model; echo 'a  b'"})
    assert result.output == "Pixel 7\na  b\n"
    assert result.exit_status == 0
    (command,) = shell_commands(sim)
    assert command.startswith("sh -c 'getprop ro.product.model; echo '\"'\"'a  b'\"'\"'' amc-step-")


def test_shell_failure_carries_status_and_output(executor):
    with pytest.raises(StepFailed, match="exited with status 3") as caught:
        executor.run("shell", {"command": "echo partial; exit 3"})
    assert caught.value.output == "partial\n"
    with pytest.raises(StepFailed, match="status 127"):
        executor.run("shell", {"command": "no-such-tool"})


def test_shell_non_utf8_output_is_a_failure(executor):
    with pytest.raises(StepFailed, match="non-UTF-8"):
        executor.run("shell", {"command": "amc-sim-bytes 41 ff fe 42"})


def test_launch_failures_are_detected_from_the_output(executor):
    with pytest.raises(StepFailed, match="No activities found"):
        executor.run("launch", {"package": "com.not.installed"})
    with pytest.raises(StepFailed, match="does not exist"):
        executor.run("launch", {"package": "com.example.app", "activity": ".Missing"})


@pytest.mark.parametrize(
    "action, args, message",
    [
        ("fly", {}, "unknown action"),
        ("tap", {"x": 1}, "missing argument 'y'"),
        ("tap", {"x": "1; reboot", "y": 2}, "non-negative integer"),
        ("text", {"text": 42}, "must be str"),
        ("text", {"text": "naïve"}, "printable ASCII"),
        ("shell", {"command": "true", "timeout_seconds": 0}, "positive number"),
        ("wait", {"seconds": -1}, "non-negative"),
        ("launch", {"package": "x; reboot"}, "not a package name"),
    ],
)
def test_bad_arguments_fail_before_anything_is_sent(executor, sim, action, args, message):
    with pytest.raises(StepFailed, match=message):
        executor.run(action, args)
    assert sim.log(SERIAL) == []


def test_offline_device_is_unavailable(make_executor, sim):
    sim.set_state("amc-sim-02", "offline")
    with pytest.raises(DeviceUnavailable, match="device offline"):
        make_executor("amc-sim-02").run("tap", {"x": 1, "y": 1})
    with pytest.raises(DeviceUnavailable, match="not found"):
        make_executor("nosuch").run("shell", {"command": "true"})


def test_unreachable_adb_server_is_unavailable(tmp_path):
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = BoundedClient("127.0.0.1", port)
    with pytest.raises(DeviceUnavailable, match="adb server unreachable"):
        AdbExecutor(client, SERIAL, artifacts_dir=tmp_path).run("tap", {"x": 1, "y": 1})
    with pytest.raises(DeviceUnavailable, match="adb server unreachable"):
        list_serials(client)
