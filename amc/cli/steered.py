"""The plan of a task as steered, rebuilt from what the server shows.

The task resource carries the plan as submitted; the steers its hosts admitted are in its
messages, each with the attempt and the step boundary it was admitted at. Replaying those
edits with the kernel's own `amc.core.steering` gives the plan the latest attempt works
from, the same one its result must report (specs/protocol.md, Part B). A step that a steer
removed stays in the list, marked, since it is still reported (`not_started`, `steered`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from amc.core.errors import InvalidRequest
from amc.core.lifecycle import MessageState
from amc.core.records import Step
from amc.core.steering import (
    InsertAfter,
    Outline,
    ReplaceRemaining,
    apply_edit,
    boundary_index,
    outline_of,
    parse_edit,
    runnable,
)


@attrs.frozen
class SteeredStep:
    id: str
    action: str
    removed_by: str | None = None  # the steer message that removed it
    inserted_by: str | None = None  # the steer message that added it


def _admitted_steers(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The steers a host admitted, in the order they were admitted (their attempt, their time,
    then posting order: one boundary admits its messages in posting order)."""
    found = [
        (index, message)
        for index, message in enumerate(messages)
        if message.get("intent") == "steer"
        and message.get("admitted_at")
        and message.get("boundary") is not None
        and message.get("attempt") is not None
        and message.get("state") in (MessageState.admitted, MessageState.completed)
    ]
    found.sort(key=lambda pair: (pair[1]["attempt"], pair[1]["admitted_at"], pair[0]))
    return [message for _, message in found]


def steered_plan(task: dict[str, Any], messages: Sequence[dict[str, Any]]) -> list[SteeredStep] | None:
    """The latest attempt's plan after the admitted steers, or None when no steer changed it."""
    steers = _admitted_steers(messages)
    if not steers or task["plan"] is None or "steps" not in task["plan"]:  # stages take words only; a session none
        return None
    outline: Outline = outline_of(
        Step(id=s["id"], action=s["action"], args=s.get("args") or {}) for s in task["plan"]["steps"]
    )
    inserted: dict[str, str] = {}
    current = steers[0]["attempt"]
    for message in steers:
        if message["attempt"] > current:  # a new attempt starts from the steps still to run
            outline, current = outline_of(runnable(outline)), message["attempt"]
        try:
            edit = parse_edit(message.get("data"))
        except InvalidRequest:
            continue
        boundary = boundary_index(outline, message["boundary"].get("before_step"))
        if edit is None or boundary is None:
            continue
        edited = apply_edit(outline, edit, boundary, message["id"])
        if isinstance(edited, str):  # the server admitted it, so this cannot happen; show what is known
            continue
        outline = edited
        if isinstance(edit, InsertAfter | ReplaceRemaining):
            inserted.update({step.id: message["id"] for step in edit.steps})
    latest = (task.get("attempts") or [{}])[-1].get("number") or current
    if latest > current:
        outline = outline_of(runnable(outline))
    return [
        SteeredStep(e.step.id, e.step.action, removed_by=e.removed_by, inserted_by=inserted.get(e.step.id))
        for e in outline
    ]
