"""Two `amc serve --store postgresql://...` processes on one database: standbys, takeover,
and a leader that was paused past its handover and must never commit again."""

from __future__ import annotations

import hashlib
import os
import signal
import time

import psycopg
import pytest

from amc.adapters.postgres.verify import verify
from tests.support.failover import Follower, Server, health, run_failover, write_tokens
from tests.support.plans import PLAN
from tests.support.waiting import eventually

LEASE_S = 5  # the default leader lease of amc serve: a paused leader loses the lock after it


@pytest.fixture
def pair(pg_url, tmp_path):
    tokens = write_tokens(tmp_path / "tokens.json", ["h1"])
    first = Server(pg_url, tmp_path / "a", tmp_path / "tokens.json")
    eventually(lambda: health(first.url)[0] == 200, timeout=10, what="the first server to lead")
    second = Server(pg_url, tmp_path / "b", tmp_path / "tokens.json")
    try:
        yield first, second, tokens
    finally:
        first.stop()
        second.stop()


@pytest.mark.req("HA/s1", "LEADER/s2")
def test_a_standby_answers_503_to_everything(pair):
    leader, standby, tokens = pair
    assert health(leader.url) == (200, {"status": "ok"})
    assert health(standby.url) == (503, {"status": "standby"})
    client = Follower([standby.url], tokens["client"], patience=0)
    for method, path in (("GET", "/v1/tasks"), ("POST", "/v1/tasks"), ("GET", "/v1/nowhere"), ("POST", "/metrics")):
        response = client.http.request(method, standby.url + path, headers={"Authorization": "Bearer x"})
        assert response.status_code == 503, (method, path)
        assert response.headers["Retry-After"] == "1"
        assert response.json()["code"] == "not_leader"
    # but amc's GET /metrics, which says only that this server does not lead (LEADER/s2)
    metrics = client.http.get(standby.url + "/metrics")
    assert metrics.status_code == 200 and "amc_leader 0.0" in metrics.text and "amc_tasks" not in metrics.text
    assert "amc_leader 1.0" in client.http.get(leader.url + "/metrics").text
    client.close()


@pytest.mark.req("HA/s2", "HA/s3")
def test_takeover_after_sigkill_keeps_the_lease_and_the_pending_cancellation(pair, pg_url):
    first, second, tokens = pair
    urls = [first.url, second.url]
    client, host = Follower(urls, tokens["client"]), Follower(urls, tokens["h1"])
    try:
        host.request("PUT", "/v1/hosts/h1", {"devices": [{"serial": "s1"}]}).raise_for_status()
        task = client.request("POST", "/v1/tasks", {"plan": PLAN}).json()
        claim = host.request("POST", "/v1/hosts/h1/claim", {"wait_seconds": 0}).json()
        lease = {"lease_id": claim["lease_id"]}
        attempt = f"/v1/tasks/{task['id']}/attempts/{claim['attempt']}"
        assert host.request("POST", attempt + "/start", lease).status_code == 200
        assert client.request("POST", f"/v1/tasks/{task['id']}/cancel", {"reason": "enough"}).status_code == 202

        killed = time.monotonic()
        first.signal(signal.SIGKILL)
        renewed = host.request("POST", attempt + "/renew", lease)  # finds the new leader itself
        took = time.monotonic() - killed
        assert renewed.status_code == 200, renewed.text
        assert renewed.json()["cancel_requested"] is True
        assert host.urls[host.current] == second.url and took < 5, took
        result = host.request("POST", attempt + "/result", {**lease, "status": "cancelled"})
        assert result.status_code == 200 and result.json()["status"] == "cancelled"
    finally:
        client.close()
        host.close()
    assert verify(pg_url) == []


@pytest.mark.req("HA/s4", "LEADER/s1")
def test_a_leader_paused_past_the_handover_never_commits_again(pair, pg_url):
    first, second, tokens = pair
    to_first = Follower([first.url], tokens["client"], patience=0)
    to_second = Follower([second.url], tokens["client"], patience=30)
    try:
        assert to_first.request("POST", "/v1/tasks", {"plan": PLAN, "idempotency_key": "before"}).status_code == 201
        first.signal(signal.SIGSTOP)
        stopped = time.monotonic()
        eventually(lambda: health(second.url)[0] == 200, timeout=4 * LEASE_S, what="the standby to take over")
        assert time.monotonic() - stopped >= LEASE_S - 1  # not before the paused leader's lease ran out
        assert to_second.request("POST", "/v1/tasks", {"plan": PLAN, "idempotency_key": "after"}).status_code == 201

        first.signal(signal.SIGCONT)
        refused = to_first.http.post(
            first.url + "/v1/tasks",
            json={"plan": PLAN, "idempotency_key": "woken"},
            headers={"Authorization": f"Bearer {tokens['client']}"},
        )
        assert refused.status_code == 503 and refused.json()["code"] == "not_leader"
        eventually(lambda: health(first.url) == (503, {"status": "standby"}), timeout=5, what="a standby")
        # and each told its operator (LEADER/s1)
        eventually(lambda: any("amc serve: standing by (lost the lead" in line for line in first.output), timeout=5)
        assert any("amc serve: now leading (epoch 2)" in line for line in second.output), second.output
    finally:
        to_first.close()
        to_second.close()
    with psycopg.connect(pg_url) as conn:
        keys = conn.execute("SELECT convert_from(body, 'UTF8')::json->>'idempotency_key' FROM amc_tasks").fetchall()
        assert sorted(k for (k,) in keys) == ["after", "before"]
        assert conn.execute("SELECT epoch FROM amc_leadership").fetchone() == (2,)
    assert verify(pg_url) == []


@pytest.mark.req("HA", "HA/s2", "HA/s3", "SAFETY/s1")
def test_failover_under_load_loses_no_acknowledged_command(pg_cluster, tmp_path):
    """`make failover` bounded: two kills of the leader under load from hosts and a client; the
    history the hosts and the client recorded passes the history checker."""
    report = run_failover(pg_cluster, tmp_path, kills=2, interval=2.5, hosts=2, clients=1)
    assert len(report.takeovers) == 2 and max(report.takeovers) < 5, report.takeovers
    assert report.counts.get("submit", 0) > 0 and report.counts.get("renew", 0) > 0, report.counts
    assert report.kept_leases > 0, "no attempt held across a kill renewed with its lease id"
    assert report.lost == [] and report.differences == []
    assert report.history.ok and report.history.checked["acknowledged"] > 0, report.history.violations[:5]


@pytest.mark.req("HA/s3")
def test_the_new_leaders_expiry_timer_expires_a_lease_nobody_asks_about(pair, pg_url):
    """Nothing but the new leader's own timer can expire this lease: no request names the task."""
    first, second, tokens = pair
    urls = [first.url, second.url]
    client, host = Follower(urls, tokens["client"]), Follower(urls, tokens["h1"])
    try:
        host.request("PUT", "/v1/hosts/h1", {"devices": [{"serial": "s1"}]}).raise_for_status()
        task = client.request("POST", "/v1/tasks", {"plan": PLAN}).json()
        claimed = host.request("POST", "/v1/hosts/h1/claim", {"lease_seconds": 2})
        assert claimed.status_code == 200
        first.signal(signal.SIGKILL)
        eventually(lambda: health(second.url)[0] == 200, timeout=5, what="the standby to lead")
    finally:
        client.close()
        host.close()

    def requeued() -> bool:
        with psycopg.connect(pg_url) as conn:
            row = conn.execute("SELECT status, lease_expires_at FROM amc_tasks WHERE id = %s", (task["id"],)).fetchone()
        return row == ("queued", None)

    eventually(requeued, timeout=10, interval=0.2, what="the lease to expire on the new leader by its timer")


@pytest.mark.req("HA/s3", "ARTIFACT/s8")
def test_an_artifact_stored_through_the_leader_is_read_from_the_next_one(pair, pg_url):
    first, second, tokens = pair
    urls = [first.url, second.url]
    client, host = Follower(urls, tokens["client"]), Follower(urls, tokens["h1"])
    data = os.urandom(700_000)  # three chunks
    try:
        host.request("PUT", "/v1/hosts/h1", {"devices": [{"serial": "s1"}]}).raise_for_status()
        task = client.request("POST", "/v1/tasks", {"plan": PLAN}).json()
        claim = host.request("POST", "/v1/hosts/h1/claim", {"wait_seconds": 0}).json()
        attempt = f"/v1/tasks/{task['id']}/attempts/{claim['attempt']}"
        assert host.request("POST", attempt + "/start", {"lease_id": claim["lease_id"]}).status_code == 200
        stored = host.http.put(
            first.url + attempt + "/artifacts/screen.bin",
            params={"step": "open"},
            content=data,
            headers={"Authorization": f"Bearer {tokens['h1']}", "Amc-Lease-Id": claim["lease_id"]},
        )
        assert stored.status_code == 201, stored.text
        artifact = stored.json()
        first.signal(signal.SIGKILL)
        read = client.request("GET", f"/v1/tasks/{task['id']}/artifacts/{artifact['id']}")
        assert client.urls[client.current] == second.url
        assert read.status_code == 200 and read.content == data
        assert read.headers["etag"] == f'"{hashlib.sha256(data).hexdigest()}"'
    finally:
        client.close()
        host.close()


@pytest.mark.req("HA/s3", "UPLOAD/s1")
def test_an_input_uploaded_through_the_leader_is_read_and_listed_by_the_next_one(pair, pg_url):
    first, second, tokens = pair
    client = Follower([first.url, second.url], tokens["client"])
    data = os.urandom(600_000)  # three chunks
    digest = hashlib.sha256(data).hexdigest()
    try:
        stored = client.http.put(
            first.url + f"/v1/inputs/{digest}", content=data, headers={"Authorization": f"Bearer {tokens['client']}"}
        )
        assert stored.status_code == 201, stored.text
        first.signal(signal.SIGKILL)
        read = client.request("GET", f"/v1/inputs/{digest}")
        assert client.urls[client.current] == second.url
        assert read.status_code == 200 and read.content == data
        listed = client.request("GET", "/v1/inputs").json()["inputs"]
        assert [(i["sha256"], i["size"]) for i in listed] == [(digest, len(data))]
    finally:
        client.close()
