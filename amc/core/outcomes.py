"""Whether the step outcomes a host reports fit its attempt: one outcome per step of the plan
as steered, in order, the steps a correction removed said to be, and each step's own artifacts.

A result (`ReportResult`) and a release (`ReleaseAttempt`) may both carry step outcomes; the
kernel and `amc.core.leases` find the attempt they name here, refused (invalid_request) with
the problem found in its outcomes, before any lease check.
"""

from __future__ import annotations

from amc.core import artifacts, steering
from amc.core.commands import ReleaseAttempt, ReportResult
from amc.core.decisions import Decision, find_attempt, reject
from amc.core.errors import Code
from amc.core.lifecycle import StepStatus
from amc.core.records import Attempt, StepOutcome, Task
from amc.core.state import State


def reported_attempt(state: State, c: ReportResult | ReleaseAttempt) -> tuple[Task, Attempt] | Decision:
    """The task and attempt a report or release names, if the step outcomes it carries (if
    any) fit that attempt; else the not_found or invalid_request decision."""
    found = find_attempt(state, c)
    if isinstance(found, Decision) or c.steps is None:
        return found
    task, attempt = found
    untruthful = _steps_problem(task, attempt.number, c.steps)
    if untruthful:
        return reject(Code.invalid_request, untruthful)
    return found


def _steps_problem(task: Task, number: int, steps: tuple[StepOutcome, ...]) -> str | None:
    if task.session is not None:
        return "steps: a session's outcomes are its actions'; report none"
    return _plan_steps_problem(task, number, steps)


def _plan_steps_problem(task: Task, number: int, steps: tuple[StepOutcome, ...]) -> str | None:
    """Why a result's step outcomes do not fit the attempt's plan, or None: one outcome per
    planned step (of the plan as steered) in order, ``not_started``/``steered`` exactly
    for the steps an admitted correction removed (a step that ran is never passed off as
    steered away), and only the attempt's own artifacts of each step listed."""
    if task.admissions:
        outline = steering.attempt_outline(task, number)
        planned = [e.step.id for e in outline]
        removed = {e.step.id for e in outline if e.removed_by is not None}
    else:
        planned, removed = [s.id for s in task.plan.all_steps()], set()
    reported = [o.id for o in steps]
    if reported != planned:
        return (
            "steps: must name every planned step once, in plan order"
            f" ({len(planned)} planned, first difference at {_first_difference(planned, reported)})"
        )
    for i, outcome in enumerate(steps):
        steered = outcome.status == StepStatus.not_started and outcome.reason == steering.STEERED
        if steered != (outcome.id in removed):
            was, should = (
                ("removed", "not_started with reason steered")
                if outcome.id in removed
                else ("not removed", "its own outcome")
            )
            return f"steps[{i}]: step {outcome.id!r} was {was} by a correction; report {should}"
    return artifacts.listing_problem(task, number, steps)


def _first_difference(planned: list[str], reported: list[str]) -> str:
    for index, (want, got) in enumerate(zip(planned, reported)):
        if want != got:
            return f"position {index}: expected step {want!r}, got {got!r}"
    if len(reported) < len(planned):
        return f"position {len(reported)}: step {planned[len(reported)]!r} is missing"
    return f"position {len(planned)}: step {reported[len(planned)]!r} is not planned"
