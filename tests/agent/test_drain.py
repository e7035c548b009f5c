"""A Host Agent that stops, or loses a device, gives its attempts back: real processes, real sockets.

`amc host run` runs as a child process and gets real signals; the tasks it gives back are
claimed and finished by a second agent on other (simulated) devices. What each released
attempt says about its steps is checked against what the device really received.
"""

from __future__ import annotations

import signal
import time

import pytest

from tests.agent.conftest import HOST_TOKENS
from tests.agent.helpers import device_commands, eventually, outcomes, shell, tap, wait_running
from tests.agent.test_cli import host_run

req = pytest.mark.req


def sleeps(count: int, seconds: int = 1) -> list[dict]:
    return [shell(f"s{i}", f"sleep {seconds}") for i in range(1, count + 1)]


def released_attempt(task: dict) -> dict:
    (attempt,) = [a for a in task["attempts"] if a["outcome"] == "released"]
    return attempt


def assert_truthful(steps: list[dict], commands: list[tuple[str, str]]) -> None:
    """A released attempt's steps against the commands its device received, in order:
    completed steps are the commands that completed, an interrupted step is the one that
    was cut, and steps that never started sent nothing."""
    started = [s for s in steps if s["status"] != "not_started"]
    assert len(started) == len(commands), (steps, commands)
    for step, (_, end) in zip(started, commands):
        assert step["status"] == ("completed" if end == "completed" else "interrupted"), (step, end)
    assert {s["status"] for s in steps} <= {"completed", "interrupted", "not_started"}


def agent_stderr(process) -> str:
    try:
        _, stderr = process.communicate(timeout=20)
    finally:
        process.kill()
    return stderr


@req("AGENT-DRAIN/s1", "AGENT-DRAIN/s2")
def test_sigterm_drains_finishes_what_fits_and_releases_the_rest_to_another_host(
    server, make_sim, make_agent, tmp_path
):
    here = make_sim("d1", "d2", "d3")
    elsewhere = make_sim("e1", "e2", "e3")
    agent = host_run(server.url, here.server_port, tmp_path, HOST_TOKENS["h1"], "--drain-timeout", "2.5")
    try:
        eventually(lambda: len(server.admin.serials("h1")) == 3, what="h1's devices registered")
        short = server.api.submit({"steps": [tap("a"), shell("b", "sleep 2")]})["id"]
        long = [server.api.submit({"steps": [tap("a"), *sleeps(8)]})["id"] for _ in range(2)]
        for serial in ("d1", "d2", "d3"):
            eventually(
                lambda serial=serial: any(c.startswith("sleep") for c, _ in device_commands(here, serial)),
                timeout=15,
                what=f"a sleep running on {serial}",
            )
        stopped_at = time.monotonic()
        agent.send_signal(signal.SIGTERM)
        stderr = agent_stderr(agent)
        took = time.monotonic() - stopped_at
    finally:
        agent.kill()

    assert agent.returncode == 0, stderr
    assert 2.5 <= took < 2.5 + 1 + 10, stderr  # the drain, the step under way, the releases (a loaded machine)
    assert "drain" in stderr and "released" in stderr
    assert server.api.task(short)["status"] == "done"  # it ended within the drain time
    on_device = {server.api.task(t)["attempts"][0]["device"]: t for t in long}
    for serial, task_id in on_device.items():
        task = server.api.task(task_id)
        assert task["status"] == "queued", task  # given back, not failed
        attempt = released_attempt(task)
        assert attempt["number"] == 1
        assert_truthful(attempt["steps"], device_commands(here, serial))
        # the drain let the running step finish: nothing was cut, the rest never started
        assert {s["status"] for s in attempt["steps"]} == {"completed", "not_started"}
        assert {s["reason"] for s in attempt["steps"] if s["status"] == "not_started"} == {"host_stopping"}
        assert {e for _, e in device_commands(here, serial)} == {"completed"}
        assert ("released", "host_stopping") in [
            (e["type"], e["data"].get("reason")) for e in server.api.history(task_id)
        ]

    make_agent(server.url, elsewhere.server_port, "h2")
    for task_id in long:
        task = server.api.wait_status(task_id, timeout=30)
        assert task["status"] == "done", task
        assert [a["outcome"] for a in task["attempts"]] == ["released", "done"]
        assert task["attempts"][1]["device"] in ("e1", "e2", "e3")
    assert all(server.api.task(t)["status"] != "failed" for t in [short, *long])


@req("AGENT-DRAIN/s3")
def test_a_second_signal_interrupts_the_running_step_and_releases_at_once(server, sim, tmp_path):
    agent = host_run(server.url, sim.server_port, tmp_path, HOST_TOKENS["h1"])  # the default 60 s drain
    try:
        task_id = server.api.submit({"steps": [tap("a"), shell("b", "sleep 30"), tap("c")]})["id"]
        wait_running(sim, "amc-sim-01", "sleep 30")
        agent.send_signal(signal.SIGTERM)
        time.sleep(1.0)
        assert agent.poll() is None and server.api.status(task_id) == "dispatched"  # draining: b goes on
        stopped_at = time.monotonic()
        agent.send_signal(signal.SIGTERM)
        stderr = agent_stderr(agent)
        took = time.monotonic() - stopped_at
    finally:
        agent.kill()

    assert agent.returncode == 0, stderr
    assert took < 8, stderr  # no drain: interrupted and released at once
    task = server.api.task(task_id)
    assert task["status"] == "queued" and task["result"] is None
    attempt = released_attempt(task)
    assert outcomes(attempt["steps"]) == [
        ("a", "completed", None),
        ("b", "interrupted", "host_stopping"),
        ("c", "not_started", "host_stopping"),
    ]
    commands = device_commands(sim, "amc-sim-01")
    assert commands[1][0] == "sleep 30" and commands[1][1] in ("interrupted", "killed")
    assert "stopping now" in stderr and HOST_TOKENS["h1"] not in stderr
    later = server.api.submit({"steps": [tap("x")]})["id"]
    assert server.api.status(later) == "queued"  # it claims nothing more


@req("AGENT-DRAIN/s4")
def test_a_device_removed_mid_step_releases_the_attempt_and_another_device_finishes(server, make_sim, make_agent):
    sim = make_sim("d1", "d2")
    make_agent(server.url, sim.server_port)
    eventually(lambda: len(server.admin.serials("h1")) == 2, what="both devices registered")
    task_id = server.api.submit({"steps": [tap("a"), shell("b", "sleep 5"), tap("c")]})["id"]
    lost = eventually(
        lambda: next((s for s in ("d1", "d2") if ("sleep 5", "running") in device_commands(sim, s)), None),
        timeout=15,
        what="b running on a device",
    )
    sim.disconnect(lost, state="absent")

    task = server.api.wait_status(task_id, timeout=30)

    assert task["status"] == "done", task
    first, second = task["attempts"]
    assert first["outcome"] == "released" and first["device"] == lost
    assert second["outcome"] == "done" and second["device"] != lost
    statuses = outcomes(first["steps"])
    assert statuses[0] == ("a", "completed", None)
    assert statuses[1][:2] == ("b", "interrupted")
    assert statuses[2] == ("c", "not_started", "device_lost")
    assert ("released", "device_lost") in [(e["type"], e["data"].get("reason")) for e in server.api.history(task_id)]
