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
    "message_posted": events.MessagePosted,
    "messages_delivered": events.MessagesDelivered,
    "message_acknowledged": events.MessageAcknowledged,
    "message_applied": events.MessageApplied,
    "messages_not_admitted": events.MessagesNotAdmitted,
    "follow_ups_collected": events.FollowUpsCollected,
}

COMMAND_TAGS: dict[str, type] = {
    "submit_task": commands.SubmitTask,
    "cancel_task": commands.CancelTask,
    "register_host": commands.RegisterHost,
    "claim_task": commands.ClaimTask,
    "start_attempt": commands.StartAttempt,
    "renew_lease": commands.RenewLease,
    "report_result": commands.ReportResult,
    "post_message": commands.PostMessage,
    "acknowledge_message": commands.AcknowledgeMessage,
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


# --- the hot records, by hand ------------------------------------------------------------
#
# The store encodes every changed task record on every commit and decodes every task at
# start-up; the converter's generated hooks spend most of that time on generic handling
# of optional fields, tuples and dicts. These functions produce and accept exactly what
# the converter does for these classes (the same keys in the same order, so the same JSON
# bytes), which `tests/adapters/lmdb/test_codec.py` proves by property. Structuring takes
# a dict fresh from `orjson.loads` (its nested dicts become the records' dict fields) that
# holds exactly the keys the converter writes; anything else raises, and the store then
# asks the converter, which fills defaults or refuses with its own error.
# Keep them in step with `amc.core.records`: a field added there must be added here.



def unstructure_plan(p: records.Plan) -> dict[str, Any]:
    steps, stages = p.steps, p.stages
    return {
        "steps": None if steps is None else [{"id": s.id, "action": s.action, "args": s.args} for s in steps],
        "stages": None
        if stages is None
        else [
            {"id": g.id, "steps": [{"id": s.id, "action": s.action, "args": s.args} for s in g.steps]}
            for g in stages
        ],
    }


def unstructure_attempt(a: records.Attempt) -> dict[str, Any]:
    return {
        "number": a.number,
        "host_id": a.host_id,
        "device": a.device,
        "lease_id": a.lease_id,
        "lease_ms": a.lease_ms,
        "assigned_at": a.assigned_at,
        "lease_expires_at": a.lease_expires_at,
        "dispatched_at": a.dispatched_at,
        "renewals": a.renewals,
        "ended_at": a.ended_at,
        "outcome": a.outcome,
    }


def unstructure_step_outcome(o: records.StepOutcome) -> dict[str, Any]:
    return {
        "id": o.id,
        "status": o.status,
        "reason": o.reason,
        "started_at": o.started_at,
        "ended_at": o.ended_at,
        "output": o.output,
    }


def unstructure_host(h: records.Host) -> dict[str, Any]:
    return {
        "id": h.id,
        "updated_at": h.updated_at,
        "devices": [
            {
                "serial": d.serial,
                "attributes": d.attributes,
                "online": d.online,
                "reservation": None
                if d.reservation is None
                else {"task_id": d.reservation.task_id, "attempt": d.reservation.attempt},
            }
            for d in h.devices
        ],
    }


def unstructure_task(t: records.Task, plan: Any = None) -> dict[str, Any]:
    """`converter.unstructure(t)`; `plan`, when given, stands in for the plan's value
    (the store passes the plan's JSON as an `orjson.Fragment`, encoded once per plan)."""
    r = t.requirements
    c = t.cancellation
    res = t.result
    return {
        "id": t.id,
        "tenant": t.tenant,
        "status": t.status,
        "plan": unstructure_plan(t.plan) if plan is None else plan,
        "requirements": {"serial": r.serial, "attributes": r.attributes},
        "priority": t.priority,
        "max_attempts": t.max_attempts,
        "labels": t.labels,
        "idempotency_key": t.idempotency_key,
        "created_at": t.created_at,
        "updated_at": t.updated_at,
        "seq": t.seq,
        "attempts": [unstructure_attempt(a) for a in t.attempts],
        "cancellation": None
        if c is None
        else {
            "state": c.state,
            "requested_at": c.requested_at,
            "attempt": c.attempt,
            "delivered_at": c.delivered_at,
            "reason": c.reason,
        },
        "result": None
        if res is None
        else {
            "status": res.status,
            "attempt": res.attempt,
            "reason": res.reason,
            "metadata": res.metadata,
            "steps": None if res.steps is None else [unstructure_step_outcome(o) for o in res.steps],
            "recorded_at": res.recorded_at,
        },
        "paused": t.paused,
        "messages": [converter.unstructure(m) for m in t.messages] if t.messages else [],
        "admissions": list(t.admissions),
        "follow_up_of": t.follow_up_of,
        "collected": [converter.unstructure(f) for f in t.collected] if t.collected else [],
    }


class UnexpectedKeys(ValueError):
    """A dict the hand-written structure functions do not take (see above)."""


_build_step = records.constructor(records.Step)
_build_plan = records.constructor(records.Plan)
_build_task = records.constructor(records.Task)


def _steps(items: list) -> tuple[records.Step, ...]:
    build = _build_step
    out = tuple([build(id=s["id"], action=s["action"], args=s["args"]) for s in items])
    for s in items:
        if len(s) != 3:
            raise UnexpectedKeys(f"a step with the keys {sorted(s)}")
    return out


def structure_plan(d: dict[str, Any]) -> records.Plan:
    if len(d) != 2:
        raise UnexpectedKeys(f"a plan with the keys {sorted(d)}")
    steps = d["steps"]
    stages = d["stages"]
    if stages is not None:
        Stage = records.Stage
        for g in stages:
            if len(g) != 2:
                raise UnexpectedKeys(f"a stage with the keys {sorted(g)}")
        stages = tuple([Stage(id=g["id"], steps=_steps(g["steps"])) for g in stages])
    return _build_plan(steps=None if steps is None else _steps(steps), stages=stages)


def structure_requirements(d: dict[str, Any]) -> records.Requirements:
    if len(d) != 2:
        raise UnexpectedKeys(f"requirements with the keys {sorted(d)}")
    return records.Requirements(serial=d["serial"], attributes=d["attributes"])


def structure_task(d: dict[str, Any], plan: Any = None, requirements: Any = None) -> records.Task:
    """`converter.structure(d, Task)` for a dict fresh from `orjson.loads` whose every
    key the converter wrote (records written by this codec). A dict missing a key raises
    KeyError, and one with a key too many may be accepted: give such a dict to the
    converter instead, which fills defaults and refuses unknown keys (the store does).

    `plan` and `requirements`, when given, structure those two fields instead (the
    start-up loader shares equal plans between tasks)."""
    if len(d) != 20:
        raise UnexpectedKeys(f"a task with the keys {sorted(d)}")
    r = d["requirements"]
    attempts = d["attempts"]
    c = d["cancellation"]
    res = d["result"]
    if res is not None:
        if len(res) != 6:
            raise UnexpectedKeys(f"a result with the keys {sorted(res)}")
        steps = res["steps"]
        res = records.Result(
            status=res["status"],
            attempt=res["attempt"],
            reason=res["reason"],
            metadata=res["metadata"],
            steps=None if steps is None else tuple([records.StepOutcome(**o) for o in steps]),
            recorded_at=res["recorded_at"],
        )
    return _build_task(
        id=d["id"],
        tenant=d["tenant"],
        status=d["status"],
        plan=structure_plan(d["plan"]) if plan is None else plan(d["plan"]),
        requirements=structure_requirements(r) if requirements is None else requirements(r),
        priority=d["priority"],
        max_attempts=d["max_attempts"],
        labels=d["labels"],
        idempotency_key=d["idempotency_key"],
        created_at=d["created_at"],
        updated_at=d["updated_at"],
        seq=d["seq"],
        attempts=tuple([records.Attempt(**a) for a in attempts]) if attempts else (),
        cancellation=None if c is None else records.Cancellation(**c),
        result=res,
        paused=d["paused"],
        messages=tuple([converter.structure(m, records.Message) for m in d["messages"]]) if d["messages"] else (),
        admissions=tuple(d["admissions"]),
        follow_up_of=d["follow_up_of"],
        collected=tuple([converter.structure(f, records.FollowUp) for f in d["collected"]]) if d["collected"] else (),
    )
