"""The simulated device's shell and programs, driven directly (no sockets)."""

from __future__ import annotations

import time

import pytest

from amc.sim.device import SimDevice
from amc.sim.programs.inputs import decode_input_text
from amc.sim.spec import SimDeviceSpec
from tests.support.waiting import eventually

from .helpers import BufferSink, run


def test_getprop_single_and_all(device):
    assert run(device, "getprop ro.product.model") == "Pixel 7\n"
    assert run(device, "getprop no.such.key") == "\n"
    listing = run(device, "getprop")
    assert "[ro.build.version.sdk]: [34]\n" in listing
    assert "[sys.boot_completed]: [1]\n" in listing


def test_quoting_and_parameter_expansion(device):
    assert run(device, "echo $HOME \"$HOME\" '$HOME' \\$HOME") == "/ / $HOME $HOME\n"
    assert run(device, "echo 'it'\\''s' \"a  b\"") == "it's a  b\n"


def test_lists_pipes_and_exit_status(device):
    assert run(device, "false; echo $?; true && echo yes || echo no") == "1\nyes\n"
    assert (
        run(device, "dumpsys activity top | grep ACTIVITY")
        == "  ACTIVITY com.android.launcher3/.Launcher 5f2a1b3 pid=12345\n"
    )
    assert run(device, "sh -c 'echo in; exit 3' tag; echo status:$?") == "in\nstatus:3\n"


def test_unknown_commands_and_syntax_errors_answer_like_a_shell(device):
    assert run(device, "frobnicate --now") == "/system/bin/sh: frobnicate: not found\n"
    assert run(device, "frobnicate 2>/dev/null; echo $?") == "127\n"
    assert "syntax error" in run(device, "echo 'unterminated")
    assert "not simulated" in run(device, "echo $(id)")
    assert device.log.records()[0].exit_status == 127


def test_timeout_stops_the_inner_command(device):
    started = time.monotonic()
    assert run(device, "timeout 0.2 sleep 10; echo $?") == "124\n"
    assert time.monotonic() - started < 1.0
    assert run(device, "timeout 5 echo quick; echo $?") == "quick\n0\n"


def test_input_and_activity_state(device):
    run(device, "input tap 540 1200")
    run(device, "input swipe 1 2 3 4 300")
    run(device, "input keyevent KEYCODE_HOME")
    assert device.input_events == ["tap 540 1200", "swipe 1 2 3 4 300", "keyevent 3"]
    assert "Starting: Intent" in run(device, "am start -n com.example.app/.MainActivity")
    assert device.foreground == "com.example.app/.MainActivity"
    assert "does not exist" in run(device, "am start -n com.example.app/.Missing")
    run(device, "am force-stop com.example.app")
    assert device.foreground == "com.android.launcher3/.Launcher"
    assert "Events injected: 1" in run(device, "monkey -p com.android.settings -c android.intent.category.LAUNCHER 1")
    assert device.foreground == "com.android.settings/.Settings"
    assert "No activities found" in run(device, "monkey -p com.nope -c android.intent.category.LAUNCHER 1")


def test_input_text_takes_exactly_one_argument(device):
    assert "Invalid arguments" in run(device, "input text two words")
    run(device, "input text 'a%sb'")
    assert device.typed_text == "a b"


@pytest.mark.parametrize(
    "sent, typed",
    [
        ("a%sb", "a b"),
        ("100%%ssure", "100% sure"),
        ("5%%s", "5% "),
        ("%", "%"),
        ("s%", "s%"),
    ],
)
def test_input_text_decodes_percent_s_like_input_java(sent, typed):
    assert decode_input_text(sent) == typed


def test_screencap_png_and_file(device):
    sink = BufferSink()
    device.start_shell("screencap -p", sink, via="test").done.wait(5)
    assert sink.data.startswith(b"\x89PNG\r\n\x1a\n") and sink.data[5] == 0x0A
    run(device, "screencap -p /sdcard/s.png")
    assert device.files["/sdcard/s.png"] == bytes(sink.data)


def test_pkill_matches_command_lines_but_not_itself(device):
    sink = BufferSink()
    victim = device.start_shell("sh -c 'sleep 30' amc-step-42", sink, via="test")
    eventually(lambda: device.find_processes("sleep", full=True))
    assert run(device, "pkill -f 'amc-ste[p]-42'; echo $?") == "0\n"
    assert victim.done.wait(2)
    record = device.log.records()[0]
    assert (record.end, record.signal) == ("killed", "SIGTERM")
    assert run(device, "pkill -f 'amc-ste[p]-42'; echo $?") == "1\n"


def test_kill_by_pid(device):
    sink = BufferSink()
    victim = device.start_shell("sleep 30", sink, via="test")
    assert run(device, f"kill -9 {victim.pid}; echo $?") == "0\n"
    assert victim.done.wait(2)
    assert device.log.records()[0].signal == "SIGKILL"
    assert "No such process" in run(device, "kill 1")


def test_hangup_stops_a_silent_process_by_default(device):
    process = device.start_shell("sleep 30", BufferSink(), via="test")
    process.hangup()
    assert process.done.wait(1)
    assert (device.log.records()[0].end, device.log.records()[0].signal) == ("interrupted", "SIGHUP")


def test_raw_shell_model_keeps_silent_orphans_until_killed():
    device = SimDevice(SimDeviceSpec(serial="raw", keep_silent_orphans=True))
    silent = device.start_shell("sleep 30", BufferSink(), via="test")
    silent.hangup()
    assert not silent.done.wait(0.3), "a silent orphan keeps running on a raw shell"
    chatty_sink = BufferSink()
    chatty = device.start_shell("amc-sim-ticker 30", chatty_sink, via="test")
    chatty.hangup()
    assert chatty.done.wait(1), "a chatty one dies of SIGPIPE at its next write"
    assert device.log.records()[1].signal == "SIGPIPE"
    run(device, f"kill {silent.pid}")
    assert silent.done.wait(1)
    assert device.log.records()[0].end == "killed"


def test_ticker_prints_until_its_time_is_up(device):
    output = run(device, "amc-sim-ticker 0.25")
    assert output.splitlines()[:3] == ["tick 1", "tick 2", "tick 3"]
