"""`amc host run` as a real process: a refused token (its signals: test_drain.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.agent.conftest import HOST_TOKENS

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
        "--keep-artifacts",
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


def test_a_refused_token_is_a_clear_error(server, sim, tmp_path):
    agent = host_run(server.url, sim.server_port, tmp_path, HOST_TOKENS["h2"])  # h2's token, as h1
    try:
        _, stderr = agent.communicate(timeout=15)
    finally:
        agent.kill()

    assert agent.returncode == 1
    assert "refused host 'h1'" in stderr and "403" in stderr
    assert HOST_TOKENS["h2"] not in stderr
