"""Screen recordings end to end: a real agent and server, the simulated device recording
with its screenrecord; every mp4 read back over HTTP and decoded (specs/protocol.md,
"Screen recording")."""

from __future__ import annotations

import time

import pytest

from tests.agent.helpers import eventually, tap
from tests.support.video import decode

req = pytest.mark.req

HOME = {"id": "home", "action": "home", "args": {}}
PAUSE = {"id": "pause", "action": "wait", "args": {"seconds": 0.5}}


def mp4s(server, task_id: str) -> list[tuple[dict, tuple[int, tuple[int, int]]]]:
    """The task's video artifacts, each with its decoded frame count and size."""
    videos = [a for a in server.api.artifacts(task_id) if a["content_type"] == "video/mp4"]
    return [(a, decode(server.api.download(task_id, a["id"]).content)) for a in videos]


def outcome(task: dict, step_id: str) -> dict:
    return next(step for step in task["result"]["steps"] if step["id"] == step_id)


@req("RECORD/s1")
def test_a_plan_with_record_start_and_stop_stores_a_playable_mp4_of_the_stop_step(server, sim, make_agent):
    make_agent(server.url, sim.server_port)
    plan = {
        "steps": [
            {"id": "rec", "action": "record", "args": {"mode": "start"}},
            HOME,
            PAUSE,
            {"id": "cut", "action": "record", "args": {"mode": "stop"}},
        ]
    }
    task_id = server.api.submit(plan)["id"]
    task = server.api.wait_status(task_id)

    assert task["status"] == "done", task
    [(artifact, (frames, size))] = mp4s(server, task_id)
    assert (artifact["step"], artifact["name"]) == ("cut", "cut-record.mp4")
    assert outcome(task, "cut")["artifacts"] == [artifact["id"]]
    assert frames > 0 and size == (1080, 2400)


@req("RECORD/s4")
def test_a_plan_with_record_true_records_every_step(server, sim, make_agent):
    make_agent(server.url, sim.server_port)
    task_id = server.api.submit({"steps": [HOME, PAUSE], "record": True})["id"]
    task = server.api.wait_status(task_id)

    assert task["status"] == "done", task
    assert task["plan"]["record"] is True
    [(artifact, (frames, _))] = mp4s(server, task_id)
    assert (artifact["step"], artifact["name"]) == ("pause", "pause-record-end.mp4")
    assert outcome(task, "pause")["artifacts"] == [artifact["id"]]
    assert frames > 0


@req("RECORD/s3")
def test_a_cancel_mid_recording_still_stores_the_mp4(server, sim, make_agent):
    make_agent(server.url, sim.server_port)
    plan = {
        "steps": [
            {"id": "rec", "action": "record", "args": {"mode": "start"}},
            {"id": "long", "action": "wait", "args": {"seconds": 30}},
            tap("never"),
        ]
    }
    task_id = server.api.submit(plan)["id"]
    device = sim.device("amc-sim-01")
    eventually(lambda: device.find_processes("screenrecord", full=True), what="the recording running")
    time.sleep(0.8)  # the wait step runs meanwhile
    server.api.cancel(task_id, expect=202)
    task = server.api.wait_status(task_id)

    assert task["status"] == "cancelled", task
    [(artifact, (frames, _))] = mp4s(server, task_id)
    assert (artifact["step"], artifact["name"]) == ("long", "long-record-end.mp4")
    assert outcome(task, "long")["artifacts"] == [artifact["id"]]
    assert frames > 0


@req("RECORD/s3")
def test_a_failed_step_ends_the_attempt_and_the_recording_is_stored_with_it(server, sim, make_agent):
    make_agent(server.url, sim.server_port)
    plan = {
        "steps": [
            {"id": "rec", "action": "record", "args": {"mode": "start"}},
            HOME,
            {"id": "check", "action": "assert_visible", "args": {"target": {"text": "Nowhere to be seen"}}},
            {"id": "cut", "action": "record", "args": {"mode": "stop"}},
        ]
    }
    task_id = server.api.submit(plan)["id"]
    task = server.api.wait_status(task_id)

    assert task["status"] == "failed", task
    assert outcome(task, "check")["status"] == "failed"
    [(artifact, (frames, _))] = mp4s(server, task_id)
    assert (artifact["step"], artifact["name"]) == ("check", "check-record-end.mp4")
    assert artifact["id"] in outcome(task, "check")["artifacts"]
    assert frames > 0
