"""The Host Agent given several server URLs follows the leader among them, and an attempt in
flight goes on across a change of leader (specs/protocol.md "High availability", HA/s5, HA/s7).

Real sockets throughout. The leader is the real server on an LMDB store: in-process
(`make_server`) for the first cases, and `amc serve` processes for the change of leader, where
one is killed (SIGKILL) and another is started on the same data directory and another port.
The standbys are `tests.support.standby.Standby`: a stand-in answering exactly the standby
contract (503 `{"status": "standby"}` on health, 503 `not_leader` with `Retry-After` on
everything else), until the PostgreSQL store with real standbys (issue 17, another branch)
lands; then these tests should run unchanged against it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import time

import pytest

from amc.agent.client import ControlPlane, Uncertain
from tests.agent.conftest import ADMIN_TOKEN, CLIENT_TOKEN, HOST_TOKENS
from tests.agent.helpers import eventually, shell, tap, wait_running
from tests.agent.test_cli import AMC, host_run
from tests.support.served import Served
from tests.support.standby import Standby
from tests.support.waiting import free_port

LEASE_SECONDS = 12.0  # renewals every 4 s: a lease outlives a change of leader even on a loaded machine


@pytest.fixture
def standbys():
    made: list[Standby] = []

    def make(port: int = 0) -> Standby:
        standby = Standby(port)
        made.append(standby)
        return standby

    yield make
    for standby in made:
        standby.stop()


@pytest.fixture
def serve():
    """`amc serve` processes, killed at teardown if a test left them running."""
    started: list[Served] = []

    def start(*args, **kwargs) -> Served:
        served = Served(*args, **kwargs)
        started.append(served)
        return served

    yield start
    for served in started:
        if served.process.poll() is None:
            served.stop()


@pytest.mark.req("HA/s5")
@pytest.mark.parametrize("first", ["standby", "down"])
def test_an_agent_whose_first_url_is_not_the_leader_works_through_the_next(
    first, make_server, make_sim, make_agent, standbys, tmp_path
):
    server = make_server(data=tmp_path / "data")
    standby = standbys() if first == "standby" else None
    first_url = standby.url if standby is not None else f"http://127.0.0.1:{free_port()}"  # refuses connections
    sim = make_sim("f1")
    agent = make_agent(f"{first_url},{server.url}", sim.server_port)

    task_id = server.api.submit({"steps": [tap("a"), shell("b", "sleep 1"), tap("c")]})["id"]
    done = server.api.wait_status(task_id, "done", timeout=20)
    assert [a["outcome"] for a in done["attempts"]] == ["done"]
    assert agent.record(task_id).answer == 200
    assert agent.agent.server is not None and agent.agent.server.endpoints.current == server.url
    if standby is not None:
        # Only the very first request (the registration) went to the standby: once the leader
        # answered, the agent kept to it, so claims, starts, renewals and the result went there.
        assert standby.requests == [("PUT", "/v1/hosts/h1")]


@pytest.mark.req("HA/s5")
def test_amc_host_run_takes_a_list_of_urls(make_server, sim, standbys, tmp_path):
    server = make_server()
    standby = standbys()
    agent = host_run(f"{standby.url},{server.url}", sim.server_port, tmp_path, HOST_TOKENS["h1"])
    try:
        task_id = server.api.submit({"steps": [tap("a")]})["id"]
        server.api.wait_status(task_id, "done", timeout=20)
    finally:
        agent.send_signal(signal.SIGTERM)
        _, stderr = agent.communicate(timeout=20)
    assert agent.returncode == 0, stderr
    assert standby.requests == [("PUT", "/v1/hosts/h1")]


@pytest.mark.req("HA/s6")
def test_a_request_perhaps_delivered_ends_uncertain_and_its_resend_goes_to_the_next_url(make_server, proxy_to):
    server = make_server()
    hung = proxy_to(server.port)
    hung.pause()  # requests reach the relay and hang there, as with a leader that stopped answering

    async def scenario() -> None:
        plane = ControlPlane(f"{hung.url},{server.url}", HOST_TOKENS["h1"], "h1", timeout=0.5)
        try:
            with pytest.raises(Uncertain, match="no answer in time"):
                await plane.register([])  # perhaps delivered: the call itself does not resend it
            assert plane.endpoints.current == server.url
            await plane.register([])  # the agent's resend (an identical PUT) goes to the next URL
        finally:
            await plane.aclose()

    try:
        asyncio.run(scenario())
    finally:
        hung.resume()
    assert server.admin.host("h1")["devices"] == []


def write_tokens(path) -> None:
    entries = [
        {"token": CLIENT_TOKEN, "role": "client", "tenant": "acme"},
        {"token": ADMIN_TOKEN, "role": "admin"},
        *({"token": token, "role": "host", "host_id": host} for host, token in HOST_TOKENS.items()),
    ]
    path.write_text(json.dumps(entries))


@pytest.mark.req("HA/s7", "CANCEL-INFLIGHT/s2", "LEADER/s3")
def test_attempts_in_flight_follow_the_leader_to_another_server_and_a_cancel_sent_meanwhile_reaches_them(
    make_sim, make_agent, standbys, serve, tmp_path, caplog
):
    caplog.set_level(logging.INFO, logger="amc.agent")
    tokens, data = tmp_path / "tokens.json", tmp_path / "data"
    write_tokens(tokens)
    port_a, port_b = free_port(), free_port()
    options = ("--lease-seconds", str(LEASE_SECONDS))
    leader_a = serve(data, *options, tokens=tokens, port=port_a)
    standby_s = standbys()  # a standby throughout
    standby_b = standbys(port_b)  # a standby until it is replaced by the next leader
    urls = ",".join([leader_a.url, standby_s.url, standby_b.url])
    sim = make_sim("m1", "m2")
    agent = make_agent(urls, sim.server_port, lease_seconds=None)  # the server's leases

    api = leader_a.caller(CLIENT_TOKEN)
    finishing = api.submit({"steps": [shell("slow", "sleep 14"), tap("after")]}, requirements={"serial": "m1"})["id"]
    cancelling = api.submit({"steps": [shell("long", "sleep 60"), tap("never")]}, requirements={"serial": "m2"})["id"]
    wait_running(sim, "m1", "sleep 14")
    wait_running(sim, "m2", "sleep 60")
    # Renewed on A at least once each, so the renewals counted later on B are the agent's on B.
    eventually(lambda: all(api.task(t)["attempts"][0]["renewals"] >= 1 for t in (finishing, cancelling)), timeout=10)
    renewed_on_a = {t: api.task(t)["attempts"][0]["renewals"] for t in (finishing, cancelling)}

    leader_a.stop(signal.SIGKILL)  # no leader now: A refuses connections, S and B are standbys
    eventually(
        lambda: any(path.endswith("/renew") for _, path in standby_s.requests),
        timeout=10,
        what="a renewal of the agent refused by the standby",
    )
    # A cancel sent while there is no leader: the CLI goes round the URLs until one leads.
    env = {**os.environ, "AMC_URL": urls, "AMC_TOKEN": CLIENT_TOKEN, "AMC_DATA": str(tmp_path / "none")}
    cancel = subprocess.Popen(
        [AMC, "task", "cancel", cancelling, "--json"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        eventually(lambda: standby_s.refused("POST", f"/v1/tasks/{cancelling}/cancel") >= 1, timeout=10)
        standby_b.stop()
        leader_b = serve(data, *options, tokens=tokens, port=port_b)  # the new leader, on the same store
        listening = time.monotonic()
        api_b = leader_b.caller(CLIENT_TOKEN)
        eventually(
            lambda: api_b.task(finishing)["attempts"][0]["renewals"] > renewed_on_a[finishing],
            timeout=LEASE_SECONDS,
            interval=0.01,
            what="a renewal on the new leader",
        )
        # The agent's retries after a round without a leader: the renewer's (a quarter of the
        # renewal interval) and the standbys' Retry-After (1 s); a lease is far longer.
        followed_in = time.monotonic() - listening
        print(f"first renewal on the new leader {followed_in:.2f} s after it listened")
        assert followed_in < LEASE_SECONDS / 3
        out, err = cancel.communicate(timeout=20)
    finally:
        cancel.kill()
    assert cancel.returncode == 0, err
    assert json.loads(out)["cancellation"]["state"] == "pending"  # 202: it waits for the host
    cancelled = api_b.wait_status(cancelling, "cancelled", timeout=20)
    done = api_b.wait_status(finishing, "done", timeout=30)

    # The same attempts, never expired or requeued: their leases (the same lease ids) were
    # renewed on B, which counted renewals beyond A's.
    for task in (done, cancelled):
        assert [(a["number"], a["host_id"]) for a in task["attempts"]] == [(1, "h1")]
        assert task["attempts"][0]["renewals"] > renewed_on_a[task["id"]]
    assert done["attempts"][0]["outcome"] == "done"
    assert cancelled["attempts"][0]["outcome"] == "cancelled"
    assert cancelled["cancellation"]["state"] == "completed" and cancelled["cancellation"]["delivered_at"]
    finished, stopped = agent.record(finishing), agent.record(cancelling)
    assert (finished.status, finished.answer) == ("done", 200)
    assert (stopped.status, stopped.answer) == ("cancelled", 200)
    assert [s["status"] for s in stopped.body["steps"]] == ["interrupted", "not_started"]
    assert agent.agent.server is not None and agent.agent.server.endpoints.current == leader_b.url
    # The operator reads a change of leader, once, and no claim failure as an outage (LEADER/s3)
    said = [r.getMessage() for r in caplog.records if r.name.startswith("amc.agent") and r.levelno >= logging.INFO]
    assert said.count(f"leader changed from {leader_a.url} to {leader_b.url}") == 1, said
    assert not [line for line in said if "claim failed" in line or "answered again" in line], said
