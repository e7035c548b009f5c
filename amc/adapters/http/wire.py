"""Wire views: kernel records and replies -> the JSON objects of specs/protocol.md.

The kernel keeps integer milliseconds and some facts a caller must not see (a task's
`seq`, an attempt's `lease_id`); the wire shows RFC 3339 times, seconds where the
protocol says seconds, and exactly the members specs/protocol.md lists. These functions build
plain dicts for orjson; they are written out by hand because each one is a contract, and
`NOT_SHOWN` lists, with a reason, each record field a view leaves out (a test holds every
other field to appear, so a new field cannot miss the wire unnoticed). `json_response`
sends one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from starlette.responses import Response

from amc.adapters.http.liveness import Progress
from amc.core.kernel import Assignment, LeaseGranted, PollAnswer
from amc.core.lifecycle import ACTIVE_STATUSES
from amc.core.plans import plan_to_json
from amc.core.records import (
    Action,
    Artifact,
    Attempt,
    Cancellation,
    Device,
    FollowUp,
    Host,
    Message,
    Result,
    Session,
    StepOutcome,
    Task,
)
from amc.core.times import to_rfc3339
from amc.core.waiting import Waiting
from amc.service import HistoryEntry

JSON_TYPE = "application/json"

# The progress a host last sent for an attempt (task id, number), kept by the server in memory.
ProgressOf = Callable[[str, int], "Progress | None"]


def json_response(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(data), status_code=status, media_type=JSON_TYPE, headers=headers)


def _no_progress(task_id: str, number: int) -> Progress | None:
    return None


# (second, its RFC 3339 prefix): most times in a response fall in the same second. One
# tuple, replaced whole, so threads sharing it never see a second with another's prefix.
_last_second: tuple[int, str] = (-1, "")


def rfc3339(ms: int) -> str:
    """`amc.core.times.to_rfc3339`, reusing the formatted second (strftime is the slow part)."""
    global _last_second
    second, millis = divmod(ms, 1000)
    cached = _last_second
    if cached[0] != second:
        cached = _last_second = (second, to_rfc3339(second * 1000)[:-4])  # "YYYY-MM-DDTHH:MM:SS."
    return f"{cached[1]}{millis:03d}Z"


def _time(ms: int | None) -> str | None:
    return None if ms is None else rfc3339(ms)


def seconds(ms: int) -> int | float:
    """Milliseconds as seconds: 30000 -> 30, 1500 -> 1.5."""
    whole, rest = divmod(ms, 1000)
    return whole if rest == 0 else ms / 1000


# The fields of a record that its view below does not show under the field's own name, and
# why. Every other field must appear as a member of the view:
# `tests/adapters/http/test_wire_fields.py` fails, naming the field, when a record gains one
# that its view neither shows nor lists here (the wire is a contract: a new field is a choice).
NOT_SHOWN: dict[type, dict[str, str]] = {
    Task: {
        "seq": "the submission order is internal; a listing's cursor carries it opaquely",
        "idempotency_key": "the protocol's task object does not echo it",
        "messages": "listed by GET /v1/tasks/{id}/messages",
        "admissions": "each message's own state says whether it was admitted",
        "artifacts": "listed by GET /v1/tasks/{id}/artifacts",
    },
    Attempt: {
        "lease_id": "known only to the host that holds the lease",
        "lease_ms": "the lease shows as lease_expires_at",
        "release_reason": "the history's released entry shows it; the attempt keeps it to recognise a repeat",
    },
    Session: {
        "idle_ms": "shown in seconds, as idle_timeout_seconds",
        "idle_since": "shown as idle_expires_at, the deadline it gives",
    },
    Action: {"step": "shown as its action and args (its id is the action's)"},
}


def task_view(task: Task, *, progress: ProgressOf = _no_progress, waiting: Waiting | None = None) -> dict[str, Any]:
    """A task; `progress` looks up what its attempts' hosts last said, `waiting` is why it
    waits (null unless queued): both are the server's knowledge of the moment, not records."""
    return {
        "id": task.id,
        "tenant": task.tenant,
        "status": task.status,
        "priority": task.priority,
        "max_attempts": task.max_attempts,
        "labels": task.labels,
        "requirements": {"serial": task.requirements.serial, "attributes": task.requirements.attributes},
        # A session's plan is empty inside: on the wire it has none (Part D).
        "plan": plan_to_json(task.plan) if task.session is None else None,
        "session": None if task.session is None else session_view(task),
        "created_at": rfc3339(task.created_at),
        "updated_at": rfc3339(task.updated_at),
        "attempt": task.attempts[-1].number if task.attempts else None,
        "attempts": [attempt_view(a, progress(task.id, a.number)) for a in task.attempts],
        "cancellation": cancellation_view(task.cancellation),
        "result": result_view(task.result),
        # A task's pause outlives its attempt in the record; on the wire `paused` is the
        # in-flight half and `held` the queued half, and an ended task is neither.
        "paused": task.paused and task.status in ACTIVE_STATUSES,
        "held": task.held,
        "follow_up_of": task.follow_up_of,
        "collected": [f.message_id for f in task.collected],
        "follow_ups": [follow_up_view(f) for f in task.collected],
        "waiting": None
        if waiting is None
        else {"reason": waiting.reason, "matching_devices": waiting.matching_devices},
    }


def session_view(task: Task) -> dict[str, Any]:
    session = task.session
    assert session is not None
    return {
        "idle_timeout_seconds": seconds(session.idle_ms),
        "end_requested_at": _time(session.end_requested_at),
        "idle_expires_at": _time(task.idle_expires_at),
        "actions": [action_view(a) for a in session.actions],
    }


def action_view(action: Action) -> dict[str, Any]:
    return {
        "id": action.id,
        "seq": action.seq,
        "action": action.step.action,
        "args": action.step.args,
        "status": action.status,
        "reason": action.reason,
        "attempt": action.attempt,
        "posted_at": rfc3339(action.posted_at),
        "delivered_at": _time(action.delivered_at),
        "started_at": _time(action.started_at),
        "ended_at": _time(action.ended_at),
        "output": action.output,
        "artifacts": list(action.artifacts),
    }


def poll_view(reply: PollAnswer, task: Task) -> dict[str, Any]:
    action = None if reply.action_id is None or task.session is None else task.session.action(reply.action_id)
    return {
        "action": None if action is None else action_view(action),
        "cancel_requested": reply.cancel_requested,
        "paused": reply.paused,
    }


def attempt_view(attempt: Attempt, progress: Progress | None = None) -> dict[str, Any]:
    return {
        "number": attempt.number,
        "host_id": attempt.host_id,
        "device": attempt.device,
        "assigned_at": rfc3339(attempt.assigned_at),
        "dispatched_at": _time(attempt.dispatched_at),
        "lease_expires_at": rfc3339(attempt.lease_expires_at),
        "renewals": attempt.renewals,
        "ended_at": _time(attempt.ended_at),
        "outcome": attempt.outcome,
        "progress": None if progress is None else {"step": progress.step, "ended": progress.ended},
        "steps": None if attempt.steps is None else [step_outcome_view(s) for s in attempt.steps],
    }


def cancellation_view(cancellation: Cancellation | None) -> dict[str, Any] | None:
    if cancellation is None:
        return None
    return {
        "state": cancellation.state,
        "requested_at": rfc3339(cancellation.requested_at),
        "attempt": cancellation.attempt,
        "delivered_at": _time(cancellation.delivered_at),
        "reason": cancellation.reason,
    }


def result_view(result: Result | None) -> dict[str, Any] | None:
    if result is None:
        return None
    return {
        "status": result.status,
        "attempt": result.attempt,
        "reason": result.reason,
        "metadata": result.metadata,
        "steps": None if result.steps is None else [step_outcome_view(s) for s in result.steps],
        "recorded_at": rfc3339(result.recorded_at),
    }


def step_outcome_view(step: StepOutcome) -> dict[str, Any]:
    """A step outcome; optional members appear only when the host reported them."""
    view: dict[str, Any] = {"id": step.id, "status": step.status}
    if step.reason is not None:
        view["reason"] = step.reason
    if step.started_at is not None:
        view["started_at"] = rfc3339(step.started_at)
    if step.ended_at is not None:
        view["ended_at"] = rfc3339(step.ended_at)
    if step.output is not None:
        view["output"] = step.output
    if step.artifacts:
        view["artifacts"] = list(step.artifacts)
    return view


def follow_up_view(follow_up: FollowUp) -> dict[str, Any]:
    return {"message_id": follow_up.message_id, "text": follow_up.text, "data": follow_up.data}


def message_view(message: Message) -> dict[str, Any]:
    boundary = message.boundary
    return {
        "id": message.id,
        "intent": message.intent,
        "text": message.text,
        "data": message.data,
        "state": message.state,
        "created_at": rfc3339(message.created_at),
        "attempt": message.attempt,
        "delivered_at": _time(message.delivered_at),
        "admitted_at": _time(message.admitted_at),
        "completed_at": _time(message.completed_at),
        "boundary": None if boundary is None else {"before_step": boundary.before_step},
        "detail": message.detail,
        "successor": message.successor,
    }


def host_view(host: Host, last_seen_at: int | None = None, online: bool = False) -> dict[str, Any]:
    """A host, with its liveness (kept by the server in memory): a device of a host that is
    not online reads offline too."""
    return {
        "id": host.id,
        "updated_at": rfc3339(host.updated_at),
        "last_seen_at": _time(last_seen_at),
        "online": online,
        "devices": [device_view(d, online) for d in host.devices],
    }


def device_view(device: Device, host_online: bool = True) -> dict[str, Any]:
    reservation = device.reservation
    return {
        "serial": device.serial,
        "attributes": device.attributes,
        "online": device.online and host_online,
        "reservation": None
        if reservation is None
        else {"task_id": reservation.task_id, "attempt": reservation.attempt},
    }


def assignment_view(assignment: Assignment) -> dict[str, Any]:
    view = {
        "task_id": assignment.task_id,
        "attempt": assignment.attempt,
        "lease_id": assignment.lease_id,
        "lease_expires_at": rfc3339(assignment.lease_expires_at),
        "lease_seconds": seconds(assignment.lease_ms),
        "device": assignment.device,
        "plan": plan_to_json(assignment.plan) if assignment.idle_ms is None else None,
        "cancel_requested": assignment.cancel_requested,
    }
    if assignment.idle_ms is not None:  # Part D: only a session's assignment says so
        view["session"] = {"idle_timeout_seconds": seconds(assignment.idle_ms)}
    return view


def lease_view(granted: LeaseGranted) -> dict[str, Any]:
    return {
        "task_id": granted.task_id,
        "attempt": granted.attempt,
        "status": granted.status,
        "lease_expires_at": rfc3339(granted.lease_expires_at),
        "cancel_requested": granted.cancel_requested,
        # Renewals are the hot path and nearly always carry nothing: skip the comprehension.
        "messages": [message_view(m) for m in granted.messages] if granted.messages else [],
    }


def history_view(entries: list[HistoryEntry]) -> dict[str, Any]:
    return {"events": [{"seq": e.seq, "at": rfc3339(e.at), "type": e.type, "data": e.data} for e in entries]}


def artifact_view(task_id: str, artifact: Artifact) -> dict[str, Any]:
    return {
        "id": artifact.id,
        "task_id": task_id,
        "attempt": artifact.attempt,
        "step": artifact.step,
        "name": artifact.name,
        "content_type": artifact.content_type,
        "size": artifact.size,
        "sha256": artifact.sha256,
        "created_at": rfc3339(artifact.created_at),
    }
