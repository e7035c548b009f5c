"""GET /metrics: commands by type and outcome, tasks by status, active leases, commits."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families


def samples(amc) -> dict[tuple[str, tuple], float]:
    text = amc.anon.request("GET", "/metrics", expect=200).text
    assert amc.anon.last.headers["content-type"].startswith("text/plain")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_metrics_count_commands_tasks_and_leases(amc):
    task_id, lease = amc.claimed(start=True)
    amc.acme.submit()
    amc.h2.renew(task_id, 1, lease["lease_id"], expect=409)
    amc.h1.renew(task_id, 1, lease["lease_id"])

    found = samples(amc)

    def commands(kind, outcome):
        return found[("amc_commands_total", (("outcome", outcome), ("type", kind)))]

    assert commands("submit_task", "accepted") == 2
    assert commands("renew_lease", "accepted") == 1
    assert commands("renew_lease", "lease_foreign") == 1
    assert commands("claim_task", "accepted") == 1
    assert found[("amc_tasks", (("status", "queued"),))] == 1
    assert found[("amc_tasks", (("status", "dispatched"),))] == 1
    assert found[("amc_active_leases", ())] == 1
    assert found[("amc_command_seconds_count", (("type", "submit_task"),))] == 2
    assert ("amc_commit_batch_size_count", ()) in found and ("amc_commit_seconds_count", ()) in found


def test_commits_reported_by_the_store_are_observed(amc):
    amc.app.state.context.metrics.on_commit(8, 0.002)
    found = samples(amc)
    assert found[("amc_commit_batch_size_count", ())] == 1
    assert found[("amc_commit_batch_size_sum", ())] == 8
    assert found[("amc_commit_seconds_sum", ())] == 0.002


def test_metrics_never_show_tokens(amc):
    amc.stranger.tasks(expect=401)
    assert "tok-" not in amc.anon.request("GET", "/metrics").text


def test_metrics_show_the_event_loops_tasks_and_the_event_streams_readers(amc):
    """What the soak (bench/soak.py) watches for a slow leak."""
    found = samples(amc)
    assert found[("amc_asyncio_tasks", ())] >= 1  # at least the one serving this scrape
    assert found[("amc_event_stream_readers", ())] == 0
