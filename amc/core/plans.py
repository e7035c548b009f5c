"""Plan validation: raw JSON -> `amc.core.records.Plan`, or `InvalidRequest` naming the step.

The rules (specs/protocol.md, Plan): a plan is exactly one of ``{"steps": [...]}`` or
``{"stages": [{"id", "steps"}, ...]}``, never empty, no stage empty; a step is
``{"id", "action", "args"}`` with an id unique in the whole plan; each action takes the
arguments of the action table, `amc.core.actions`. Every refusal's detail names the offending
step id (or stage id), since a plan of a few hundred steps is unreadable otherwise. Session
actions and the steps of steers and follow-ups are checked by the same `parse_step`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from amc.core import actions
from amc.core.errors import InvalidRequest
from amc.core.records import Plan, Stage, Step

MAX_STEPS = 1000
MAX_STAGES = 100
MAX_ID_LENGTH = 128


def _fail(detail: str) -> InvalidRequest:
    return InvalidRequest(detail)


def _step_id(raw: Any, where: str) -> str:
    step_id = raw.get("id") if isinstance(raw, dict) else None
    if not isinstance(step_id, str) or not step_id or len(step_id) > MAX_ID_LENGTH:
        raise _fail(f"{where}: id must be a non-empty string of at most {MAX_ID_LENGTH} characters")
    return step_id


def parse_step(raw: Any, where: str) -> Step:
    """One step; `where` locates it for a step whose id is unusable (``plan.steps[3]``)."""
    if not isinstance(raw, dict):
        raise _fail(f"{where}: a step must be an object")
    step_id = _step_id(raw, where)
    name = f"step {step_id!r}"
    extra = set(raw) - {"id", "action", "args"}
    if extra:
        raise _fail(f"{name}: unknown member(s) {', '.join(sorted(extra))}")
    action: Any = raw.get("action")
    args = raw.get("args", {})
    if not isinstance(args, dict):
        raise _fail(f"{name}: args must be an object")
    if (refused := actions.refusal(action, args)) is not None:
        raise _fail(f"{name}: {refused}")
    return Step(id=step_id, action=action, args=dict(args))


def check_steps(steps: Sequence[Step], field: str) -> None:
    """Check steps given outside a submission (a steer's edit, a follow-up's steps) exactly
    as a submitted plan's steps are checked; a refusal names the field and the step."""
    for index, step in enumerate(steps):
        where = f"{field}[{index}]"
        try:
            parse_step(_step_json(step), where)
        except InvalidRequest as error:
            detail = error.detail if error.detail.startswith(where) else f"{where}: {error.detail}"
            raise _fail(detail) from None


def _parse_steps(raw: Any, where: str, seen: set[str]) -> tuple[Step, ...]:
    if not isinstance(raw, list):
        raise _fail(f"{where}: must be a list of steps")
    steps = []
    for index, item in enumerate(raw):
        step = parse_step(item, f"{where}[{index}]")
        if step.id in seen:
            raise _fail(f"step {step.id!r}: step id used twice in the plan")
        seen.add(step.id)
        steps.append(step)
        if len(seen) > MAX_STEPS:
            raise _fail(f"step {step.id!r}: a plan has at most {MAX_STEPS} steps")
    return tuple(steps)


def parse_plan(raw: Any) -> Plan:
    """A valid `Plan` from the JSON value of a submission's ``plan`` member."""
    if not isinstance(raw, dict):
        raise _fail("plan: must be an object with either steps or stages")
    extra = set(raw) - {"steps", "stages", "record"}
    if extra:
        raise _fail(f"plan: unknown member(s) {', '.join(sorted(extra))}")
    if ("steps" in raw) == ("stages" in raw):
        raise _fail("plan: give exactly one of steps or stages")
    record = raw.get("record", False)
    if not isinstance(record, bool):
        raise _fail("plan.record: must be true or false")
    seen: set[str] = set()
    if "steps" in raw:
        steps = _parse_steps(raw["steps"], "plan.steps", seen)
        if not steps:
            raise _fail("plan.steps: a plan needs at least one step")
        return Plan(steps=steps, record=record)
    stages_raw = raw["stages"]
    if not isinstance(stages_raw, list) or not stages_raw:
        raise _fail("plan.stages: must be a non-empty list of stages")
    if len(stages_raw) > MAX_STAGES:
        raise _fail(f"plan.stages: a plan has at most {MAX_STAGES} stages")
    stages, stage_ids = [], set()
    for index, item in enumerate(stages_raw):
        where = f"plan.stages[{index}]"
        if not isinstance(item, dict):
            raise _fail(f"{where}: a stage must be an object")
        stage_id = _step_id(item, where)
        name = f"stage {stage_id!r}"
        extra = set(item) - {"id", "steps"}
        if extra:
            raise _fail(f"{name}: unknown member(s) {', '.join(sorted(extra))}")
        if stage_id in stage_ids:
            raise _fail(f"{name}: stage id used twice in the plan")
        stage_ids.add(stage_id)
        if "steps" not in item:
            raise _fail(f"{name}: steps is required")
        steps = _parse_steps(item["steps"], f"{name} steps", seen)
        if not steps:
            raise _fail(f"{name}: a stage needs at least one step")
        stages.append(Stage(id=stage_id, steps=steps))
    return Plan(stages=tuple(stages), record=record)


def plan_to_json(plan: Plan) -> dict[str, Any]:
    """The wire form of a plan: the same shape a caller submitted (`record` only when true)."""
    wire: dict[str, Any]
    if plan.steps is not None:
        wire = {"steps": [_step_json(s) for s in plan.steps]}
    else:
        wire = {"stages": [{"id": st.id, "steps": [_step_json(s) for s in st.steps]} for st in plan.stages or ()]}
    if plan.record:
        wire["record"] = True
    return wire


def _step_json(step: Step) -> dict[str, Any]:
    return {"id": step.id, "action": step.action, "args": step.args}
