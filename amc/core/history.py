"""The per-task history of specs/protocol.md: which events a task's history shows, and how.

Events are the kernel's; history entries are what a caller reads. Renewals and repeated
starts change the attempt (its `renewals` count and expiry) but are not listed one by one,
and host registrations belong to no task.
"""

from __future__ import annotations

from amc.core.events import (
    ArtifactsPurged,
    ArtifactStored,
    AttemptReleased,
    AttemptStarted,
    CancellationDelivered,
    CancellationRequested,
    Event,
    FollowUpsCollected,
    LeaseExpired,
    MessageAcknowledged,
    MessageApplied,
    MessagePosted,
    MessagesDelivered,
    TaskAssigned,
    TaskEnded,
    TaskRequeued,
    TaskSubmitted,
)
from amc.core.lifecycle import MessageState
from amc.core.records import JSON

HISTORY_TYPES: dict[type, str] = {
    TaskSubmitted: "submitted",
    TaskAssigned: "assigned",
    AttemptStarted: "dispatched",
    CancellationRequested: "cancellation_requested",
    CancellationDelivered: "cancellation_delivered",
    LeaseExpired: "lease_expired",
    AttemptReleased: "released",
    TaskRequeued: "requeued",
    TaskEnded: "ended",
    MessagePosted: "message_posted",
    MessagesDelivered: "message_delivered",
    MessageAcknowledged: "message_acknowledged",
    MessageApplied: "message_acknowledged",  # by the server itself: a queued task held or released
    FollowUpsCollected: "follow_ups_collected",
    ArtifactStored: "artifact_stored",
    ArtifactsPurged: "artifacts_purged",
}


def history_type(event: Event) -> str | None:
    """The history type of `event`, or None when histories do not show it."""
    return HISTORY_TYPES.get(type(event))


def history_data(event: Event) -> dict[str, JSON]:
    """The `data` of a history entry: the event's own facts, without its task id and time."""
    match event:
        case TaskSubmitted():
            data = {"tenant": event.tenant, "priority": event.priority, "max_attempts": event.max_attempts}
            if event.follow_up_of is not None:
                data["follow_up_of"] = event.follow_up_of
            return data
        case TaskAssigned():
            return {"attempt": event.attempt, "host_id": event.host_id, "device": event.device}
        case AttemptStarted() | CancellationDelivered() | LeaseExpired():
            return {"attempt": event.attempt}
        case CancellationRequested():
            return {"attempt": event.attempt, "reason": event.reason}
        case AttemptReleased():
            return {"attempt": event.attempt, "reason": event.reason}
        case TaskRequeued():
            return {}
        case TaskEnded():
            return {"status": event.status, "reason": event.reason, "attempt": event.attempt}
        case MessagePosted():
            return {"message_id": event.message_id, "intent": event.intent}
        case MessagesDelivered():
            return {"attempt": event.attempt, "message_ids": list(event.message_ids)}
        case MessageAcknowledged():
            boundary = None if event.boundary is None else {"before_step": event.boundary.before_step}
            return {
                "attempt": event.attempt,
                "message_id": event.message_id,
                "state": event.state,
                "boundary": boundary,
                "detail": event.detail,
            }
        case MessageApplied():
            return {"message_id": event.message_id, "state": MessageState.completed, "by": "server"}
        case FollowUpsCollected():
            return {"successor": event.successor_id, "message_ids": list(event.message_ids)}
        case ArtifactStored():
            a = event.artifact
            return {"id": a.id, "step": a.step, "name": a.name, "size": a.size, "sha256": a.sha256}
        case ArtifactsPurged():
            return {"ids": [a.id for a in event.artifacts], "bytes": sum(a.size for a in event.artifacts)}
    raise TypeError(f"{type(event).__name__} is not shown in histories")
