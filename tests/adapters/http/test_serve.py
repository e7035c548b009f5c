"""`amc serve` as a real process: first start, tokens file, graceful SIGTERM, and a pending
cancellation that survives SIGTERM and SIGKILL restarts (CANCEL-INFLIGHT/s1)."""

from __future__ import annotations

import json
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.support.http import Caller, http_client
from tests.support.plans import PLAN
from tests.support.served import Served

try:
    from amc.adapters.lmdb import LmdbService  # noqa: F401

    HAVE_LMDB = True
except ImportError:
    HAVE_LMDB = False

needs_lmdb = pytest.mark.skipif(not HAVE_LMDB, reason="needs the LMDB store")

TOKENS = [
    {"token": "serve-admin-token-000000", "role": "admin"},
    {"token": "serve-client-acme-000000", "role": "client", "tenant": "acme"},
    {"token": "serve-host-h1-0000000000", "role": "host", "host_id": "h1"},
]


@pytest.fixture
def tokens_file(tmp_path) -> Path:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps(TOKENS))
    return path


def test_the_first_start_writes_a_private_tokens_file_and_prints_only_its_path(tmp_path):
    data = tmp_path / "data"
    served = Served(data, "--access-log", "--log-level", "debug")  # the chattiest logs: still no token
    try:
        served.caller("a-token-nobody-has-0000").call("GET", "/v1/tasks", expect=401)
        path = data / "tokens.json"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        entries = json.loads(path.read_text())
        assert sorted(e["role"] for e in entries) == ["admin", "client", "host"]
        assert str(path) in "".join(served.output)
        client = served.caller(next(e["token"] for e in entries if e["role"] == "client"))
        assert client.submit(PLAN)["tenant"] == "default"
        host = served.caller(next(e["token"] for e in entries if e["role"] == "host"))
        host_id = next(e["host_id"] for e in entries if e["role"] == "host")
        host.register(host_id, ["emulator-5554"])
    finally:
        assert served.stop() == 0
    everything = "".join(served.output)
    assert "GET /v1/tasks" in everything  # the access log was on
    assert not any(e["token"] in everything for e in entries) and "a-token-nobody-has" not in everything
    # A second start reuses the file.
    again = Served(data)
    try:
        assert again.caller(entries[0]["token"]).call("GET", "/v1/tasks")["tasks"][0]["tenant"] == "default"
    finally:
        again.stop()


def test_a_bad_tokens_file_is_refused_without_a_traceback(tmp_path):
    bad = tmp_path / "tokens.json"
    bad.write_text(json.dumps([{"token": "secret-secret-secret", "role": "root"}]))
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from amc.cli import main; main()",
            "serve",
            "--data",
            str(tmp_path / "d"),
            "--tokens",
            str(bad),
            "--port",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode != 0
    assert "role" in result.stderr and "Traceback" not in result.stderr
    assert "secret-secret-secret" not in result.stderr + result.stdout


def test_serve_help_opens_nothing(tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", "from amc.cli import main; main()", "serve", "--help"],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=tmp_path,
    )
    assert result.returncode == 0 and "--lease-seconds" in result.stdout
    assert list(tmp_path.iterdir()) == []


def test_sigterm_finishes_in_flight_requests_and_releases_waiting_claims(tmp_path, tokens_file):
    served = Served(tmp_path / "data", tokens=tokens_file)
    host = served.caller("serve-host-h1-0000000000")
    host.register("h1", ["emulator-5554"])
    waiting = Caller(http_client(served.url), "serve-host-h1-0000000000")
    result = {}
    thread = threading.Thread(
        target=lambda: result.update(claim=waiting.request("POST", "/v1/hosts/h1/claim", json={"wait_seconds": 20})),
        daemon=True,
    )
    thread.start()
    time.sleep(0.5)
    started = time.monotonic()

    assert served.stop(signal.SIGTERM) == 0

    thread.join(5)
    assert result["claim"].status_code == 204
    assert time.monotonic() - started < 10
    with pytest.raises(httpx.TransportError):
        httpx.get(served.url + "/v1/health", timeout=2)


@pytest.mark.req("CANCEL-INFLIGHT/s1")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
@needs_lmdb
def test_a_pending_cancellation_survives_a_restart(tmp_path, tokens_file, sig):
    data = tmp_path / "data"
    served = Served(data, "--lease-seconds", "120", tokens=tokens_file)
    client = served.caller("serve-client-acme-000000")
    host = served.caller("serve-host-h1-0000000000")
    task = client.submit(PLAN)
    host.register("h1", ["emulator-5554"])
    lease = host.claim("h1")
    host.start(task["id"], 1, lease["lease_id"])
    pending = client.cancel(task["id"], "wrong build", expect=202)
    assert pending["cancellation"]["state"] == "pending"

    code = served.stop(sig)
    assert code == (0 if sig == signal.SIGTERM else -signal.SIGKILL)

    served = Served(data, "--lease-seconds", "120", tokens=tokens_file)
    try:
        client = served.caller("serve-client-acme-000000")
        host = served.caller("serve-host-h1-0000000000")
        after = client.task(task["id"])
        assert after == pending
        assert after["status"] == "dispatched" and after["attempts"][0]["outcome"] is None
        assert host.renew(task["id"], 1, lease["lease_id"])["cancel_requested"] is True
        assert client.task(task["id"])["cancellation"]["delivered_at"] is not None
        done = host.report(task["id"], 1, lease["lease_id"], "cancelled")
        assert done["status"] == "cancelled" and done["cancellation"]["state"] == "completed"
        assert [e["type"] for e in client.history(task["id"])] == [
            "submitted",
            "assigned",
            "dispatched",
            "cancellation_requested",
            "cancellation_delivered",
            "ended",
        ]
    finally:
        served.stop()


@needs_lmdb
def test_a_manual_clock_resumes_where_it_stood(tmp_path, tokens_file):
    data = tmp_path / "data"
    served = Served(data, "--clock", "manual", tokens=tokens_file)
    admin = served.caller("serve-admin-token-000000")
    stood = admin.advance(10)["now"]
    served.stop(signal.SIGKILL)
    served = Served(data, "--clock", "manual", tokens=tokens_file)
    try:
        from amc.core.times import from_rfc3339

        now = served.caller("serve-admin-token-000000").advance(1.5)["now"]
        assert from_rfc3339(now) == from_rfc3339(stood) + 1500
    finally:
        served.stop()
