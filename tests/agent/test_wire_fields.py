"""What the agent reads back from the wire keeps every field of the records it rebuilds,
except those `amc.agent.wire` lists with a reason: a field added to a record cannot
silently fall off between the server's view and the agent's parser."""

from __future__ import annotations

import attrs

from amc.adapters.http import wire as server_wire
from amc.agent import wire
from amc.core import records as rec
from amc.core.plans import plan_to_json

STEP = rec.Step(id="s1", action="tap", args={"x": 1, "y": 2})


def differing(a, b) -> list[str]:
    return [f.name for f in attrs.fields(type(a)) if getattr(a, f.name) != getattr(b, f.name)]


def test_a_plan_survives_the_server_view_and_the_agent_parser_field_by_field():
    for plan in (
        rec.Plan(steps=(STEP, rec.Step(id="s2", action="wait", args={"seconds": 1}))),
        rec.Plan(stages=(rec.Stage(id="g", steps=(STEP,)),)),
    ):
        parsed = wire.parse_plan(plan_to_json(plan))
        assert parsed == plan, f"fields lost on the way: {differing(plan, parsed)}"
        for sent, got in zip(plan.all_steps(), parsed.all_steps()):
            assert not differing(sent, got), f"step fields lost on the way: {differing(sent, got)}"


def test_a_carried_message_keeps_every_field_the_agent_does_not_list_as_unread():
    message = rec.Message(
        id="m",
        intent="steer",
        text="t",
        data={"k": 1},
        state="delivered",
        created_at=1_000,
        attempt=1,
        delivered_at=1_100,
        admitted_at=1_200,
        completed_at=1_300,
        boundary=rec.Boundary(before_step="s1"),
        detail="d",
        successor="t2",
    )
    parsed = wire.parse_message(server_wire.message_view(message))
    lost = [name for name in differing(message, parsed) if name not in wire.MESSAGE_FIELDS_NOT_READ]
    assert not lost, f"Message fields the agent neither reads nor lists in MESSAGE_FIELDS_NOT_READ: {lost}"
    stale = set(wire.MESSAGE_FIELDS_NOT_READ) - {f.name for f in attrs.fields(rec.Message)}
    assert not stale, f"MESSAGE_FIELDS_NOT_READ lists fields Message does not have: {stale}"


def test_a_step_outcome_on_the_wire_has_every_field_of_the_record():
    outcome = rec.StepOutcome(
        id="s1", status="failed", reason="r", started_at=1_000, ended_at=2_000, output="o", artifacts=("a_1",)
    )
    assert set(wire.step_view(outcome)) == {f.name for f in attrs.fields(rec.StepOutcome)}
