"""Upgrading a store written with an older schema, in place, when it is opened for writing.

Schema 1 to 2: task records, and the history index, were keyed by task id; they are now
keyed by the task's seq, and the `task_ids` index maps an id to that seq (`layout` says
why). Every value stays byte for byte the same and the log is not touched, so the upgrade
moves two databases' entries to their new keys and fills the new index. It is one LMDB
write transaction: a crash part-way leaves the schema 1 store exactly as it was, and the
next open upgrades it again.

Schema 2 to 3: an attempt keeps the step outcomes and the reason of a release (`steps`,
`release_reason`). Every attempt of an older store ended otherwise, so each gets both as
null; the task records are rewritten with them, the log again untouched. A schema 1 store
takes both steps in the same transaction.

Schema 3 to 4: a task record gains `artifacts` (specs/protocol.md Part C), and events the
`artifact_stored` tag. A record written without the field reads as having none, so no
record is rewritten; only the schema version changes (an older amc must not open a store
whose records it would refuse). A store of schema 1 or 2 takes the steps before it first,
all in the same transaction.

Schema 4 to 5: a step outcome gains `artifacts` (the ids of its step's artifacts). An
outcome written without it reads as listing none, in a record or in a logged event, so,
as from 3 to 4, only the schema version changes.

Schema 5 to 6: a task record gains `session` (specs/protocol.md Part D: a session's actions
and idle timeout), and events the session tags; a submit event gains `idle_ms`. A record or
event written without them reads as a plan's task, so, as from 3 to 4, only the schema
version changes.

Schema 6 to 7: a plan gains `record` (a plan that records its attempt's screen); a plan
written without it does not record, so, again, only the schema version changes.

Only the writer upgrades (it holds the writer lock); a read-only open of an old store
(`amc store verify`) is refused with a message that says how to upgrade it.
"""

from __future__ import annotations

import logging
from pathlib import Path

import lmdb
import orjson

from amc.adapters.errors import NotAStore
from amc.adapters.lmdb import layout

log = logging.getLogger("amc.store")

UPGRADABLE = (b"1", b"2", b"3", b"4", b"5", b"6")

# The fields of the records a store keeps (a task and a host, and the records inside them)
# at `layout.SCHEMA_VERSION`. A field added to or removed from a record changes the stored
# JSON: it needs a new schema version, a step here that brings older stores forward, and the
# new field list below. `tests/adapters/lmdb/test_upgrade.py` fails, naming the field, until
# the list matches the records (keys are class names: a renamed class renames its key too).
STORED_FIELDS: dict[str, tuple[str, ...]] = {
    "Attempt": (
        "number",
        "host_id",
        "device",
        "lease_id",
        "lease_ms",
        "assigned_at",
        "lease_expires_at",
        "dispatched_at",
        "renewals",
        "ended_at",
        "outcome",
        "steps",
        "release_reason",
    ),
    "Boundary": ("before_step",),
    "Cancellation": ("state", "requested_at", "attempt", "delivered_at", "reason"),
    "Device": ("serial", "attributes", "online", "reservation"),
    "FollowUp": ("message_id", "text", "data"),
    "Host": ("id", "updated_at", "devices"),
    "Message": (
        "id",
        "intent",
        "text",
        "data",
        "state",
        "created_at",
        "attempt",
        "delivered_at",
        "admitted_at",
        "completed_at",
        "boundary",
        "detail",
        "successor",
    ),
    "Plan": ("steps", "stages", "record"),
    "Requirements": ("serial", "attributes"),
    "Reservation": ("task_id", "attempt"),
    "Result": ("status", "attempt", "reason", "metadata", "steps", "recorded_at"),
    "Stage": ("id", "steps"),
    "Step": ("id", "action", "args"),
    "StepOutcome": ("id", "status", "reason", "started_at", "ended_at", "output", "artifacts"),
    "Task": (
        "id",
        "tenant",
        "status",
        "plan",
        "requirements",
        "priority",
        "max_attempts",
        "labels",
        "idempotency_key",
        "created_at",
        "updated_at",
        "seq",
        "attempts",
        "cancellation",
        "result",
        "paused",
        "messages",
        "admissions",
        "follow_up_of",
        "collected",
        "artifacts",
        "session",
    ),
    "Session": ("idle_ms", "end_requested_at", "actions", "idle_since"),
    "Action": (
        "id",
        "seq",
        "step",
        "status",
        "posted_at",
        "reason",
        "attempt",
        "delivered_at",
        "started_at",
        "ended_at",
        "output",
        "artifacts",
    ),
    "Artifact": ("id", "attempt", "step", "name", "content_type", "size", "sha256", "created_at"),
}


def upgrade(path: Path, env: lmdb.Environment, meta: lmdb._Database) -> None:
    """Bring the store from its schema (one of `UPGRADABLE`) to `layout.SCHEMA_VERSION` in
    one transaction.

    The transaction rewrites the task records beside the old ones (the old pages are
    freed only when it commits), so a map that cannot hold both is doubled and the
    upgrade started again.
    """
    while True:
        try:
            count = _upgrade(path, env, meta)
            break
        except lmdb.MapFullError:
            env.set_mapsize(2 * env.info()["map_size"])
    log.info("upgraded the store in %s to schema version %d (%d tasks)", path, layout.SCHEMA_VERSION, count)


def _upgrade(path: Path, env: lmdb.Environment, meta: lmdb._Database) -> int:
    """Every step from the store's schema on, then the new version, in one transaction;
    the number of task records rewritten."""
    with env.begin(write=True) as txn:
        tasks = env.open_db(layout.DB_TASKS, txn=txn, **layout.DATABASES[layout.DB_TASKS])
        schema = txn.get(layout.META_SCHEMA, db=meta)
        count = 0
        if schema == b"1":
            _from_schema_1(path, env, txn, tasks)
        if schema in (b"1", b"2"):
            count = _from_schema_2(path, txn, tasks)
        # 3 to 4, 4 to 5, 5 to 6 and 6 to 7: nothing to rewrite (see the module docstring).
        txn.put(layout.META_SCHEMA, str(layout.SCHEMA_VERSION).encode(), db=meta)
    return count


def _from_schema_1(path: Path, env: lmdb.Environment, txn: lmdb.Transaction[bytes], tasks: lmdb._Database) -> None:
    history = env.open_db(layout.DB_HISTORY, txn=txn, **layout.DATABASES[layout.DB_HISTORY])
    task_ids = env.open_db(layout.DB_TASK_IDS, txn=txn, **layout.DATABASES[layout.DB_TASK_IDS])
    records = list(txn.cursor(db=tasks))
    entries = list(txn.cursor(db=history))  # every (task id, log seq), duplicates included
    txn.drop(tasks, delete=False)
    txn.drop(history, delete=False)
    seq_keys: dict[bytes, bytes] = {}
    for task_id, raw in records:
        try:
            seq_key = layout.u64(orjson.loads(raw)["seq"])
        except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
            raise NotAStore(
                f"{path}: the task record {task_id.decode(errors='replace')!r} has no seq ({exc!r})"
            ) from None
        seq_keys[task_id] = seq_key
        txn.put(seq_key, raw, db=tasks)
        txn.put(task_id, seq_key, db=task_ids)
    for task_id, log_key in entries:
        if task_id not in seq_keys:
            raise NotAStore(
                f"{path}: the history index names task {task_id.decode(errors='replace')!r}, which has no record"
            )
        txn.put(seq_keys[task_id], log_key, db=history)


def _from_schema_2(path: Path, txn: lmdb.Transaction[bytes], tasks: lmdb._Database) -> int:
    """Every attempt gets `steps` and `release_reason`, both null: none was released."""
    records = list(txn.cursor(db=tasks))
    for key, raw in records:
        try:
            record = orjson.loads(raw)
            attempts = record["attempts"]
        except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
            raise NotAStore(f"{path}: a task record is not one ({exc!r})") from None
        if not attempts:
            continue  # nothing to add: the record stays byte for byte the same
        for attempt in attempts:
            attempt.setdefault("steps", None)
            attempt.setdefault("release_reason", None)
        txn.put(key, orjson.dumps(record), db=tasks)
    return len(records)
