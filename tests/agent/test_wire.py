"""The agent's small pure parts: the server-clock estimate and the result body."""

from __future__ import annotations

import attrs
import orjson

from amc.agent.clock import ServerClock
from amc.agent.wire import MAX_BODY_BYTES, parse_assignment, result_body
from amc.core.execution import FinalReport
from amc.core.records import StepOutcome


class FakeMonotonic:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_server_clock_runs_on_the_monotonic_clock_from_its_latest_anchor():
    local = FakeMonotonic()
    clock = ServerClock(5_000_000, at=100.0, monotonic=local)
    local.now = 101.5
    assert clock.now() == 5_001_500
    assert clock.seconds_until(5_003_000) == 1.5
    clock.observe(5_001_400, at=101.5)  # a tighter anchor would read earlier: readings never go back
    assert clock.now() == 5_001_500
    local.now = 102.0
    assert clock.now() == 5_001_900


def test_an_assignment_is_read_with_server_times_in_ms():
    data = {
        "task_id": "t_1",
        "attempt": 2,
        "lease_id": "l_1",
        "lease_expires_at": "2026-01-01T00:00:30.000Z",
        "lease_seconds": 1.5,
        "device": "d1",
        "cancel_requested": False,
        "plan": {"stages": [{"id": "s", "steps": [{"id": "a", "action": "future-action", "args": {}}]}]},
    }
    assignment = parse_assignment(data)
    assert assignment.lease_ms == 1500 and assignment.granted_at == assignment.lease_expires_at - 1500
    assert [step.action for step in assignment.plan.all_steps()] == ["future-action"]  # fails when run, not here


def _report(outputs: list[str]) -> FinalReport:
    steps = tuple(
        StepOutcome(id=f"s{i}", status="completed", started_at=1000, ended_at=2000, output=output)
        for i, output in enumerate(outputs)
    )
    return FinalReport(status="done", steps=steps, metadata={})


def test_the_result_body_is_the_same_bytes_every_time():
    report = _report(["hello\n"])
    report = attrs.evolve(report, steps=(attrs.evolve(report.steps[0], artifacts=("a_1", "a_2")),))
    body = result_body("l_1", report)
    assert body == result_body("l_1", report)
    step = {
        "id": "s0",
        "status": "completed",
        "started_at": "1970-01-01T00:00:01.000Z",
        "ended_at": "1970-01-01T00:00:02.000Z",
        "output": "hello\n",
        "artifacts": ["a_1", "a_2"],
    }
    assert orjson.loads(body) == {"lease_id": "l_1", "status": "done", "metadata": {}, "steps": [step]}


def test_the_result_body_fits_the_server_limits():
    huge = ["x" * 60_000 + f"tail {i}" for i in range(200)]  # 12 MB of output
    body = result_body("l_1", _report(huge))
    assert len(body) <= MAX_BODY_BYTES
    data = orjson.loads(body)
    assert all(step["output"].endswith(f"tail {i}") for i, step in enumerate(data["steps"]))  # the tail is kept


def test_a_start_or_renewal_carries_the_progress_when_given():
    from amc.agent.wire import lease_body
    from amc.core.execution import RunProgress

    assert orjson.loads(lease_body("l1")) == {"lease_id": "l1"}
    assert orjson.loads(lease_body("l1", RunProgress(step="b", ended=1))) == {
        "lease_id": "l1",
        "progress": {"step": "b", "ended": 1},
    }
    assert orjson.loads(lease_body("l1", RunProgress(step=None, ended=3)))["progress"] == {"step": None, "ended": 3}
