"""No token ever appears in a log, an error detail or a metric.

A real `amc serve` (access log on, debug logs) and a real `amc host run` (debug logs, over the
device simulator) work one task through; around them, callers send bad tokens (unknown, one
differing from a real one in its last character, the wrong scheme), good tokens of every role,
and good tokens where they do not belong (in the path, in the query). Then every line both
processes wrote, every answer's body and `GET /metrics` are searched for every token.
"""

from __future__ import annotations

import json

import pytest

from amc.cli.launch import Agent
from amc.sim import SimDeviceSpec, Simulator
from tests.support.http import Caller, http_client
from tests.support.served import serve

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


class Output:
    """Every line a child printed, stdout and stderr together, for the checks at the end."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def keep(self, name: str, line: str) -> None:
        self.lines.append(line + "\n")

    def text(self) -> str:
        return "".join(self.lines)


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
    logs = {name: Output() for name in ("amc serve", "amc host run", "amc host run (bad token)")}
    options = ("--access-log", "--log-level", "debug", "--lease-seconds", "5")
    server = serve(tmp_path / "data", *options, sink=logs["amc serve"].keep, tokens=tokens, timeout=20)
    url = server.url
    agent_options = {"adb_port": simulator.server_port, "keep_artifacts": tmp_path / "artifacts", "log_level": "debug"}
    agent_options |= {"claim_wait": 1, "scan_seconds": 0.2}
    agent = Agent(url, "h1", HOST, sink=logs["amc host run"].keep, **agent_options)
    wrong_agent = Agent(url, "h1", BAD[3], sink=logs["amc host run (bad token)"].keep, **agent_options)
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
        wrong_agent.stop(20)
        agent_code = agent.stop(20)
        server_code = server.stop(20)
    text = {place: output.text() for place, output in logs.items()}
    assert server_code == 0 and agent_code == 0, text["amc serve"][-2000:] + text["amc host run"][-2000:]
    assert "GET /v1/tasks" in text["amc serve"] and " DEBUG " in text["amc host run"]  # the chattiest logs were on
    assert "refused host 'h1'" in text["amc host run (bad token)"]
    places = {**text, "answers": "\n".join(answers), "GET /metrics": metrics}
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
