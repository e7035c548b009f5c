"""`amc host run` as a real process: serving, SIGTERM, and a refused token."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.agent.conftest import HOST_TOKENS
from tests.agent.helpers import device_commands, eventually, outcomes, shell, tap

AMC = str(Path(sys.executable).with_name("amc"))


def host_run(server_url: str, adb_port: int, tmp_path: Path, token: str, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "AMC_HOST_TOKEN": token}  # the token from the environment, not argv
    command = [
        AMC,
        "host",
        "run",
        "--server",
        server_url,
        "--host-id",
        "h1",
        "--adb-port",
        str(adb_port),
        "--artifacts",
        str(tmp_path / "artifacts"),
        "--lease-seconds",
        "1.5",
        "--claim-wait",
        "1",
        "--scan-seconds",
        "0.2",
        *extra,
    ]
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_sigterm_stops_claiming_stops_the_running_attempt_at_a_boundary_reports_and_exits(server, sim, tmp_path):
    agent = host_run(server.url, sim.server_port, tmp_path, HOST_TOKENS["h1"])
    try:
        task_id = server.api.submit({"steps": [tap("a"), shell("b", "sleep 30"), tap("c")]})["id"]
        eventually(
            lambda: any(c == "sleep 30" for c, _ in device_commands(sim, "amc-sim-01")), timeout=15, what="b running"
        )

        agent.send_signal(signal.SIGTERM)
        _, stderr = agent.communicate(timeout=15)
    finally:
        agent.kill()

    assert agent.returncode == 0, stderr
    task = server.api.task(task_id)
    assert task["status"] == "failed"
    assert task["result"]["metadata"]["stop_reason"] == "host_stopping"
    assert outcomes(task["result"]["steps"]) == [
        ("a", "completed", None),
        ("b", "interrupted", "host_stopping"),
        ("c", "not_started", "host_stopping"),
    ]
    commands = device_commands(sim, "amc-sim-01")
    assert commands[1][0] == "sleep 30" and commands[1][1] in ("interrupted", "killed")
    assert "stopping" in stderr and "reported failed" in stderr
    assert HOST_TOKENS["h1"] not in stderr
    # It claims nothing more.
    later = server.api.submit({"steps": [tap("x")]})["id"]
    assert server.api.status(later) == "queued"


def test_a_refused_token_is_a_clear_error(server, sim, tmp_path):
    agent = host_run(server.url, sim.server_port, tmp_path, HOST_TOKENS["h2"])  # h2's token, as h1
    try:
        _, stderr = agent.communicate(timeout=15)
    finally:
        agent.kill()

    assert agent.returncode == 1
    assert "refused host 'h1'" in stderr and "403" in stderr
    assert HOST_TOKENS["h2"] not in stderr
