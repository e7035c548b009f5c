"""Interactive sessions (specs/protocol.md Part D): a task whose steps arrive one at a time.

A caller posts actions (`queued`); the owning host's poll takes the first one (`delivered`),
only once every earlier one has an outcome, so at most one action of a session is ever with
a host; the host reports how it ended (a final status, never changed again). The server
ends actions itself where no host can: when the attempt or the task ends first, a delivered
action is `interrupted` (it may have run: nobody can know) and a queued one `not_started`.
A new attempt never gets an action again: after uncertain delivery the caller decides what
to resend (seed 003).

The server also ends the session itself: when the caller ended it and no action is busy
(`session_ended`), and when its attempt was idle for the idle timeout (`session_idle`). Both
end the task `done`: the session did what it was asked, and its device goes back. Idle ends
are due by time, like lease expiries, and are applied by the kernel's `expire_due`.

The kernel (`amc.core.kernel`) dispatches to the deciders and appliers here, and calls
`settle_actions` wherever an attempt or a task ends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from amc.core import artifacts, lifecycle, messages
from amc.core.commands import EndSession, PollAction, PostAction, ReportAction
from amc.core.decisions import (
    ActionAccepted,
    ActionRecorded,
    Decision,
    PollAnswer,
    SessionEndAccepted,
    check_current,
    check_holder,
    check_live,
    find_attempt,
    live_attempt,
    reject,
    visible_task,
)
from amc.core.errors import Code
from amc.core.events import (
    ActionDelivered,
    ActionEnded,
    ActionPosted,
    CancellationDelivered,
    Event,
    SessionEndRequested,
    TaskEnded,
)
from amc.core.lifecycle import ActionState, StepStatus, TaskStatus
from amc.core.records import Action, Session, StepOutcome, Task, replace
from amc.core.state import State

MAX_ACTIONS = 10_000  # a session holds at most this many actions

ENDED = "session_ended"  # result.reason of a session its caller ended
IDLE = "session_idle"  # result.reason of a session that was idle for its timeout
SERVER_ENDS = frozenset({ENDED, IDLE})

# Why the server ended an action, by what happened first.
LOST_DELIVERED = "attempt lost while the action was delivered; it may have taken effect"
LOST_QUEUED = "attempt lost before the action was delivered; not replayed"


# ---------------------------------------------------------------------------------------
# decide


def post(state: State, c: PostAction) -> Decision:
    task = visible_task(state, c.task_id, c.tenant)
    if task is None:
        return reject(Code.not_found, f"no task {c.task_id!r}")
    session = task.session
    if session is None:
        return reject(Code.not_a_session, f"task {task.id!r} runs a plan; it takes no actions")
    existing = session.action(c.step.id)
    if existing is not None:
        if existing.step == c.step:  # a retry whose answer was lost
            return Decision(reply=ActionAccepted(task.id, existing.id, created=False))
        return reject(Code.action_conflict, f"action id {c.step.id!r} was sent with another body")
    if task.status in lifecycle.TERMINAL_STATUSES:
        return reject(Code.task_terminal, f"task {task.id!r} already ended {task.status}")
    if session.end_requested_at is not None:
        return reject(Code.session_ended, f"the end of session {task.id!r} was requested; it takes no new action")
    if len(session.actions) >= MAX_ACTIONS:
        return reject(Code.invalid_request, f"a session holds at most {MAX_ACTIONS} actions")
    posted = ActionPosted(at=c.now, task_id=task.id, step=c.step)
    return Decision(events=(posted,), reply=ActionAccepted(task.id, c.step.id, created=True))


def end(state: State, c: EndSession) -> Decision:
    task = visible_task(state, c.task_id, c.tenant)
    if task is None:
        return reject(Code.not_found, f"no task {c.task_id!r}")
    session = task.session
    if session is None:
        return reject(Code.not_a_session, f"task {task.id!r} runs a plan; end it with a cancel")
    if task.status in lifecycle.TERMINAL_STATUSES or session.end_requested_at is not None:
        return Decision(reply=SessionEndAccepted(task.id))
    requested = SessionEndRequested(at=c.now, task_id=task.id)
    if task.status == TaskStatus.queued:
        why = "session ended before a device was assigned"
        events: tuple[Event, ...] = (requested, *settle_actions(task, c.now, why, why))
        events += (TaskEnded(at=c.now, task_id=task.id, status=TaskStatus.done, reason=ENDED, attempt=None),)
        events += messages.settle_messages(state, task, c.now, TaskStatus.done)
        return Decision(events=events, reply=SessionEndAccepted(task.id))
    events = (requested,)
    if not session.busy and not task.cancellation_pending:
        events += _end_now(state, task, c.now, ENDED)
    return Decision(events=events, reply=SessionEndAccepted(task.id))


def poll(state: State, c: PollAction) -> Decision:
    found = live_attempt(state, c)
    if isinstance(found, Decision):
        return found
    task, attempt = found
    session = task.session
    if session is None:
        return reject(Code.not_a_session, f"task {task.id!r} runs a plan; its host polls no actions")
    for action in session.actions:
        if action.status == ActionState.delivered and action.id != c.running:  # given, not reported: again
            return Decision(reply=PollAnswer(task.id, action.id, cancel_requested=task.cancellation_pending))
    if task.cancellation_pending:
        assert task.cancellation is not None  # pending, so recorded
        events: tuple[Event, ...] = ()
        if task.cancellation.delivered_at is None:
            events = (CancellationDelivered(at=c.now, task_id=task.id, attempt=attempt.number),)
        return Decision(events=events, reply=PollAnswer(task.id, None, cancel_requested=True))
    if task.paused:
        return Decision(reply=PollAnswer(task.id, None, paused=True))
    if session.busy and any(a.status == ActionState.delivered for a in session.actions):
        return Decision(reply=PollAnswer(task.id, None))  # the running one first: one at a time
    for action in session.actions:
        if action.status == ActionState.queued:
            delivered = ActionDelivered(at=c.now, task_id=task.id, attempt=attempt.number, action_id=action.id)
            return Decision(events=(delivered,), reply=PollAnswer(task.id, action.id))
    return Decision(reply=PollAnswer(task.id, None))


def report(state: State, c: ReportAction) -> Decision:
    found = find_attempt(state, c)
    if isinstance(found, Decision):
        return found
    task, attempt = found
    session = task.session
    if session is None:
        return reject(Code.not_a_session, f"task {task.id!r} runs a plan; it has no actions")
    outcome = c.outcome
    action = session.action(outcome.id)
    if action is None:
        return reject(Code.not_found, f"session {task.id!r} has no action {outcome.id!r}")
    if outcome.status != StepStatus.completed and not outcome.reason:
        return reject(Code.invalid_request, f"reason: an action that ends {outcome.status} says why")
    listing = artifacts.listing_problem(task, attempt.number, (outcome,))
    if listing:
        return reject(Code.invalid_request, listing)
    refusal = check_holder(attempt, c)
    if refusal is not None:
        return refusal
    ended = _ended(task.id, attempt.number, c.now, outcome)
    if action.final and action.attempt == attempt.number:
        # Before the replaced and ended checks: a retried report whose answer was lost is
        # answered as recorded, even after the attempt ended.
        if _same_outcome(action, outcome):
            return Decision(reply=ActionRecorded(task.id, action.id, repeated=True))
        return reject(Code.result_conflict, f"action {action.id!r} already ended {action.status}")
    refusal = check_current(task, attempt) or check_live(attempt, c.now)
    if refusal is not None:
        return refusal
    if action.status != ActionState.delivered or action.attempt != attempt.number:
        return reject(Code.action_conflict, f"action {action.id!r} was not delivered to attempt {attempt.number}")
    events: tuple[Event, ...] = (ended,)
    still_busy = any(a.busy and a.id != action.id for a in session.actions)
    if session.end_requested_at is not None and not still_busy and not task.cancellation_pending:
        events += _end_now(state, task, c.now, ENDED)
    return Decision(events=events, reply=ActionRecorded(task.id, action.id, repeated=False))


def _ended(task_id: str, number: int, now: int, outcome: StepOutcome) -> ActionEnded:
    return ActionEnded(
        at=now,
        task_id=task_id,
        attempt=number,
        action_id=outcome.id,
        status=ActionState(outcome.status),
        reason=outcome.reason,
        started_at=outcome.started_at,
        ended_at=outcome.ended_at if outcome.ended_at is not None else now,
        output=outcome.output,
        artifacts=outcome.artifacts,
    )


def _same_outcome(action: Action, outcome: StepOutcome) -> bool:
    """Whether `outcome` is the one recorded for `action` (an `ended_at` left out matches the
    server's time recorded the first time)."""
    recorded = (action.status, action.reason, action.started_at, action.output, action.artifacts)
    given = (ActionState(outcome.status), outcome.reason, outcome.started_at, outcome.output, outcome.artifacts)
    return recorded == given and outcome.ended_at in (None, action.ended_at)


def _end_now(state: State, task: Task, at: int, reason: str) -> tuple[Event, ...]:
    """The server ends the session's active attempt and the task, `done`. Never while a
    cancellation is pending: then the host's report (or the lease's expiry) ends it."""
    attempt = task.active_attempt
    assert attempt is not None  # only an in-flight session ends this way
    ended = TaskEnded(at=at, task_id=task.id, status=TaskStatus.done, reason=reason, attempt=attempt.number)
    return (ended, *messages.settle_messages(state, task, at, TaskStatus.done))


def idle_end(state: State, task: Task, at: int) -> tuple[Event, ...]:
    """The session's attempt was idle for its timeout: the server ends it, `done`."""
    return _end_now(state, task, at, IDLE)


def settle_actions(task: Task, at: int, delivered_why: str, queued_why: str) -> tuple[Event, ...]:
    """End every busy action of `task` (its attempt or the task ended first): the delivered
    one `interrupted` (it may have run), the queued ones `not_started`; none is kept for a
    later attempt."""
    if task.session is None:
        return ()
    events: list[Event] = []
    for action in task.session.actions:
        if action.status == ActionState.delivered:
            events.append(_server_ended(task, action, at, ActionState.interrupted, delivered_why))
        elif action.status == ActionState.queued:
            events.append(_server_ended(task, action, at, ActionState.not_started, queued_why))
    return tuple(events)


def _server_ended(task: Task, action: Action, at: int, status: ActionState, why: str) -> ActionEnded:
    return ActionEnded(at=at, task_id=task.id, attempt=action.attempt, action_id=action.id, status=status, reason=why)


def attempt_lost(task: Task, at: int) -> tuple[Event, ...]:
    """The attempt ended without a verdict (expired, released): nothing it was given is replayed."""
    return settle_actions(task, at, LOST_DELIVERED, LOST_QUEUED)


def reported_end(task: Task, at: int, status: TaskStatus) -> tuple[Event, ...]:
    """The host reported the session's result while actions were busy."""
    delivered = f"the host reported the session {status} before the action's outcome; it may have taken effect"
    queued = "cancelled" if status == TaskStatus.cancelled else f"the session ended {status} first"
    return settle_actions(task, at, delivered, queued)


# ---------------------------------------------------------------------------------------
# apply


def apply_posted(state: State, e: ActionPosted) -> None:
    task = state.tasks[e.task_id]
    session = task.session
    assert session is not None  # only a session's actions are posted
    action = Action(id=e.step.id, seq=len(session.actions) + 1, step=e.step, status=ActionState.queued, posted_at=e.at)
    _put(state, task, e.at, replace(session, actions=session.actions + (action,), idle_since=None))


def apply_delivered(state: State, e: ActionDelivered) -> None:
    _update_action(
        state, e.task_id, e.action_id, e.at, status=ActionState.delivered, attempt=e.attempt, delivered_at=e.at
    )


def apply_ended(state: State, e: ActionEnded) -> None:
    task = _update_action(
        state,
        e.task_id,
        e.action_id,
        e.at,
        status=e.status,
        reason=e.reason,
        started_at=e.started_at,
        ended_at=e.ended_at if e.ended_at is not None else e.at,
        output=e.output,
        artifacts=e.artifacts,
    )
    session = task.session
    assert session is not None
    if not session.busy and task.active_attempt is not None:
        _put(state, task, e.at, replace(session, idle_since=e.at))


def apply_end_requested(state: State, e: SessionEndRequested) -> None:
    task = state.tasks[e.task_id]
    assert task.session is not None
    _put(state, task, e.at, replace(task.session, end_requested_at=e.at))


def on_assigned(state: State, task: Task, at: int) -> None:
    """A claim gave the session an attempt: it is idle from now unless an action waits."""
    session = task.session
    if session is not None:
        _put(state, task, at, replace(session, idle_since=None if session.busy else at))


if TYPE_CHECKING:
    from typing import TypedDict, Unpack

    class _ActionChanges(TypedDict, total=False):
        """What an event sets on the action it moves: the type checker holds each caller of
        `_update_action` to these fields of `Action`, as it holds `replace`'s callers."""

        status: ActionState
        reason: str | None
        attempt: int | None
        delivered_at: int | None
        started_at: int | None
        ended_at: int | None
        output: str | None
        artifacts: tuple[str, ...]


def _update_action(state: State, task_id: str, action_id: str, at: int, **changes: Unpack[_ActionChanges]) -> Task:
    task = state.tasks[task_id]
    session = task.session
    assert session is not None
    actions = tuple(replace(a, **changes) if a.id == action_id else a for a in session.actions)
    return _put(state, task, at, replace(session, actions=actions))


def _put(state: State, task: Task, at: int, session: Session) -> Task:
    task = replace(task, session=session, updated_at=at)
    state.put_task(task)
    _index_idle(state, task)
    return task


def _index_idle(state: State, task: Task) -> None:
    idle_at = task.idle_expires_at
    active = task.active_attempt
    if idle_at is not None and active is not None:
        state.idle.push(idle_at, task.id, active.number)
    state.idle.clean(state.tasks)
