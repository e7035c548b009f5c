"""Deadlines, interrupts and devices that vanish or go silent while an action runs."""

from __future__ import annotations

import threading
import time

import pytest

from amc.adapters.adb.errors import DeviceUnavailable, Interrupted, StepTimedOut

from .helpers import SERIAL, eventually

SLACK = 0.5  # allowed overshoot of a deadline or an interrupt
# How a stopped command ends on the device: its stream closed (SIGHUP, or SIGPIPE when a
# chatty one writes first), or the executor's follow-up `pkill` reached it first (SIGTERM).
# Which comes first is a race; each of them stops it.
STOPPED = {("interrupted", "SIGHUP"), ("interrupted", "SIGPIPE"), ("killed", "SIGTERM")}


def timed(function):
    started = time.monotonic()
    try:
        function()
    finally:
        timed.elapsed = time.monotonic() - started


def supervised_end(sim, serial, needle):
    """(end, signal) of the supervised command containing `needle`, once it has ended."""

    def ended():
        return [(r.end, r.signal) for r in sim.log(serial) if needle in r.command and r.end != "running"]

    return eventually(ended)[0]


@pytest.mark.parametrize("command", ["sleep 30", "amc-sim-ticker 30"])
def test_shell_deadline_is_wall_clock(executor, sim, command):
    with pytest.raises(StepTimedOut, match=r"exceeded its 0\.8 s deadline") as caught:
        timed(lambda: executor.run("shell", {"command": command, "timeout_seconds": 0.8}))
    assert 0.8 <= timed.elapsed < 0.8 + SLACK
    if "ticker" in command:
        assert caught.value.output.startswith("tick 1\ntick 2\n"), "partial output is kept"
    assert supervised_end(sim, SERIAL, command) in STOPPED
    assert sim.commands(SERIAL)[-1].startswith("pkill -f 'amc-ste[p]-"), "it is stopped on the device too"


def test_deadline_on_a_raw_shell_device_kills_the_silent_orphan(make_executor, sim):
    """On adbd's raw shell a silent process survives the stream close (specs/adb.md §7)."""
    with pytest.raises(StepTimedOut, match="stopped on the device"):
        make_executor("amc-sim-raw").run("shell", {"command": "sleep 30", "timeout_seconds": 0.5})
    assert supervised_end(sim, "amc-sim-raw", "sleep 30") == ("killed", "SIGTERM")
    assert sim.device("amc-sim-raw").processes() == []


def test_interrupt_from_another_thread(executor, sim):
    timer = threading.Timer(0.3, executor.interrupt)
    timer.start()
    with pytest.raises(Interrupted, match="was interrupted"):
        timed(lambda: executor.run("shell", {"command": "amc-sim-ticker 30"}))
    assert 0.3 <= timed.elapsed < 0.3 + SLACK
    assert supervised_end(sim, SERIAL, "amc-sim-ticker") in STOPPED
    assert executor.interrupt() is False, "nothing runs any more"


def test_interrupt_reaches_a_wait_and_a_hung_device(make_executor, sim):
    executor = make_executor()
    threading.Timer(0.2, executor.interrupt).start()
    with pytest.raises(Interrupted):
        timed(lambda: executor.run("wait", {"seconds": 30}))
    assert timed.elapsed < 0.2 + SLACK
    sim.set_silent(SERIAL)
    threading.Timer(0.2, executor.interrupt).start()
    with pytest.raises(Interrupted, match="it had not started"):
        timed(lambda: executor.run("shell", {"command": "true"}))
    assert timed.elapsed < 0.2 + SLACK


def test_silent_device_cannot_hang_fixed_actions_or_screenshots(make_executor, sim):
    sim.set_silent(SERIAL)
    executor = make_executor(command_timeout=0.4, screenshot_timeout=0.4)
    with pytest.raises(StepTimedOut):
        timed(lambda: executor.run("tap", {"x": 1, "y": 1}))
    assert timed.elapsed < 0.4 + SLACK
    with pytest.raises(StepTimedOut):
        timed(lambda: executor.run("screenshot", {}))
    assert timed.elapsed < 0.4 + SLACK


def test_device_disappearing_mid_command(executor, sim):
    threading.Timer(0.35, sim.disconnect, (SERIAL, "absent")).start()
    with pytest.raises(DeviceUnavailable, match="went away mid-command") as caught:
        timed(lambda: executor.run("shell", {"command": "amc-sim-ticker 30"}))
    assert timed.elapsed < 0.35 + SLACK
    assert caught.value.output.startswith("tick 1\n")
    assert supervised_end(sim, SERIAL, "ticker") == ("interrupted", "SIGHUP")
    with pytest.raises(DeviceUnavailable, match="not found"):
        executor.run("tap", {"x": 1, "y": 1})


def test_one_action_at_a_time(executor):
    def wait_until_interrupted():
        with pytest.raises(Interrupted):
            executor.run("wait", {"seconds": 5})

    thread = threading.Thread(target=wait_until_interrupted)
    thread.start()
    eventually(lambda: executor._current is not None)
    with pytest.raises(RuntimeError, match="one action at a time"):
        executor.run("tap", {"x": 1, "y": 1})
    executor.interrupt()
    thread.join(2)
    assert not thread.is_alive()
