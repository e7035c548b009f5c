"""The exhaustive explorer: clean on the real kernel, and it finds a planted bug with a short trace."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from amc.cli.model import model
from amc.core import lifecycle
from amc.core.explorer import Scope, explore

SMALL = Scope(hosts=2, tasks=2, max_attempts=1, churn=True)


def test_the_kernel_is_clean_in_a_small_scope():
    result = explore(SMALL)
    assert result.complete and result.violation is None
    assert result.states > 5_000 and result.transitions > result.states


def test_the_kernel_is_clean_with_retries_and_device_churn():
    result = explore(Scope(hosts=1, tasks=1, max_attempts=3, churn=True))
    assert result.complete and result.violation is None


def test_the_kernel_is_clean_with_messages_retries_and_churn():
    result = explore(Scope(hosts=1, tasks=1, max_attempts=2, churn=True, messages=1))
    assert result.complete and result.violation is None
    assert result.states > 5_000


def test_a_planted_bug_is_found_with_a_shortest_trace(monkeypatch):
    broken = dict(lifecycle.TASK)
    for status in ("assigned", "dispatched"):  # expiry ignores a pending cancellation
        broken[(status, "expire")] = tuple(m for m in broken[(status, "expire")] if m[1] != "cancelled")
    monkeypatch.setattr(lifecycle, "TASK", broken)
    result = explore(Scope(hosts=1, tasks=1, max_attempts=2))
    assert result.violation and any(v.startswith("I6") for v in result.violation)
    assert result.trace == ["submit t1", "h1 registers d1", "claim h1", "cancel t1", "tick", "tick"]


def test_a_planted_release_bug_is_found_with_a_shortest_trace(monkeypatch):
    broken = dict(lifecycle.TASK)
    for status in ("assigned", "dispatched"):  # a release ignores a pending cancellation
        broken[(status, "release")] = tuple(m for m in broken[(status, "release")] if m[1] != "cancelled")
    monkeypatch.setattr(lifecycle, "TASK", broken)
    result = explore(Scope(hosts=1, tasks=1, max_attempts=2))
    assert result.violation and any(v.startswith("I6") for v in result.violation)
    assert result.trace == ["submit t1", "h1 registers d1", "claim h1", "cancel t1", "release t1#1"]


def test_model_check_command_prints_counts_last_and_exits_by_result():
    runner = CliRunner()
    ok = runner.invoke(model, ["check", "--hosts", "1", "--tasks", "1", "--max-attempts", "1"])
    assert ok.exit_code == 0, ok.output
    assert ok.output.strip().splitlines()[-1].startswith("states: ")
    cut = runner.invoke(model, ["check", "--hosts", "1", "--tasks", "2", "--max-states", "50"])
    assert cut.exit_code == 2 and "incomplete" in cut.output


def test_a_planted_part_b_bug_is_found_with_a_shortest_trace(monkeypatch):
    from amc.core import kernel
    from amc.core.events import TaskRequeued

    def requeue_ignoring_the_pause(state, e):  # a task paused in flight comes back claimable
        task = kernel.replace(state.tasks[e.task_id], status="queued", updated_at=e.at)
        state.tasks[task.id] = task
        state.queue.push(task)

    monkeypatch.setitem(kernel._APPLIERS, TaskRequeued, requeue_ignoring_the_pause)
    result = explore(Scope(hosts=1, tasks=1, max_attempts=2, messages=1))
    assert result.violation == ["I10: task t1 was claimed while held"]
    # A release requeues at once, so the shortest way back to the queue is a release, not two ticks.
    assert result.trace[-2:] == ["release t1#1", "claim h1"] and "pause t1" in result.trace


def test_the_kernel_is_clean_with_artifacts_from_live_stale_and_foreign_attempts():
    result = explore(Scope(hosts=2, tasks=1, max_attempts=2, artifacts=2))
    assert result.complete and result.violation is None
    assert result.states > 2_000


def test_the_kernel_is_clean_with_artifacts_of_steered_plans():
    result = explore(Scope(hosts=1, tasks=1, max_attempts=1, messages=1, artifacts=2))
    assert result.complete and result.violation is None


def test_a_planted_part_c_bug_is_found_with_a_shortest_trace(monkeypatch):
    from amc.core import artifacts

    monkeypatch.setattr(artifacts, "check_live", lambda attempt, now: None)  # an ended attempt stores evidence
    result = explore(Scope(hosts=1, tasks=1, max_attempts=1, artifacts=2))
    assert result.violation and all(v.startswith("I12") for v in result.violation)
    assert result.violation == ["I12: artifact t1/t1a1 was added by attempt 1 without a live lease"]
    assert result.trace == ["submit t1", "h1 registers d1", "claim h1", "report done t1#1", "store x=a t1#1"]


def test_a_planted_purge_of_a_running_task_is_found(monkeypatch):
    from amc.core import kernel
    from amc.core.commands import PurgeArtifacts
    from amc.core.decisions import Decision
    from amc.core.events import ArtifactsPurged

    def purge_whatever_the_status(state, c):  # the evidence of a running task vanishes
        task = state.tasks[c.task_id]
        return Decision(events=(ArtifactsPurged(at=c.now, task_id=task.id, artifacts=task.artifacts),))

    monkeypatch.setitem(kernel._DECIDERS, PurgeArtifacts, purge_whatever_the_status)
    result = explore(Scope(hosts=1, tasks=1, max_attempts=1, artifacts=2))
    assert result.violation == ["I12: artifacts of task t1 were changed or removed"]
    assert result.trace[-1] == "purge t1"


@pytest.mark.req("ARTIFACT/s9")
def test_a_step_outcome_listing_another_attempts_artifact_is_found(monkeypatch):
    from amc.core import artifacts

    monkeypatch.setattr(artifacts, "listing_problem", lambda task, number, steps: None)  # any id may be listed
    result = explore(Scope(hosts=1, tasks=1, max_attempts=2, artifacts=2))
    assert result.violation and all(v.startswith("I12") for v in result.violation)
    assert "lists artifacts" in result.violation[0]
    assert result.trace[-1].startswith("report done with evidence t1#2")
