"""A real `amc serve` with its lease fence taken out is caught by the history checker. (SAFETY/s3)

The server runs as a process started by the test; with the fault planted, a `sitecustomize`
module (on the child's PYTHONPATH) replaces the kernel's lease checks 3-5 (replaced, ended,
expired: `amc.core.decisions.check_current` and `check_live`) with ones that pass everything,
before the server imports its kernel. Then:

- host h1 claims the task with a short lease and starts it, and lets the lease run out;
- the task is queued again and host h2 claims it (attempt 2, a long lease);
- h1 renews its old lease. A correct server answers 409 `lease_replaced`; the faulty one
  grants it, and h1 now believes it holds the task while h2 does.

Both clients record their history; the checker passes the correct server's and reports
rule 1 (one holder) for the faulty one's.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import httpx
import pytest

from amc.check.final import read_final_state
from amc.check.operations import read
from amc.check.recorder import HistoryFile, SyncRecordingTransport
from amc.check.rules import Report, check, message_tasks
from amc.cli.launch import Server, child_env
from tests.support.http import Caller
from tests.support.plans import PLAN

SKIP_THE_FENCE = """\
import amc.core.decisions as decisions

decisions.check_current = lambda task, attempt: None
decisions.check_live = lambda attempt, now: None
"""

TOKENS = [
    {"token": "planted-admin-000000000000", "role": "admin"},
    {"token": "planted-client-00000000000", "role": "client", "tenant": "default"},
    {"token": "planted-host-h1-0000000000", "role": "host", "host_id": "h1"},
    {"token": "planted-host-h2-0000000000", "role": "host", "host_id": "h2"},
]


def run_scenario(tmp_path: Path, *, faulty: bool) -> tuple[Report, int]:
    """The scenario against a correct or a faulty server: the checker's report, and the
    status h1's renewal of its replaced lease was answered with."""
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps(TOKENS))
    env = child_env()
    if faulty:
        planted = tmp_path / "planted"
        planted.mkdir()
        (planted / "sitecustomize.py").write_text(SKIP_THE_FENCE)
        env["PYTHONPATH"] = os.pathsep.join([str(planted), *filter(None, [env.get("PYTHONPATH")])])
    options = ("--min-lease-seconds", "0.5", "--lease-seconds", "30")
    server = Server(tmp_path / "data", *options, tokens=tokens, env=env)
    history = HistoryFile(tmp_path / "history.jsonl")

    def caller(name: str, token: str) -> Caller:
        transport = SyncRecordingTransport(httpx.HTTPTransport(), history, name)
        return Caller(httpx.Client(base_url=server.url, timeout=10, transport=transport), token, name)

    try:
        client = caller("client", TOKENS[1]["token"])
        h1, h2 = caller("h1", TOKENS[2]["token"]), caller("h2", TOKENS[3]["token"])
        h1.register("h1", ["d1"])
        h2.register("h2", ["d2"])
        task = client.submit(PLAN, max_attempts=3)
        first = h1.claim("h1", lease_seconds=0.6)
        assert first is not None and first["task_id"] == task["id"]
        h1.start(task["id"], 1, first["lease_id"])
        time.sleep(1.0)  # the lease runs out; the task is queued again
        second = h2.claim("h2", lease_seconds=30, wait_seconds=5)
        assert second is not None and second["task_id"] == task["id"] and second["attempt"] == 2
        h2.start(task["id"], 2, second["lease_id"])
        stale = h1.request("POST", f"/v1/tasks/{task['id']}/attempts/1/renew", json={"lease_id": first["lease_id"]})
        h2.renew(task["id"], 2, second["lease_id"])
        operations = read([history.path]).operations
        final = read_final_state(server.url, TOKENS[0]["token"], message_tasks(operations))
        return check(read([history.path]), final), stale.status_code
    finally:
        server.stop(10)
        history.close()


@pytest.mark.req("SAFETY/s3")
def test_a_correct_server_refuses_the_stale_lease_and_its_history_passes(tmp_path):
    report, stale = run_scenario(tmp_path, faulty=False)
    assert stale == 409
    assert report.ok, report.violations
    assert report.checked["one holder"] == 1


@pytest.mark.req("SAFETY/s3")
def test_a_server_without_the_lease_fence_is_caught_by_rule_one(tmp_path):
    report, stale = run_scenario(tmp_path, faulty=True)
    assert stale == 200  # the planted fault did take: the replaced lease was renewed
    assert "one holder" in {v.rule for v in report.violations}, report.violations
    assert any("attempt 1" in v.detail and "attempt 2" in v.detail for v in report.violations)
