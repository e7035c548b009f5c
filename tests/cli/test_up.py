"""`amc up` as a person runs it: a subprocess in a fresh directory, then Ctrl-C."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import socket
import stat
import subprocess
import sys
import threading
import time

import httpx
import pytest
from click.testing import CliRunner

from amc.cli import main
from tests.support.plans import TWO_STEPS as PLAN


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def lines_of(stream) -> queue.Queue:
    lines: queue.Queue = queue.Queue()

    def pump():
        for line in stream:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def read_until(lines: queue.Queue, marker: str, timeout: float) -> str:
    seen = []
    deadline = time.monotonic() + timeout
    while True:
        line = lines.get(timeout=max(0.01, deadline - time.monotonic()))
        assert line is not None, "amc up exited:\n" + "".join(seen)
        seen.append(line)
        if marker in line:
            return "".join(seen)


def test_up_runs_a_local_stack_that_the_cli_finds_and_stops_cleanly_on_ctrl_c(tmp_path):
    adb_port = closed_port()  # no adb server there: up must fall back to simulated phones
    env = {key: value for key, value in os.environ.items() if not key.startswith("AMC_")}
    process = subprocess.Popen(
        [sys.executable, "-m", "amc", "up", "--port", "0", "--sim-devices", "2", "--adb-port", str(adb_port)],
        cwd=tmp_path,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        banner = read_until(lines_of(process.stdout), "Ctrl-C stops everything", timeout=60)
        url = re.search(r"server\s+(http://\S+)", banner).group(1)
        assert f"2 simulated device(s) (no adb server is running at 127.0.0.1:{adb_port})" in banner
        assert "amc-sim-01 (Pixel 7), amc-sim-02 (SM-G991B)" in banner
        assert f"console     {url}/ui" in banner  # the web console, served by the same server
        assert httpx.get(f"{url}/ui", timeout=10).status_code == 200
        tokens = tmp_path / ".amc" / "tokens.json"
        assert ".amc/tokens.json" in banner and stat.S_IMODE(tokens.stat().st_mode) == 0o600

        # The CLI, from the same directory, needs only the URL: the token comes from .amc.
        runner = CliRunner()
        env = {"AMC_URL": url, "AMC_DATA": str(tmp_path / ".amc"), "AMC_TOKEN": None}
        done = runner.invoke(main, ["task", "submit", "-", "--watch"], input=json.dumps(PLAN), env=env)
        assert done.exit_code == 0, done.output
        assert "ended done (reported) on h1/amc-sim-0" in done.stdout
        hosts = runner.invoke(main, ["task", "list", "--json"], env=env)
        assert [t["status"] for t in json.loads(hosts.stdout)["tasks"]] == ["done"]

        process.send_signal(signal.SIGINT)
        assert process.wait(30) == 0
        stderr = process.stderr.read()
        assert "amc up: stopped" in stderr
        try:
            httpx.get(f"{url}/v1/health", timeout=2)
            raise AssertionError("the server still answers after amc up stopped")
        except httpx.ConnectError:
            pass
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def start_up(tmp_path, *extra: str) -> tuple[subprocess.Popen, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("AMC_")}
    process = subprocess.Popen(
        [sys.executable, "-m", "amc", "up", "--port", "0", "--devices", "sim", "--sim-devices", "1", "-v", *extra],
        cwd=tmp_path,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    banner = read_until(lines_of(process.stdout), "Ctrl-C stops everything", timeout=60)
    return process, re.search(r"server\s+(http://\S+)", banner).group(1)


def stored_task(tmp_path, task_id: str):
    from amc.adapters.lmdb import LmdbService

    service = LmdbService.open(tmp_path / ".amc")
    try:
        return service.task(task_id)
    finally:
        service.close()


@pytest.mark.req("AGENT-DRAIN/s2", "AGENT-DRAIN/s3")
@pytest.mark.parametrize("presses", [1, 2])
def test_ctrl_c_drains_the_agent_and_a_second_ctrl_c_releases_at_once(tmp_path, presses):
    process, url = start_up(tmp_path, "--drain-timeout", "1" if presses == 1 else "60")
    try:
        plan = {"steps": [{"id": "a", "action": "tap", "args": {"x": 1, "y": 2}}, *steps_of(presses)]}
        env = {"AMC_URL": url, "AMC_DATA": str(tmp_path / ".amc"), "AMC_TOKEN": None}
        submitted = CliRunner().invoke(main, ["task", "submit", "-", "--json"], input=json.dumps(plan), env=env)
        task_id = json.loads(submitted.stdout)["id"]
        errors = lines_of(process.stderr)
        read_until(errors, "step a completed", timeout=30)
        process.send_signal(signal.SIGINT)
        said = read_until(errors, "amc up: stopping", timeout=10)
        assert "running tasks may finish within" in said and "Ctrl-C again" in said
        if presses == 2:
            time.sleep(1.0)
            process.send_signal(signal.SIGINT)
            read_until(errors, "amc up: stopping now", timeout=10)
        assert process.wait(40) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    task = stored_task(tmp_path, task_id)
    assert task.status == "queued"  # given back, not failed
    (attempt,) = task.attempts
    assert attempt.outcome == "released"
    statuses = [(s.id, s.status) for s in attempt.steps]
    assert statuses[0] == ("a", "completed")
    if presses == 2:
        assert statuses[1:] == [("s1", "interrupted")]
    else:
        assert statuses[-1] == ("s9", "not_started")
        assert {status for _, status in statuses} == {"completed", "not_started"}


def steps_of(presses: int) -> list[dict]:
    """Nine one-second steps to outlast a one-second drain, or one thirty-second step."""
    if presses == 2:
        return [{"id": "s1", "action": "shell", "args": {"command": "sleep 30"}}]
    return [{"id": f"s{i}", "action": "shell", "args": {"command": "sleep 1"}} for i in range(1, 10)]


def test_up_fails_in_one_line_when_its_port_is_taken(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {key: value for key, value in os.environ.items() if not key.startswith("AMC_")}
        result = subprocess.run(
            [sys.executable, "-m", "amc", "up", "--port", str(port), "--devices", "sim"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 1
    assert f"Error: the server exited (status 1): cannot listen on 127.0.0.1:{port}" in result.stderr
