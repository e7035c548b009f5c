"""The `record` action's arguments and a plan's `"record"` member (specs/protocol.md,
"Screen recording")."""

from __future__ import annotations

import pytest

from amc.core.actions import refusal
from amc.core.errors import InvalidRequest
from amc.core.plans import parse_plan, plan_to_json

STEP = {"id": "a", "action": "home", "args": {}}


@pytest.mark.req("RECORD/s2")
def test_record_takes_a_mode_of_start_or_stop():
    assert refusal("record", {"mode": "start"}) is None and refusal("record", {"mode": "stop"}) is None
    assert refusal("record", {}) == "action record requires argument 'mode'"
    assert refusal("record", {"mode": "pause"}) == "argument 'mode' of record must be one of start, stop"
    assert refusal("record", {"mode": "start", "bit_rate": 4}) == "unknown argument 'bit_rate' for action record"


@pytest.mark.req("RECORD/s4")
def test_a_plans_record_member_is_a_boolean_kept_only_when_true():
    plan = parse_plan({"steps": [STEP], "record": True})
    assert plan.record and plan_to_json(plan) == {"steps": [STEP], "record": True}
    staged = parse_plan({"stages": [{"id": "s", "steps": [STEP]}], "record": True})
    assert staged.record
    assert plan_to_json(parse_plan({"steps": [STEP], "record": False})) == {"steps": [STEP]}
    with pytest.raises(InvalidRequest, match=r"plan\.record: must be true or false"):
        parse_plan({"steps": [STEP], "record": "yes"})
