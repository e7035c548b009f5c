"""The `record` action on the simulator: a screenrecord chain beside the steps, stopped by
SIGINT, pulled as playable mp4 segments (specs/protocol.md, "Screen recording")."""

from __future__ import annotations

import json
import threading

import pytest

from amc.adapters.adb import recording
from amc.adapters.adb.errors import Interrupted, StepFailed
from tests.support.video import decode

from .helpers import SERIAL, eventually


@pytest.mark.req("RECORD/s1")
def test_start_steps_stop_gives_a_playable_mp4(executor, sim):
    started = executor.run("record", {"mode": "start"}, step_id="rec")
    assert json.loads(started.output) == {"recording": "started"} and started.artifact is None
    executor.run("keyevent", {"key": "KEYCODE_HOME"})
    executor.run("wait", {"seconds": 0.6})
    stopped = executor.run("record", {"mode": "stop"}, step_id="end")
    assert json.loads(stopped.output) == {"recording": "stopped", "segments": 1}
    assert stopped.content_type == "video/mp4" and stopped.more_artifacts == ()
    assert any("pkill -INT -f 'amc-re[c]-" in command for command in [r.command for r in sim.log(SERIAL)])
    frames, size = decode(stopped.artifact.read_bytes())
    assert frames > 0 and size == (1080, 2400)
    assert not [path for path in sim.device(SERIAL).files if "amc-rec-" in path]  # removed from the device


@pytest.mark.req("RECORD/s2")
def test_stop_without_start_and_start_twice_fail(executor):
    with pytest.raises(StepFailed, match="not recording"):
        executor.run("record", {"mode": "stop"})
    executor.run("record", {"mode": "start"})
    with pytest.raises(StepFailed, match="already recording"):
        executor.run("record", {"mode": "start"})
    assert len(executor.finish_recording()) == 1
    assert executor.finish_recording() == ()  # nothing records any more


def test_a_segment_that_ends_chains_the_next(executor, monkeypatch):
    monkeypatch.setattr(recording, "SEGMENT_SECONDS", 1)
    monkeypatch.setattr(recording, "_SHORTEST_SEGMENT", 0.5)
    executor.run("record", {"mode": "start"})
    eventually(lambda: len(executor.memory.recording.segments) >= 2, timeout=10)
    stopped = executor.run("record", {"mode": "stop"}, step_id="end")
    assert len(stopped.more_artifacts) >= 1
    for path in (stopped.artifact, *stopped.more_artifacts):
        assert decode(path.read_bytes())[0] > 0


@pytest.mark.req("RECORD/s3")
def test_an_interrupted_step_leaves_the_recording_to_the_attempts_end(executor):
    executor.run("record", {"mode": "start"})
    errors = []

    def wait():
        try:
            executor.run("wait", {"seconds": 30})
        except Interrupted as error:
            errors.append(error)

    worker = threading.Thread(target=wait)
    worker.start()
    eventually(lambda: executor.interrupt())
    worker.join(5)
    assert errors
    files = executor.finish_recording()
    assert len(files) == 1 and decode(files[0].read_bytes())[0] > 0


def test_an_abandoned_recording_leaves_nothing_running(executor, sim):
    executor.run("record", {"mode": "start"})
    device = sim.device(SERIAL)
    eventually(lambda: device.find_processes("screenrecord", full=True))
    chain = executor.memory.recording
    executor.abandon_recording()
    eventually(lambda: not chain.running and not device.find_processes("screenrecord", full=True))
    assert executor.memory.recording is None
