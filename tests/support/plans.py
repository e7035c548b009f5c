"""The plans the tests submit, declared once, in the wire's JSON and as the kernel's records."""

from __future__ import annotations

from amc.core.records import Plan, Step

OPEN_SETTINGS = {"id": "open", "action": "launch", "args": {"package": "com.android.settings"}}
SCREENSHOT = {"id": "look", "action": "screenshot", "args": {}}

PLAN = {"steps": [OPEN_SETTINGS]}  # one step: what most tests submit when the plan does not matter
TWO_STEPS = {"steps": [OPEN_SETTINGS, SCREENSHOT]}  # for a result with one step done and one not
STEPS_ABC = {"steps": [{"id": s, "action": "wait", "args": {"seconds": 1}} for s in ("a", "b", "c")]}


def as_record(plan: dict) -> Plan:
    """The kernel's `Plan` of a plan given as the wire's JSON (steps only)."""
    return Plan(steps=tuple(Step(id=s["id"], action=s["action"], args=s["args"]) for s in plan["steps"]))


PLAN_RECORD = as_record(PLAN)
