"""A Host Agent killed outright (SIGKILL: no drain, no release): the fleet view says so within
`--host-timeout`, and its task is requeued when its lease runs out and finished elsewhere."""

from __future__ import annotations

import signal
import time

import pytest

from tests.agent.conftest import HOST_TOKENS
from tests.agent.helpers import device_commands, eventually, shell, tap
from tests.agent.test_cli import host_run

HOST_TIMEOUT = 2.0


@pytest.mark.req("LIVENESS/s1", "EXPIRY")
def test_a_killed_agent_reads_offline_and_its_task_is_requeued_and_finished_elsewhere(
    make_server, make_sim, make_agent, tmp_path
):
    server = make_server(lease_seconds=3.0, host_timeout=HOST_TIMEOUT)
    here = make_sim("k1")
    agent = host_run(server.url, here.server_port, tmp_path, HOST_TOKENS["h1"])
    try:
        eventually(lambda: server.admin.serials("h1") == ["k1"], what="h1's device registered")
        host = server.admin.host("h1")
        assert host["online"] is True and host["devices"][0]["online"] is True
        task_id = server.api.submit({"steps": [tap("a"), shell("b", "sleep 6"), tap("c")]})["id"]
        eventually(
            lambda: any(c.startswith("sleep") for c, _ in device_commands(here, "k1")), timeout=15, what="b running"
        )
        agent.send_signal(signal.SIGKILL)
        agent.wait(10)
        killed_at = time.monotonic()
    finally:
        agent.kill()

    # Within the host timeout (and a little for a loaded machine), the host and its device read offline.
    eventually(lambda: server.admin.host("h1")["online"] is False, timeout=HOST_TIMEOUT + 3, what="h1 offline")
    assert time.monotonic() - killed_at < HOST_TIMEOUT + 3
    host = server.admin.host("h1")
    assert host["last_seen_at"] is not None
    assert [d["online"] for d in host["devices"]] == [False]

    # Nothing released the attempt: it expires with its lease, and the task is queued again.
    eventually(lambda: server.api.task(task_id)["status"] == "queued", timeout=10, what="the task requeued")
    assert [a["outcome"] for a in server.api.task(task_id)["attempts"]] == ["expired"]

    # Another host takes it and finishes it.
    elsewhere = make_sim("k2")
    make_agent(server.url, elsewhere.server_port, "h2")
    done = eventually(lambda: (t := server.api.task(task_id))["status"] == "done" and t, timeout=30, what="done")
    assert [(a["host_id"], a["outcome"]) for a in done["attempts"]] == [("h1", "expired"), ("h2", "done")]
