"""Messages to a task (specs/protocol.md Part B): steer, follow-up, pause and resume.

A message is posted (`queued`), carried to the attempt's host by start and renewal
responses (`delivered`), and acknowledged by that host at a step boundary (`admitted`,
then `completed`, or `rejected`); one its attempt or task outlives is `not_admitted`. The
server applies a message itself only where no host is involved: a pause or resume of a
queued task (hold and release), and follow-ups collected into a successor when the task
ends done. A steer's edit is applied by `amc.core.steering`, the same function the Host
Agent uses, so the kernel checks every admission against the plan as steered.

The kernel (`amc.core.kernel`) dispatches to the deciders and appliers here, and calls
`carried_messages`, `settle_messages` and `requeue_messages` where an attempt is granted,
ends or is requeued.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from amc.core import lifecycle, steering
from amc.core.commands import AcknowledgeMessage, PostMessage
from amc.core.decisions import (
    AcknowledgementRecorded,
    Decision,
    MessageAccepted,
    check_lease,
    find_attempt,
    reject,
    visible_task,
)
from amc.core.errors import Code, InvalidRequest
from amc.core.events import (
    Event,
    FollowUpsCollected,
    MessageAcknowledged,
    MessageApplied,
    MessagePosted,
    MessagesDelivered,
    MessagesNotAdmitted,
    TaskSubmitted,
)
from amc.core.lifecycle import MessageState, TaskStatus
from amc.core.records import Attempt, Boundary, FollowUp, Message, Plan, Step, Task, replace
from amc.core.state import State

INTENTS = ("steer", "follow_up", "pause", "resume")
# An acknowledged state, and the `MessageLifecycle` event that reaches it.
ACKNOWLEDGEMENTS = {MessageState.admitted: "admit", MessageState.completed: "complete", MessageState.rejected: "reject"}

# ---------------------------------------------------------------------------------------
# decide


def post(state: State, c: PostMessage) -> Decision:
    task = visible_task(state, c.task_id, c.tenant)
    if task is None:
        return reject(Code.not_found, f"no task {c.task_id!r}")
    try:
        _check_message(task, c)
    except InvalidRequest as error:
        return reject(Code.invalid_request, error.detail)
    if task.message(c.message_id) is not None:
        return reject(Code.invalid_request, f"message id {c.message_id!r} is taken")
    posted = MessagePosted(
        at=c.now, task_id=task.id, message_id=c.message_id, intent=c.intent, text=c.text, data=c.data
    )
    accepted = MessageAccepted(task.id, c.message_id)
    if task.status in lifecycle.TERMINAL_STATUSES:
        if c.intent == "follow_up" and task.status == TaskStatus.done:  # the later turn starts at once
            events = _collect(state, task, c.now, (FollowUp(message_id=c.message_id, text=c.text, data=c.data),))
            return Decision(events=(posted, *events), reply=attrs.evolve(accepted, successor_id=events[0].successor_id))
        return reject(Code.task_terminal, f"task {task.id!r} already ended {task.status}")
    # Hold or release a queued task, here and now; a session's pause and resume the server
    # applies itself in flight too, since it is the server that hands out its actions.
    if (task.status == TaskStatus.queued or task.session is not None) and c.intent in ("pause", "resume"):
        applied = MessageApplied(at=c.now, task_id=task.id, message_id=c.message_id)
        return Decision(events=(posted, applied), reply=accepted)
    return Decision(events=(posted,), reply=accepted)


def _check_message(task: Task, c: PostMessage) -> None:
    """Raise InvalidRequest, naming the field, for a message that is not well formed."""
    if c.intent not in INTENTS:
        raise InvalidRequest(f"intent: must be one of {', '.join(INTENTS)}")
    if c.intent == "steer" and task.session is not None:
        raise InvalidRequest("intent: a session takes actions, not steers; send the next action instead")
    if c.intent == "steer":
        edit = steering.parse_edit(c.data)
        if edit is None and not c.text:
            raise InvalidRequest("data: a steer needs text or a structured edit in data")
        if edit is not None and task.plan.stages is not None:
            raise InvalidRequest("data: structured edits apply to plans of steps; this task runs stages")
        unknown = None if edit is None else steering.unknown_step(edit, steering.known_step_ids(task))
        if unknown is not None:
            field = "data.skip" if isinstance(edit, steering.Skip) else "data.insert_after"
            raise InvalidRequest(f"{field}: step {unknown!r} is neither in the plan nor inserted by an earlier steer")
    elif c.intent == "follow_up":
        # Only `steps` becomes work: a misspelt member would silently ask for nothing.
        extra = sorted(set(c.data or ()) - {"steps"})
        if extra:
            raise InvalidRequest(f"data.{extra[0]}: unknown member; a follow-up's data carries only steps")
        if c.data and "steps" in c.data:
            steering.parse_steps(c.data["steps"], "data.steps")
    elif c.data:
        raise InvalidRequest(f"data: {c.intent} takes no data")


def acknowledge(state: State, c: AcknowledgeMessage) -> Decision:
    found = find_attempt(state, c)
    if isinstance(found, Decision):
        return found
    task, attempt = found
    message = task.message(c.message_id)
    if message is None:
        return reject(Code.not_found, f"task {task.id!r} has no message {c.message_id!r}")
    if c.state not in ACKNOWLEDGEMENTS:
        return reject(Code.invalid_request, f"state: must be one of {', '.join(ACKNOWLEDGEMENTS)}")
    if c.state == MessageState.admitted and c.boundary is None:
        return reject(
            Code.invalid_request, 'boundary: an admitted message names its boundary, {"before_step": step id or null}'
        )
    if c.state == MessageState.rejected and not c.detail:
        return reject(Code.invalid_request, "detail: a rejected message says why it could not be applied")
    refusal = check_lease(task, attempt, c)
    if refusal is not None:
        return refusal
    if message.attempt != attempt.number or message.intent == "follow_up":
        return reject(Code.message_conflict, f"message {message.id} was not delivered to attempt {attempt.number}")
    if message.state == c.state:
        return Decision(reply=AcknowledgementRecorded(task.id, message.id, repeated=True))
    if lifecycle.target(lifecycle.MESSAGE, message.state, ACKNOWLEDGEMENTS[c.state]) is None:
        return reject(Code.message_conflict, f"message {message.id} is {message.state}; it cannot become {c.state}")
    if c.state == MessageState.admitted:
        assert c.boundary is not None  # checked above: an admission names its boundary
        conflict = _admission_conflict(task, attempt, message, c.boundary.before_step)
        if conflict is not None:
            return reject(Code.message_conflict, conflict)
    event = MessageAcknowledged(
        at=c.now,
        task_id=task.id,
        attempt=attempt.number,
        message_id=message.id,
        state=c.state,
        boundary=c.boundary,
        detail=c.detail,
    )
    return Decision(events=(event,), reply=AcknowledgementRecorded(task.id, message.id, repeated=False))


def _admission_conflict(task: Task, attempt: Attempt, message: Message, before_step: str | None) -> str | None:
    """Why the message cannot be admitted at that boundary, or None when it can: the
    boundary must be a step still to run, never behind one an earlier admission of this
    attempt showed had started, and a steer's edit must apply there."""
    progress = steering.attempt_progress(task, attempt.number)
    boundary = steering.boundary_index(progress.outline, before_step)
    if boundary is None:
        return f"boundary: {before_step!r} is not a step still to run"
    behind = [e.step.id for e in progress.outline[boundary:] if e.step.id in progress.started]
    if behind:
        return f"boundary: step {behind[0]!r} had already started at an earlier boundary"
    edit = steering.parse_edit(message.data) if message.intent == "steer" else None
    if edit is None:
        return None  # a pause, a resume or free-form guidance: nothing for the plan to change
    edited = steering.apply_edit(progress.outline, edit, boundary, message.id)
    return f"the edit does not apply before {before_step!r}: {edited}" if isinstance(edited, str) else None


def carried_messages(task: Task, number: int, now: int) -> tuple[tuple[Message, ...], tuple[str, ...]]:
    """The messages a grant to attempt `number` carries (as they read once delivered), and
    the ids of those it delivers for the first time."""
    carried, fresh = [], []
    for m in task.messages:
        if m.intent == "follow_up":
            continue  # a follow-up waits on the task; no host is asked to apply it
        if m.state == MessageState.queued:
            target = lifecycle.move(lifecycle.MESSAGE, m.state, "deliver")
            carried.append(replace(m, state=target, attempt=number, delivered_at=now))
            fresh.append(m.id)
        elif m.state == MessageState.delivered and m.attempt == number:
            carried.append(m)
    return tuple(carried), tuple(fresh)


def settle_messages(state: State, task: Task, at: int, status: TaskStatus) -> tuple[Event, ...]:
    """The task ends `status`: waiting follow-ups become its successor if it is done, and
    every other message not yet applied is not admitted."""
    follow_ups = tuple(
        FollowUp(message_id=m.id, text=m.text, data=m.data) for m in task.messages if m.open and m.intent == "follow_up"
    )
    dropped = tuple(m for m in task.messages if m.open and (m.intent != "follow_up" or status != TaskStatus.done))
    events: tuple[Event, ...] = ()
    if dropped:
        details = tuple(_ended_before_applied(m, status) for m in dropped)
        events += (
            MessagesNotAdmitted(at=at, task_id=task.id, message_ids=tuple(m.id for m in dropped), details=details),
        )
    if follow_ups and status == TaskStatus.done:
        events += _collect(state, task, at, follow_ups)
    return events


def _collect(
    state: State, task: Task, at: int, follow_ups: tuple[FollowUp, ...]
) -> tuple[FollowUpsCollected, TaskSubmitted]:
    """Follow-ups of a done task become one successor task, with the same requirements."""
    successor = _successor_id(state, task)
    collected = FollowUpsCollected(
        at=at, task_id=task.id, successor_id=successor, message_ids=tuple(f.message_id for f in follow_ups)
    )
    submitted = TaskSubmitted(
        at=at,
        task_id=successor,
        tenant=task.tenant,
        plan=successor_plan(follow_ups),
        requirements=task.requirements,
        priority=task.priority,
        max_attempts=task.max_attempts,
        labels=task.labels,
        idempotency_key=None,
        follow_up_of=task.id,
        collected=follow_ups,
    )
    return collected, submitted


def requeue_messages(task: Task, number: int, at: int) -> tuple[Event, ...]:
    """Attempt `number` expired and the task is queued again: what it was given and did not
    apply is not admitted; pauses and resumes it never received the server applies itself."""
    dropped = tuple(m.id for m in task.messages if m.state == MessageState.delivered and m.attempt == number)
    events: tuple[Event, ...] = ()
    if dropped:
        why = (
            f"attempt {number} ended before its host applied the message; the task is queued again,"
            " and a message posted now reaches its next attempt"
        )
        events += (MessagesNotAdmitted(at=at, task_id=task.id, message_ids=dropped, details=(why,) * len(dropped)),)
    events += tuple(
        MessageApplied(at=at, task_id=task.id, message_id=m.id)
        for m in task.messages
        if m.state == MessageState.queued and m.intent in ("pause", "resume")
    )
    return events


def _successor_id(state: State, task: Task) -> str:
    """A deterministic id for the next successor of `task`: ``<task id>.<n>``."""
    n = 1 + len({m.successor for m in task.messages if m.successor is not None})
    while f"{task.id}.{n}" in state.tasks:
        n += 1
    return f"{task.id}.{n}"


def successor_plan(follow_ups: tuple[FollowUp, ...]) -> Plan:
    """The successor runs each collected follow-up's `data.steps`, in posting order; a
    step's id is prefixed with its message's id, so every step names who asked for it."""
    steps = []
    for follow_up in follow_ups:
        asked = (follow_up.data or {}).get("steps")
        for step in steering.parse_steps(asked, "data.steps") if asked else ():
            steps.append(Step(id=f"{follow_up.message_id}.{step.id}", action=step.action, args=step.args))
    return Plan(steps=tuple(steps))


# ---------------------------------------------------------------------------------------
# apply


def apply_posted(state: State, e: MessagePosted) -> None:
    task = state.tasks[e.task_id]
    message = Message(
        id=e.message_id, intent=e.intent, text=e.text, data=e.data, state=MessageState.queued, created_at=e.at
    )
    state.put_task(replace(task, messages=task.messages + (message,), updated_at=e.at))


def apply_delivered(state: State, e: MessagesDelivered) -> None:
    _update_messages(state, e.task_id, e.message_ids, "deliver", e.at, attempt=e.attempt, delivered_at=e.at)


def apply_acknowledged(state: State, e: MessageAcknowledged) -> None:
    event = ACKNOWLEDGEMENTS[e.state]
    if e.state == MessageState.admitted:
        task = _update_messages(state, e.task_id, (e.message_id,), event, e.at, admitted_at=e.at, boundary=e.boundary)
        message = task.message(e.message_id)
        assert message is not None  # acknowledged, so the task has it
        intent = message.intent
        paused = task.paused if intent not in ("pause", "resume") else intent == "pause"
        state.put_task(replace(task, admissions=task.admissions + (e.message_id,), paused=paused))
    elif e.state == MessageState.completed:
        _update_messages(state, e.task_id, (e.message_id,), event, e.at, completed_at=e.at)
    else:
        _update_messages(state, e.task_id, (e.message_id,), event, e.at, detail=e.detail)


def apply_applied(state: State, e: MessageApplied) -> None:
    before = state.tasks[e.task_id]
    message = before.message(e.message_id)
    assert message is not None  # applied, so the task has it
    pause = message.intent == "pause"
    if before.session is not None and before.status != TaskStatus.queued:
        detail = _session_pause_detail(pause, before.paused)
    elif pause:
        detail = "held: the task is not claimed until a resume" if not before.paused else "the task was already held"
    else:
        detail = "released: the task can be claimed again" if before.paused else "the task was not held"
    _update_messages(state, e.task_id, (e.message_id,), "admit", e.at, admitted_at=e.at)
    task = _update_messages(state, e.task_id, (e.message_id,), "complete", e.at, completed_at=e.at, detail=detail)
    task = replace(task, paused=pause)
    state.put_task(task)
    if pause:
        state.queue_of(task).clean(task.requirements, state.tasks)
    elif before.paused and task.claimable:
        state.queue_of(task).push(task)  # its original seq: it keeps its place among equal priorities


def _session_pause_detail(pause: bool, was_paused: bool) -> str:
    if pause:
        return "the session was already paused" if was_paused else "paused: no new action is delivered until a resume"
    return "resumed: the next action is delivered" if was_paused else "the session was not paused"


def apply_not_admitted(state: State, e: MessagesNotAdmitted) -> None:
    if not e.details:  # a log written before messages said why
        _update_messages(state, e.task_id, e.message_ids, "drop", e.at)
        return
    task = state.tasks[e.task_id]
    why = dict(zip(e.message_ids, e.details))
    messages = tuple(
        replace(m, state=lifecycle.move(lifecycle.MESSAGE, m.state, "drop"), detail=why[m.id]) if m.id in why else m
        for m in task.messages
    )
    state.put_task(replace(task, messages=messages, updated_at=e.at))


def _ended_before_applied(message: Message, status: TaskStatus) -> str:
    """Why `message` is not admitted when its task ends `status` first."""
    if message.intent == "follow_up":
        return f"the task ended {status}; follow-ups become a successor task only when it ends done"
    if message.attempt is None:
        return f"the task ended {status} before any host received the message"
    return f"the task ended {status} before the host of attempt {message.attempt} applied the message"


def apply_collected(state: State, e: FollowUpsCollected) -> None:
    _update_messages(state, e.task_id, e.message_ids, "admit", e.at, admitted_at=e.at, successor=e.successor_id)


if TYPE_CHECKING:
    from typing import TypedDict, Unpack

    class _MessageChanges(TypedDict, total=False):
        """What an event sets on a message it moves: the type checker holds each caller of
        `_update_messages` to these fields of `Message`, as it holds `replace`'s callers."""

        attempt: int | None
        delivered_at: int | None
        admitted_at: int | None
        completed_at: int | None
        boundary: Boundary | None
        detail: str | None
        successor: str | None


def _update_messages(
    state: State, task_id: str, ids: tuple[str, ...], event: str, at: int, **changes: Unpack[_MessageChanges]
) -> Task:
    """Move the messages `ids` of a task by `event` (a `MessageLifecycle` event) at `at`."""
    task = state.tasks[task_id]
    wanted = set(ids)
    messages = tuple(
        replace(m, state=lifecycle.move(lifecycle.MESSAGE, m.state, event), **changes) if m.id in wanted else m
        for m in task.messages
    )
    task = replace(task, messages=messages, updated_at=at)
    state.put_task(task)
    return task
