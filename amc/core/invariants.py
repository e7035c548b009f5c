"""The invariants of specs/design.md, as one function the model tests call after every step.

`violations(state)` checks what a single state must satisfy; given the `previous` state
(and the time `now` of the step between them) it also checks the rules about change:
terminal statuses and results never change, a pending cancellation is never dropped,
and an attempt that is not the current one never changes. Invariant 8 (replaying the log
rebuilds the state) needs the log, so the model tests check it themselves.

Part B adds 10 (messages: their states carry their times, only move forward, and none is
left open on an ended task) and 11 (each collected follow-up is in exactly one successor).
Part C adds 12 (artifacts: each belongs to an attempt that held the lease when it was
stored, names a step of that attempt's plan, is unique by name within it, is never
changed or removed but all at once by a purge of a task that had ended, and a recorded step
outcome lists only its attempt's artifacts of its step, until a purge drops them).
"""

from __future__ import annotations

from amc.core.lifecycle import (
    ACTIVE_STATUSES,
    TERMINAL_STATUSES,
    AttemptState,
    CancellationState,
    MessageState,
    StepStatus,
    TaskStatus,
)
from amc.core.records import Message, Task
from amc.core.state import State
from amc.core.steering import planned_step_ids

STEP_STATUSES = frozenset(StepStatus)
# How far along its lifecycle each message state is; a message never moves to a lower rank.
MESSAGE_RANK = {
    MessageState.queued: 0,
    MessageState.delivered: 1,
    MessageState.admitted: 2,
    MessageState.completed: 3,
    MessageState.rejected: 3,
    MessageState.not_admitted: 3,
}


def violations(state: State, previous: State | None = None, now: int | None = None) -> list[str]:
    """Every invariant that `state` breaks, as readable sentences (empty: all hold)."""
    found: list[str] = []
    for task in state.tasks.values():
        found.extend(_task_violations(task))
    found.extend(_reservation_violations(state))
    found.extend(_follow_up_violations(state))
    if now is not None:
        found.extend(
            f"I-EXPIRY: task {t.id} attempt {a.number} is active after its lease expired"
            for t in state.active_tasks()
            if (a := t.active_attempt) is not None and a.lease_expires_at <= now
        )
    if previous is not None:
        for task_id, before in previous.tasks.items():
            after = state.tasks.get(task_id)
            if after is None:
                found.append(f"I8: task {task_id} disappeared")
                continue
            found.extend(_change_violations(before, after))
    return found


def _task_violations(task: Task) -> list[str]:
    found = []
    active = [a.number for a in task.attempts if a.active]
    # 1. at most one active attempt, the current one, and only while assigned or dispatched
    if len(active) > 1 or (active and active[0] != len(task.attempts)):
        found.append(f"I1: task {task.id} has active attempts {active}")
    if bool(active) != (task.status in ACTIVE_STATUSES):
        found.append(f"I1: task {task.id} is {task.status} with active attempts {active}")
    if [a.number for a in task.attempts] != list(range(1, len(task.attempts) + 1)):
        found.append(f"I1: task {task.id} attempts are not numbered 1..n")
    if len(task.attempts) > task.max_attempts:
        found.append(f"I1: task {task.id} has {len(task.attempts)} attempts, max {task.max_attempts}")
    # 4. cancelled only if a cancellation was requested (and it is then completed)
    if task.status == TaskStatus.cancelled and (
        task.cancellation is None or task.cancellation.state != CancellationState.completed
    ):
        found.append(f"I4: task {task.id} is cancelled with cancellation {task.cancellation}")
    # 5. a task cancelled while queued never got an attempt afterwards
    if task.cancellation is not None and task.cancellation.attempt is None:
        later = [a.number for a in task.attempts if a.active or a.assigned_at > task.cancellation.requested_at]
        if later:
            found.append(f"I5: task {task.id} was cancelled while queued but got attempts {later}")
    # 6. a cancellation is pending exactly while the task has not ended
    if task.cancellation_pending and task.status not in ACTIVE_STATUSES:
        found.append(f"I6: task {task.id} is {task.status} with a cancellation pending")
    if (
        task.cancellation is not None
        and task.cancellation.state != CancellationState.pending
        and task.status not in TERMINAL_STATUSES
    ):
        found.append(f"I6: task {task.id} is {task.status} with cancellation {task.cancellation.state}")
    # 6. only a host's report can overtake a pending cancellation; an expiry never drops it
    if (
        task.cancellation is not None
        and task.cancellation.state == CancellationState.unfulfilled
        and (task.result is None or task.result.reason != "reported")
    ):
        found.append(f"I6: task {task.id}'s cancellation went unfulfilled without a report ({task.result})")
    # 3. terminal tasks have a result, others have none
    if (task.result is not None) != (task.status in TERMINAL_STATUSES):
        found.append(f"I3: task {task.id} is {task.status} with result {task.result}")
    # 9. a reported result has one outcome per planned step (as steering edited the plan), in order
    if task.result is not None and task.result.steps is not None:
        planned = planned_step_ids(task, task.result.attempt)
        reported = [outcome.id for outcome in task.result.steps]
        if planned != reported:
            found.append(f"I9: task {task.id} reported steps {reported} for plan {planned}")
        bad = [o.id for o in task.result.steps if o.status not in STEP_STATUSES]
        if bad:
            found.append(f"I9: task {task.id} steps {bad} have no valid outcome")
    # 9. a release's step outcomes, too, name the attempt's planned steps; only a release keeps them
    for a in task.attempts:
        if a.outcome != AttemptState.released and (a.steps is not None or a.release_reason is not None):
            found.append(f"I9: task {task.id} attempt {a.number} ended {a.outcome} but keeps a release's steps")
        if a.steps is not None and [o.id for o in a.steps] != planned_step_ids(task, a.number):
            found.append(f"I9: task {task.id} attempt {a.number} released with steps that are not its plan's")
    found.extend(_message_violations(task))
    found.extend(_artifact_violations(task))
    return found


def _artifact_violations(task: Task) -> list[str]:
    """12. Each artifact was stored by its attempt while that attempt held the lease, for a
    step of its plan; names are unique per attempt, ids per task; upload order is time order."""
    found = []
    ids = [a.id for a in task.artifacts]
    if len(set(ids)) != len(ids):
        found.append(f"I12: task {task.id} has artifact ids {ids}")
    names = [(a.attempt, a.name) for a in task.artifacts]
    if len(set(names)) != len(names):
        found.append(f"I12: task {task.id} has an artifact name twice in one attempt: {names}")
    times = [a.created_at for a in task.artifacts]
    if times != sorted(times):
        found.append(f"I12: task {task.id}'s artifacts are not in upload order")
    for a in task.artifacts:
        if not 1 <= a.attempt <= len(task.attempts):
            found.append(f"I12: artifact {task.id}/{a.id} names attempt {a.attempt}, which does not exist")
            continue
        attempt = task.attempts[a.attempt - 1]
        held = attempt.assigned_at <= a.created_at and (
            attempt.ended_at is None
            or a.created_at < attempt.ended_at
            or (a.created_at == attempt.ended_at and attempt.outcome != AttemptState.expired)
        )
        if not held:
            found.append(f"I12: artifact {task.id}/{a.id} was stored when attempt {a.attempt} did not hold the lease")
        if a.step not in planned_step_ids(task, a.attempt):
            found.append(f"I12: artifact {task.id}/{a.id} names step {a.step!r}, not in attempt {a.attempt}'s plan")
    # A recorded step outcome (a result's, a release's) lists only its own attempt's artifacts of its step.
    # A purge drops an ended task's artifacts and leaves its outcomes as reported (a result
    # never names an artifact that was not stored, so an ended task with none was purged).
    if not task.artifacts and task.status in TERMINAL_STATUSES:
        return found
    owner = {a.id: (a.attempt, a.step) for a in task.artifacts}
    reported = [(task.result.attempt, task.result.steps)] if task.result is not None else []
    reported += [(a.number, a.steps) for a in task.attempts]
    for number, outcomes in reported:
        for outcome in outcomes or ():
            strays = [i for i in outcome.artifacts if owner.get(i) != (number, outcome.id)]
            if strays:
                found.append(f"I12: task {task.id} attempt {number} step {outcome.id!r} lists artifacts {strays}")
    return found


def _message_violations(task: Task) -> list[str]:
    """10. Messages: each state has its times; nothing is left open on an ended task;
    follow-ups never go to a host; each admission is listed once, in the order it happened."""
    found = []
    ids = [m.id for m in task.messages]
    if len(set(ids)) != len(ids):
        found.append(f"I10: task {task.id} has message ids {ids} twice")
    for m in task.messages:
        problem = _message_problem(m)
        if problem:
            found.append(f"I10: message {task.id}/{m.id} ({m.state}) {problem}")
        if m.open and task.status in TERMINAL_STATUSES:
            found.append(f"I10: message {task.id}/{m.id} is still {m.state} on a {task.status} task")
    admitted = {m.id for m in task.messages if m.boundary is not None}
    if len(set(task.admissions)) != len(task.admissions) or set(task.admissions) != admitted:
        found.append(f"I10: task {task.id} lists admissions {task.admissions}, messages admitted {sorted(admitted)}")
    return found


def _message_problem(m: Message) -> str | None:
    if m.state not in MESSAGE_RANK:
        return "has no valid state"
    if (m.delivered_at is not None) != (m.attempt is not None):
        return "has a delivery time without an attempt, or the reverse"
    if m.intent == "follow_up" and m.attempt is not None:
        return "is a follow-up that went to a host"
    if m.state == MessageState.delivered and m.delivered_at is None:
        return "was never delivered"
    if m.state in (MessageState.admitted, MessageState.completed) and m.admitted_at is None:
        return "has no admission time"
    if m.state == MessageState.completed and m.completed_at is None:
        return "has no completion time"
    if m.state == MessageState.rejected and not m.detail:
        return "says nothing about why"
    if (m.successor is not None) != (m.intent == "follow_up" and m.state == MessageState.admitted):
        return "names a successor without being a collected follow-up, or the reverse"
    return None


def _reservation_violations(state: State) -> list[str]:
    found = []
    holders: dict[tuple[str, int], tuple[str, str]] = {}
    for host in state.hosts.values():
        for device in host.devices:
            reservation = device.reservation
            if reservation is None:
                if not device.online:
                    found.append(f"I2: offline device {host.id}/{device.serial} is kept without a reservation")
                continue
            key = (reservation.task_id, reservation.attempt)
            if key in holders:
                found.append(f"I2: attempt {key} holds two devices")
            holders[key] = (host.id, device.serial)
            task = state.tasks.get(reservation.task_id)
            active = task.active_attempt if task else None
            if active is None or active.number != reservation.attempt:
                found.append(f"I2: device {host.id}/{device.serial} is reserved by ended attempt {key}")
    for task in state.active_tasks():
        attempt = task.active_attempt
        assert attempt is not None  # an active task
        if holders.get((task.id, attempt.number)) != (attempt.host_id, attempt.device):
            found.append(f"I2: active attempt {task.id}#{attempt.number} holds no reservation of its device")
    return found


def _follow_up_violations(state: State) -> list[str]:
    """11. Every collected follow-up is in exactly one successor, which names it and its task."""
    found = []
    collected_into: dict[tuple[str | None, str], str] = {}
    for successor in state.tasks.values():
        for follow_up in successor.collected:
            key = (successor.follow_up_of, follow_up.message_id)
            if key in collected_into:
                found.append(f"I11: follow-up {key} was collected into {collected_into[key]} and {successor.id}")
            collected_into[key] = successor.id
    for task in state.tasks.values():
        for m in task.messages:
            if m.successor is not None and collected_into.get((task.id, m.id)) != m.successor:
                found.append(f"I11: follow-up {task.id}/{m.id} names successor {m.successor}, which lacks it")
    if len(collected_into) != sum(1 for t in state.tasks.values() for m in t.messages if m.successor is not None):
        found.append("I11: a successor collected a message that does not name it")
    return found


def _change_violations(before: Task, after: Task) -> list[str]:
    found = []
    # 10. a held task is never claimed
    if before.held and len(after.attempts) > len(before.attempts):
        found.append(f"I10: task {before.id} was claimed while held")
    # 10. messages only move forward, and are never lost or rewritten
    if [m.id for m in after.messages[: len(before.messages)]] != [m.id for m in before.messages]:
        found.append(f"I10: messages of task {before.id} were lost or reordered")
    for old, new in zip(before.messages, after.messages):
        if MESSAGE_RANK.get(new.state, -1) < MESSAGE_RANK[old.state] or (MESSAGE_RANK[old.state] == 3 and old != new):
            found.append(f"I10: message {before.id}/{old.id} went from {old.state} to {new.state}")
        if (old.intent, old.text, old.data, old.created_at) != (new.intent, new.text, new.data, new.created_at):
            found.append(f"I10: message {before.id}/{old.id} was rewritten")
    if before.status in TERMINAL_STATUSES and (before.status, before.result) != (after.status, after.result):
        found.append(f"I3: terminal task {before.id} changed from {before.status} to {after.status}")
    if before.cancellation_pending and not (after.cancellation_pending or after.status in TERMINAL_STATUSES):
        found.append(f"I6: the pending cancellation of task {before.id} was dropped")
    if before.cancellation is not None and after.cancellation is None:
        found.append(f"I6: the cancellation of task {before.id} disappeared")
    # 12. artifacts are only ever added, by the current attempt while its lease is live; or
    # all dropped at once from a task that had ended (a purge)
    purged = not after.artifacts and before.status in TERMINAL_STATUSES
    if after.artifacts[: len(before.artifacts)] != before.artifacts and not purged:
        found.append(f"I12: artifacts of task {before.id} were changed or removed")
    for added in after.artifacts[len(before.artifacts) :]:
        current = before.active_attempt
        if current is None or added.attempt != current.number or added.created_at >= current.lease_expires_at:
            found.append(
                f"I12: artifact {before.id}/{added.id} was added by attempt {added.attempt} without a live lease"
            )
    # 7. an attempt that ended or was replaced is history: it never changes again
    if len(after.attempts) < len(before.attempts):
        found.append(f"I7: attempts of task {before.id} disappeared")
    for old_attempt, new_attempt in zip(before.attempts, after.attempts):
        replaced = old_attempt.number < len(before.attempts)
        if (replaced or not old_attempt.active) and old_attempt != new_attempt:
            found.append(f"I7: attempt {before.id}#{old_attempt.number} changed after it ended")
    return found


def check(state: State, previous: State | None = None, now: int | None = None) -> None:
    """Raise AssertionError listing every violated invariant."""
    found = violations(state, previous, now)
    if found:
        raise AssertionError("invariants violated:\n  " + "\n  ".join(found))
