"""The one codec: kernel records, commands and events to JSON and back.

Stored events and records are tagged with explicit, stable names (never the Python
class name), so renaming a class cannot break a store written before the rename. The
tags below are part of the storage format: add new ones, never change old ones.
"""

from __future__ import annotations

from typing import Any

import orjson
from cattrs.preconf.orjson import make_converter

from amc.core import commands, events, records

converter = make_converter(forbid_extra_keys=True)

EVENT_TAGS: dict[str, type] = {
    "task_submitted": events.TaskSubmitted,
    "host_registered": events.HostRegistered,
    "task_assigned": events.TaskAssigned,
    "attempt_started": events.AttemptStarted,
    "lease_renewed": events.LeaseRenewed,
    "lease_extended": events.LeaseExtended,
    "cancellation_requested": events.CancellationRequested,
    "cancellation_delivered": events.CancellationDelivered,
    "lease_expired": events.LeaseExpired,
    "task_requeued": events.TaskRequeued,
    "task_ended": events.TaskEnded,
}

COMMAND_TAGS: dict[str, type] = {
    "submit_task": commands.SubmitTask,
    "cancel_task": commands.CancelTask,
    "register_host": commands.RegisterHost,
    "claim_task": commands.ClaimTask,
    "start_attempt": commands.StartAttempt,
    "renew_lease": commands.RenewLease,
    "report_result": commands.ReportResult,
    "expire_leases": commands.ExpireLeases,
}

RECORD_TAGS: dict[str, type] = {"task": records.Task, "host": records.Host}

_TAG_OF: dict[type, str] = {cls: tag for table in (EVENT_TAGS, COMMAND_TAGS, RECORD_TAGS) for tag, cls in table.items()}
_CLASS_OF: dict[str, type] = {tag: cls for table in (EVENT_TAGS, COMMAND_TAGS, RECORD_TAGS) for tag, cls in table.items()}


def to_data(value: Any) -> dict[str, Any]:
    """A tagged, JSON-ready dict: ``{"type": tag, ...fields}``."""
    data = converter.unstructure(value)
    data["type"] = _TAG_OF[type(value)]
    return data


def from_data(data: dict[str, Any]) -> Any:
    """The inverse of `to_data`."""
    fields = dict(data)
    cls = _CLASS_OF[fields.pop("type")]
    return converter.structure(fields, cls)


def dumps(value: Any) -> bytes:
    return orjson.dumps(to_data(value))


def loads(raw: bytes) -> Any:
    return from_data(orjson.loads(raw))
