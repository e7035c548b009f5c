"""Steering edits: how a correction changes the steps of a running plan.

A steer message may carry one structured edit (``data``):

- ``{"skip": [step ids]}``: those steps will not run;
- ``{"insert_after": step id | null, "steps": [...]}``: new steps after that step (null:
  at the boundary, so they run next);
- ``{"replace_remaining": [...]}``: every step that has not started is dropped and these
  run instead.

The host applies an edit at a step boundary: the point before it starts its next step.
Everything before the boundary has started (or was removed earlier) and is never recalled:
a skip leaves the steps that started alone and removes the rest, and an edit that has
nothing left to change (every step it names had started) is rejected, with a detail saying
so.

The plan as edited is an `Outline`: every step the attempt knows, in order, removed ones
included (they are reported ``not_started`` with reason ``steered``, so a result still names
every step anyone asked for). Steps run in outline order, so "started" is simply "before
the boundary". An insertion after a step that has started, where later steps have started
too, lands at the boundary: new work never goes behind work that already began.

The Host Agent applies edits with `apply_edit` as it runs, and the kernel applies the same
function to the acknowledgements it receives, so both agree on the plan the result reports.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Union

import attrs

from amc.core.errors import InvalidRequest
from amc.core.lifecycle import MessageState
from amc.core.records import JSON, Plan, Step, Task

STEERED = "steered"  # the not_started reason of a step an edit removed


@attrs.frozen(kw_only=True)
class Skip:
    ids: tuple[str, ...]


@attrs.frozen(kw_only=True)
class InsertAfter:
    anchor: str | None  # None: at the boundary
    steps: tuple[Step, ...]


@attrs.frozen(kw_only=True)
class ReplaceRemaining:
    steps: tuple[Step, ...]


Edit = Union[Skip, InsertAfter, ReplaceRemaining]


@attrs.frozen(kw_only=True)
class Entry:
    step: Step
    removed_by: str | None = None  # the id of the steer message that removed it


Outline = tuple[Entry, ...]


# -- parsing ------------------------------------------------------------------------------


def parse_edit(data: dict[str, JSON] | None) -> Edit | None:
    """The structured edit in a steer's `data`, or None when it carries none.

    Raises InvalidRequest naming the field for anything that is not exactly one edit. Step
    actions and their arguments are the edge's to check (as for a submitted plan); this
    checks the shape and that step ids are unique within the edit.
    """
    if not data:
        return None
    if "skip" in data:
        _only(data, {"skip"})
        ids = data["skip"]
        if not isinstance(ids, list) or not ids or not all(isinstance(i, str) and i for i in ids):
            raise InvalidRequest("data.skip: give a non-empty list of step ids")
        if len(set(ids)) != len(ids):
            raise InvalidRequest("data.skip: a step id is listed twice")
        return Skip(ids=tuple(ids))
    if "insert_after" in data:
        _only(data, {"insert_after", "steps"})
        anchor = data["insert_after"]
        if anchor is not None and not (isinstance(anchor, str) and anchor):
            raise InvalidRequest("data.insert_after: give a step id, or null for the boundary")
        if "steps" not in data:
            raise InvalidRequest("data.steps: insert_after needs the steps to insert")
        return InsertAfter(anchor=anchor, steps=parse_steps(data["steps"], "data.steps"))
    if "replace_remaining" in data:
        _only(data, {"replace_remaining"})
        return ReplaceRemaining(steps=parse_steps(data["replace_remaining"], "data.replace_remaining"))
    raise InvalidRequest("data: a steer edit is one of skip, insert_after (with steps) or replace_remaining")


def _only(data: dict[str, JSON], allowed: set[str]) -> None:
    extra = sorted(set(data) - allowed)
    if extra:
        raise InvalidRequest(f"data.{extra[0]}: not allowed with {' and '.join(sorted(allowed))}")


def parse_steps(items: JSON, field: str) -> tuple[Step, ...]:
    """Steps given as JSON: a non-empty list of ``{"id", "action", "args"?}`` with unique ids."""
    if not isinstance(items, list) or not items:
        raise InvalidRequest(f"{field}: give a non-empty list of steps")
    steps = []
    for i, item in enumerate(items):
        where = f"{field}[{i}]"
        if not isinstance(item, dict):
            raise InvalidRequest(f"{where}: a step is an object")
        extra = sorted(set(item) - {"id", "action", "args"})
        if extra:
            raise InvalidRequest(f"{where}.{extra[0]}: unknown member")
        for name in ("id", "action"):
            if not isinstance(item.get(name), str) or not item[name]:
                raise InvalidRequest(f"{where}.{name}: a non-empty string is required")
        args = item.get("args", {})
        if not isinstance(args, dict):
            raise InvalidRequest(f"{where}.args: an object is required")
        steps.append(Step(id=item["id"], action=item["action"], args=args))
    ids = [s.id for s in steps]
    if len(set(ids)) != len(ids):
        raise InvalidRequest(f"{field}: step ids must be unique")
    return tuple(steps)


# -- applying -----------------------------------------------------------------------------


def outline_of(steps: Iterable[Step]) -> Outline:
    return tuple(Entry(step=step) for step in steps)


def runnable(outline: Outline) -> tuple[Step, ...]:
    """The steps still to be run by a fresh attempt: the outline without removed steps."""
    return tuple(entry.step for entry in outline if entry.removed_by is None)


def boundary_index(outline: Outline, before_step: str | None) -> int | None:
    """Where a boundary before `before_step` lies (None: the end), or None if no
    live step has that id."""
    if before_step is None:
        return len(outline)
    for i, entry in enumerate(outline):
        if entry.step.id == before_step and entry.removed_by is None:
            return i
    return None


def apply_edit(outline: Outline, edit: Edit, boundary: int, message_id: str) -> Outline | str:
    """`outline` with `edit` applied at `boundary` (the index of the next step to start),
    or a sentence saying why it cannot be applied."""
    index = {entry.step.id: i for i, entry in enumerate(outline)}
    match edit:
        case Skip(ids=ids):
            for step_id in ids:
                i = index.get(step_id)
                if i is None:
                    return f"step {step_id!r} is not in the plan"
                if outline[i].removed_by is not None:
                    return f"step {step_id!r} was already removed by message {outline[i].removed_by}"
            # Steps that started keep running (and their true outcome); the rest are skipped.
            # Only a skip with nothing left to skip cannot be applied.
            skipped = {step_id for step_id in ids if index[step_id] >= boundary}
            if not skipped:
                started = ", ".join(repr(i) for i in ids)
                return f"step {started} had already started" if len(ids) == 1 else f"steps {started} had all started"
            return tuple(attrs.evolve(e, removed_by=message_id) if e.step.id in skipped else e for e in outline)
        case InsertAfter(anchor=anchor, steps=steps):
            clash = _clash(index, steps)
            if clash:
                return clash
            if anchor is None:
                at = boundary
            elif anchor not in index:
                return f"step {anchor!r} is not in the plan"
            else:
                at = max(index[anchor] + 1, boundary)
            return outline[:at] + outline_of(steps) + outline[at:]
        case ReplaceRemaining(steps=steps):
            clash = _clash(index, steps)
            if clash:
                return clash
            kept = tuple(
                attrs.evolve(e, removed_by=message_id) if i >= boundary and e.removed_by is None else e
                for i, e in enumerate(outline)
            )
            return kept + outline_of(steps)
    raise TypeError(f"not an edit: {edit!r}")


def _clash(index: dict[str, int], steps: Sequence[Step]) -> str | None:
    taken = [s.id for s in steps if s.id in index]
    return f"step id {taken[0]!r} is already in the plan" if taken else None


# -- the plan of an attempt -----------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Progress:
    """How far an attempt got, as its host's admissions tell: the outline as edited, and
    the ids of the steps that had started by the latest boundary."""

    outline: Outline
    started: frozenset[str]


def attempt_progress(task: Task, number: int) -> Progress:
    """The outline attempt `number` of `task` works from, with what its admissions did.

    Attempt 1 starts from the submitted plan. Each later attempt starts from the steps the
    one before it still had to run (a correction outlives the attempt that admitted it);
    the steps an earlier attempt removed are not handed out again.
    """
    outline = outline_of(task.plan.all_steps())
    started: set[str] = set()
    if not task.admissions:
        return Progress(outline=outline, started=frozenset())
    messages = {m.id: m for m in task.messages}
    current = 1
    for message_id in task.admissions:
        message = messages[message_id]
        assert message.attempt is not None and message.boundary is not None, "admitted, so delivered at a boundary"
        if message.attempt > number:
            break
        if message.attempt > current:
            outline, current, started = outline_of(runnable(outline)), message.attempt, set()
        boundary = boundary_index(outline, message.boundary.before_step)
        assert boundary is not None, "an admitted boundary lies before a live step"
        started.update(e.step.id for e in outline[:boundary] if e.removed_by is None)
        edit = parse_edit(message.data) if message.intent == "steer" else None
        if edit is not None:
            edited = apply_edit(outline, edit, boundary, message.id)
            assert not isinstance(edited, str), f"an admitted edit no longer applies: {edited}"
            outline = edited
    if number > current:
        return Progress(outline=outline_of(runnable(outline)), started=frozenset())
    return Progress(outline=outline, started=frozenset(started))


def attempt_outline(task: Task, number: int) -> Outline:
    return attempt_progress(task, number).outline


def attempt_plan(task: Task, number: int) -> Plan:
    """The plan to hand to attempt `number` when it is assigned."""
    if not task.admissions:
        return task.plan
    return Plan(steps=runnable(attempt_outline(task, number)), record=task.plan.record)


def planned_step_ids(task: Task, number: int | None) -> list[str]:
    """The step ids a result of attempt `number` must report, in order."""
    if number is None or not task.admissions:
        return [step.id for step in task.plan.all_steps()]
    return [entry.step.id for entry in attempt_outline(task, number)]


# A steer in one of these states never changed the plan and never will.
_REFUSED = (MessageState.rejected, MessageState.not_admitted)


def is_known_step(task: Task, step_id: str) -> bool:
    """Whether `step_id` is in `known_step_ids(task)`; the submitted plan is looked at first,
    so a renewal's progress on a planned step parses no steer."""
    return any(step.id == step_id for step in task.plan.all_steps()) or step_id in known_step_ids(task)


def known_step_ids(task: Task) -> frozenset[str]:
    """Every step id the task's plan may hold as steered so far: the submitted plan's, and
    those that the steers not refused (posted, delivered or admitted) insert.

    A step named by a new steer or by a host's progress must be one of these. Steers still
    on their way count: a later steer may name a step an earlier one inserts, and a host
    may report progress on it before the server has seen the admission.
    """
    known = {step.id for step in task.plan.all_steps()}
    for message in task.messages:
        if message.intent != "steer" or message.state in _REFUSED:
            continue
        try:
            edit = parse_edit(message.data)
        except InvalidRequest:  # checked when posted; a stored message is well formed
            continue
        if isinstance(edit, (InsertAfter, ReplaceRemaining)):
            known.update(step.id for step in edit.steps)
    return frozenset(known)


def unknown_step(edit: Edit, known: frozenset[str]) -> str | None:
    """The first step id `edit` names (to skip, or to insert after) that is not in `known`."""
    match edit:
        case Skip(ids=ids):
            return next((step_id for step_id in ids if step_id not in known), None)
        case InsertAfter(anchor=anchor) if anchor is not None and anchor not in known:
            return anchor
    return None
