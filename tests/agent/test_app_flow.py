"""An app under test end to end (specs/protocol.md Part F): a client uploads an APK and a
fixture, submits a plan that records the screen, installs the APK, launches the package read
from it, pushes the fixture, pulls it back, stops the recording and uninstalls; a Host Agent
runs it on the simulator through its input cache, and the task's artifacts hold the pulled
file and a playable mp4."""

from __future__ import annotations

import hashlib
import json

import pytest

from amc.sim.apk_build import build_apk
from tests.agent.helpers import outcomes
from tests.support.video import decode

req = pytest.mark.req


def upload(server, data: bytes) -> dict:
    return {"input": server.api.call("POST", "/v1/inputs", content=data, expect=201)["ref"]}


@req("APPS/s7", "RECORD/s1")
def test_a_plan_with_an_uploaded_apk_installs_launches_pushes_pulls_records_and_uninstalls(
    server, sim, make_agent, tmp_path
):
    agent = make_agent(server.url, sim.server_port, input_cache=tmp_path / "inputs")
    apk = upload(server, build_apk("com.example.demo", version_code=12))
    fixture_bytes = b"a fixture the app reads\n" * 100
    fixture = upload(server, fixture_bytes)
    path = "/sdcard/Download/fixture.txt"
    plan = {
        "steps": [
            {"id": "record", "action": "record", "args": {"mode": "start"}},
            {"id": "install", "action": "install", "args": {"input": apk}},
            {"id": "launch", "action": "launch", "args": {"package": "com.example.demo"}},
            {"id": "push", "action": "push", "args": {"input": fixture, "path": path}},
            {"id": "pull", "action": "pull", "args": {"path": path}},
            {"id": "again", "action": "install", "args": {"input": apk}},
            {"id": "cut", "action": "record", "args": {"mode": "stop"}},
            {"id": "uninstall", "action": "uninstall", "args": {"package": "com.example.demo"}},
        ]
    }

    task = server.api.wait_status(server.api.submit(plan)["id"], timeout=60)

    assert task["status"] == "done", task
    assert outcomes(task["result"]["steps"]) == [(s["id"], "completed", None) for s in plan["steps"]]
    out = {s["id"]: json.loads(s["output"]) for s in task["result"]["steps"] if s.get("output", "").startswith("{")}
    assert out["install"] == {"package": "com.example.demo", "version_code": 12, "installed": True}
    assert out["again"]["installed"] is False
    stored = [a for a in server.api.artifacts(task["id"]) if a["step"] == "pull"]
    assert len(stored) == 1
    assert server.api.download(task["id"], stored[0]["id"]).content == fixture_bytes
    assert stored[0]["sha256"] == hashlib.sha256(fixture_bytes).hexdigest()
    (video,) = [a for a in server.api.artifacts(task["id"]) if a["step"] == "cut"]
    assert video["content_type"] == "video/mp4"
    frames, size = decode(server.api.download(task["id"], video["id"]).content)
    assert frames > 0 and size == (1080, 2400)
    device = sim.device("amc-sim-01")
    assert "com.example.demo" not in device.installed
    assert agent.agent.inputs is not None and len(agent.agent.inputs.entries()) == 2


@req("APPS/s4")
def test_an_input_the_host_cannot_fetch_fails_its_step_and_nothing_is_sent_to_the_device(
    server, sim, make_agent, tmp_path
):
    """The Host Agent fetches a step's inputs before its action runs; when that fails (here the
    server refuses the cache's token), the step fails naming the input, and the device saw nothing."""
    from amc.agent.inputs import InputCache
    from tests.agent.helpers import eventually

    agent = make_agent(server.url, sim.server_port, input_cache=tmp_path / "inputs")
    eventually(lambda: agent.agent.inputs is not None and server.api.serials("h1") == ["amc-sim-01"], 10)
    agent.agent.inputs = InputCache(tmp_path / "other", server.url, "not-a-token", attempts=1)
    apk = upload(server, build_apk("com.example.demo"))
    before = len(sim.log("amc-sim-01"))
    plan = {"steps": [{"id": "install", "action": "install", "args": {"input": apk}}]}

    task = server.api.wait_status(server.api.submit(plan)["id"], timeout=60)

    assert task["status"] == "failed", task
    (step,) = task["result"]["steps"]
    assert step["status"] == "failed"
    assert step["reason"].startswith(f"input {apk['input'].removeprefix('sha256:')}: ")
    assert step["reason"].endswith("; nothing was sent to the device")
    assert len(sim.log("amc-sim-01")) == before
