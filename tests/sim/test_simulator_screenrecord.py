"""The simulator's `screenrecord`: a real mp4 of its frames, finished by SIGINT (issue 26)."""

from __future__ import annotations

import pytest

from tests.sim.helpers import BufferSink, run
from tests.support.video import decode
from tests.support.waiting import eventually

pytestmark = pytest.mark.req("RECORD/s1")


def test_sigint_finishes_a_playable_mp4_of_the_screen(device):
    sink = BufferSink()
    process = device.start_shell("screenrecord --time-limit 30 /sdcard/amc-rec-1.mp4", sink, via="test")
    eventually(lambda: device.find_processes("screenrecord", full=True))
    run(device, "sleep 0.6")
    run(device, "input keyevent KEYCODE_HOME")
    run(device, "sleep 0.3")
    assert "/sdcard/amc-rec-1.mp4" not in device.files  # nothing until the file is finished
    assert run(device, "pkill -INT -f 'amc-re[c]-1'; echo $?") == "0\n"
    assert process.done.wait(10)
    frames, size = decode(device.files["/sdcard/amc-rec-1.mp4"])
    screen = device.screen()
    assert frames >= 2 and size == (screen.width, screen.height)


def test_the_time_limit_ends_the_recording_with_its_file(device):
    run(device, "screenrecord --time-limit 1 /sdcard/short.mp4")
    frames, _ = decode(device.files["/sdcard/short.mp4"])
    assert frames >= 3


def test_sigkill_leaves_no_file_and_bad_arguments_are_refused(device):
    sink = BufferSink()
    process = device.start_shell("screenrecord /sdcard/gone.mp4", sink, via="test")
    eventually(lambda: device.find_processes("screenrecord", full=True))
    run(device, "pkill -9 -f gone")
    assert process.done.wait(10)
    assert "/sdcard/gone.mp4" not in device.files
    assert "out of range" in run(device, "screenrecord --time-limit 181 /sdcard/x.mp4 2>&1")
    assert "usage" in run(device, "screenrecord 2>&1")
