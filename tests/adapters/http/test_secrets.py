"""No token ever appears in a log, an error detail or a metric.

A real `amc serve` (access log on, debug logs) and a real `amc host run` (debug logs, over the
device simulator) work one task through; around them, callers send bad tokens (unknown, one
differing from a real one in its last character, the wrong scheme), good tokens of every role,
and good tokens where they do not belong (in the path, in the query). Then every line both
processes wrote, every answer's body and `GET /metrics` are searched for every token.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading

import pytest

from amc.sim import SimDeviceSpec, Simulator
from tests.support.http import Caller, http_client
from tests.support.waiting import eventually

ADMIN = "secret-admin-token-7f3a9c11e0d2"
CLIENT = "secret-client-token-5b8e2d47c6a1"
HOST = "secret-host-token-91c4e6b2a8f3"
OTHER_HOST = "secret-host2-token-2d7f1a9e5c03"
TOKENS = [
    {"token": ADMIN, "role": "admin"},
    {"token": CLIENT, "role": "client", "tenant": "acme"},
    {"token": HOST, "role": "host", "host_id": "h1"},
    {"token": OTHER_HOST, "role": "host", "host_id": "h2"},
]
BAD = [
    "secret-nobody-has-this-token-4e1b",
    ADMIN[:-1] + ("3" if ADMIN[-1] != "3" else "4"),  # one character off
    CLIENT + "0",
    HOST[1:],
]
LISTENING = re.compile(r"listening on (http://\S+)")


class Process:
    """A subprocess whose stdout and stderr are read as they come (debug logs fill a pipe fast)."""

    def __init__(self, command: list[str], env: dict | None = None):
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.lines: list[str] = []
        self._readers = [threading.Thread(target=self._read, args=(s,), daemon=True) for s in self._streams]
        for reader in self._readers:
            reader.start()

    @property
    def _streams(self):
        return (self.process.stdout, self.process.stderr)

    def _read(self, stream) -> None:
        for line in stream:
            self.lines.append(line)

    def output(self) -> str:
        return "".join(self.lines)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        for reader in self._readers:
            reader.join(5)
        return code


def amc(*args: str) -> list[str]:
    return [sys.executable, "-c", "from amc.cli import main; main()", *args]


@pytest.fixture
def simulator():
    sim = Simulator([SimDeviceSpec(serial="amc-sim-01")]).start()
    yield sim
    sim.stop()


@pytest.mark.slow
@pytest.mark.req("ACCESS/s1")
def test_no_token_appears_in_the_logs_the_answers_or_the_metrics(tmp_path, simulator):
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps(TOKENS))
    tokens.chmod(0o600)
    server = Process(
        amc("serve", "--data", str(tmp_path / "data"), "--port", "0", "--tokens", str(tokens))
        + ["--access-log", "--log-level", "debug", "--lease-seconds", "5"]
    )
    url = eventually(lambda: next((m.group(1) for m in map(LISTENING.search, server.lines) if m), None), 20)
    env = {**os.environ, "AMC_HOST_TOKEN": HOST}
    agent_args = ["--server", url, "--host-id", "h1", "--adb-port", str(simulator.server_port)]
    agent_args += ["--keep-artifacts", str(tmp_path / "artifacts"), "--claim-wait", "1", "--scan-seconds", "0.2"]
    agent = Process(amc("host", "run", *agent_args, "--log-level", "debug"), env=env)
    wrong_agent = Process(
        amc("host", "run", *agent_args, "--log-level", "debug"), env={**env, "AMC_HOST_TOKEN": BAD[3]}
    )
    http = http_client(url)
    answers: list[str] = []
    try:
        admin, client, host = Caller(http, ADMIN), Caller(http, CLIENT), Caller(http, HOST)
        # Good tokens of every role, doing their work: a task runs on the agent to the end.
        task_id = client.submit({"steps": [{"id": "a", "action": "shell", "args": {"command": "echo hi"}}]})["id"]
        assert client.wait_status(task_id, timeout=30)["status"] == "done"
        admin.tasks()
        admin.host("h1")
        host.host("h1")
        Caller(http, OTHER_HOST).host("h1", expect=403)
        client.call("GET", f"/v1/tasks/{task_id}/history")
        # Bad tokens, on listed and unlisted paths, and a good one under the wrong scheme.
        for bad in BAD:
            for method, path in [("GET", "/v1/tasks"), ("POST", "/v1/tasks"), ("GET", f"/v1/tasks/{task_id}")]:
                answers.append(Caller(http, bad).request(method, path, json={}, expect=401).text)
            answers.append(Caller(http, bad).request("GET", "/v1/nowhere", expect=401).text)
        answers.append(http.get("/v1/tasks", headers={"Authorization": f"Basic {ADMIN}"}).text)
        answers.append(http.get("/v1/tasks", headers={"Authorization": ADMIN}).text)
        # Good tokens where they do not belong: in the path and in the query.
        for token in (ADMIN, CLIENT, HOST):
            answers.append(admin.request("GET", f"/v1/tasks/{token}", expect=404).text)
            answers.append(admin.request("GET", f"/v1/tasks/{token}/history", expect=404).text)
            answers.append(admin.request("GET", f"/v1/hosts/{token}", expect=404).text)
            answers.append(admin.request("GET", f"/v1/{token}", expect=404).text)
            answers.append(admin.request("GET", "/v1/tasks", params={"after": token}, expect=400).text)
            answers.append(admin.request("GET", "/v1/tasks", params={"token": token}, expect=400).text)
            answers.append(Caller(http, None).request("GET", "/v1/tasks", params={"access_token": token}).text)
            answers.append(host.request("POST", f"/v1/tasks/{task_id}/attempts/1/renew", json={"lease_id": token}).text)
            answers.append(admin.request("POST", "/v1/tasks", json={"plan": {"steps": []}, "tenant": token}).text)
        metrics = http.get("/metrics").text
        assert "amc_commands_total" in metrics
        assert wrong_agent.process.wait(20) == 1
    finally:
        http.close()
        wrong_agent.stop()
        agent_code = agent.stop()
        server_code = server.stop()
    assert server_code == 0 and agent_code == 0, server.output()[-2000:] + agent.output()[-2000:]
    logs = {
        "amc serve": server.output(),
        "amc host run": agent.output(),
        "amc host run (bad token)": wrong_agent.output(),
    }
    assert "GET /v1/tasks" in logs["amc serve"] and " DEBUG " in logs["amc host run"]  # the chattiest logs were on
    assert "refused host 'h1'" in logs["amc host run (bad token)"]
    places = {**logs, "answers": "\n".join(answers), "GET /metrics": metrics}
    shown = [
        f"{place}: ...{_around(text, token)}..."
        for token in [*(entry["token"] for entry in TOKENS), *BAD]
        for place, text in places.items()
        if token in text
    ]
    assert not shown, "\n".join(shown)


def _around(text: str, token: str) -> str:
    at = text.index(token)
    return text[max(0, at - 80) : at + len(token) + 30]


@pytest.mark.req("ACCESS/s1")
def test_a_token_pasted_into_a_path_or_a_body_is_not_written_back_in_the_error(amc):
    token = amc.acme.token
    for path in (f"/v1/tasks/{token}", f"/v1/hosts/{token}", f"/v1/{token}", f"/v1/tasks/{token}/messages/m_1"):
        assert token not in amc.admin.request("GET", path, expect=404).text
    assert "[token]" in amc.admin.request("GET", f"/v1/tasks/{token}", expect=404).json()["detail"]
    answer = amc.h1.request("POST", f"/v1/tasks/{token}/attempts/1/renew", json={"lease_id": token}, expect=404)
    assert token not in answer.text
    assert token not in amc.admin.request("DELETE", f"/v1/tasks/{token}", expect=405).text
