"""Fixtures for the CLI tests: a real server on a socket, the CLI run in-process, a fake host.

- `server`: the control plane (create_app on uvicorn in a thread, in-memory store) with a
  client token of tenant `acme`, an admin token and a host token for `h1`.
- `cli(*args, token=..., input=...)`: runs `amc ...` with click's runner, AMC_URL and
  AMC_TOKEN set for that server; returns the click Result (`exit_code`, `stdout`, `stderr`).
- `host`: the host h1 speaking HTTP (register, claim, start, report), to move tasks into
  the states the commands must handle without running a Host Agent.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from amc.adapters.http.app import create_app
from amc.adapters.http.auth import Principal, TokenTable
from amc.adapters.http.server import ThreadedServer
from amc.adapters.http.settings import Settings
from amc.cli import main
from amc.service import MemoryService, SystemClock
from tests.support.http import Caller, http_client

CLIENT_TOKEN = "tok-cli-tests-client-0000"
ADMIN_TOKEN = "tok-cli-tests-admin-00000"
HOST_TOKEN = "tok-cli-tests-host-h1-000"


@pytest.fixture
def server():
    tokens = TokenTable(
        [
            (CLIENT_TOKEN, Principal(role="client", tenant="acme")),
            (ADMIN_TOKEN, Principal(role="admin")),
            (HOST_TOKEN, Principal(role="host", host_id="h1")),
        ]
    )
    threaded = ThreadedServer(create_app(MemoryService(SystemClock()), Settings(), tokens=tokens)).start()
    yield threaded
    threaded.stop()


@pytest.fixture
def cli(server, tmp_path, monkeypatch):
    # The tests must never find a developer's own .amc or AMC_* settings.
    for name in ("AMC_URL", "AMC_TOKEN", "AMC_DATA"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)

    def run(
        *args: str,
        token: str | None = CLIENT_TOKEN,
        url: str | None = None,
        input: str | None = None,
        env: dict | None = None,
    ):
        environment = {"AMC_URL": url or server.url, **(env or {})}
        if token is not None:
            environment["AMC_TOKEN"] = token
        return CliRunner().invoke(main, list(args), input=input, env=environment, catch_exceptions=False)

    return run


class FakeHost:
    """Host h1, without an agent: enough of the host protocol to put tasks into every status."""

    def __init__(self, url: str):
        self.caller = Caller(http_client(url), HOST_TOKEN, "h1")

    def register(self, *serials: str, model: str = "Pixel 7") -> None:
        self.caller.register("h1", [{"serial": s, "attributes": {"model": model}} for s in serials])

    def claim(self, serial: str = "dev-1", **body) -> dict | None:
        return self.caller.claim("h1", devices=[serial], **body)

    def start(self, lease: dict) -> dict:
        return self.caller.start(lease["task_id"], lease["attempt"], lease["lease_id"])

    def renew(self, lease: dict) -> dict:
        return self.caller.renew(lease["task_id"], lease["attempt"], lease["lease_id"])

    def progress(self, lease: dict, step: str | None, ended: int) -> dict:
        """A renewal that says which step runs and how many have ended (v1.1 progress)."""
        body = {"lease_id": lease["lease_id"], "progress": {"step": step, "ended": ended}}
        return self.caller.call("POST", f"/v1/tasks/{lease['task_id']}/attempts/{lease['attempt']}/renew", body, 200)

    def acknowledge(self, lease: dict, message_id: str, state: str, **body) -> dict:
        return self.caller.acknowledge(lease["task_id"], lease["attempt"], lease["lease_id"], message_id, state, **body)

    def report(self, lease: dict, status: str = "done") -> dict:
        return self.caller.report(lease["task_id"], lease["attempt"], lease["lease_id"], status)

    def dispatch(self, serial: str = "dev-1") -> dict:
        """Claim and start the next task on `serial`; the lease."""
        lease = self.claim(serial)
        self.start(lease)
        return lease

    def close(self) -> None:
        self.caller.http.close()


@pytest.fixture
def host(server):
    fake = FakeHost(server.url)
    fake.register("dev-1")
    yield fake
    fake.close()
