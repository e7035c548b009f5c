"""The on-disk layout of an amc store: one LMDB environment, its named databases, their keys.

This module is the storage format. Everything that turns a record, an event or an index
entry into bytes, or back, lives here, so a reader can check the format in one place.
Change anything below and bump `SCHEMA_VERSION`, with a step in `upgrade.py` that brings
the previous version's stores forward.

Databases (all keys sort bytewise, which is how LMDB orders them)::

    meta      name -> value            format marker, schema version, clock state
    log       seq (u64 BE) -> event    the event log, append-only, seq counting from 1
    tasks     task seq -> task         the current task records, by the task's `seq`
    task_ids  task id -> task seq      the one entry per task written at its submit
    hosts     host id -> host          the current host records; a host holds its devices
                                       in serial order, so it is the devices-per-host index
    listing   scope + seq -> task id   tasks oldest first, four entries per task: every
                                       task, per tenant, per status, per tenant and status
    queue     rank + seq -> task id    queued tasks, highest priority first, then oldest
    leases    expiry + task id -> n    active leases by expiry (n: the attempt number)
    history   task seq -> log seq      dupsort: the log entries a task's history shows, in order

Why records are keyed by `seq` and not by id (schema 2): each commit writes every B-tree
page it touched, and the tasks a batch touches are the live ones, which are mostly the
recent ones. Keyed by seq they share a few pages at the end of the tree; keyed by id (any
order a client chose) each sat on a page of its own. With 64 callers of `bench/store.py`
that took the commit from 18 to 10 µs of CPU per command and its fsync wait from 47 to
27 µs. A store of schema 1 is upgraded in place, in one transaction, the first time it is
opened for writing (`upgrade.py`).

Values are the JSON of `amc.adapters.lmdb.codec` (one cattrs converter, stable tags), so renaming a
Python class never breaks a stored record. Tasks, hosts and the events of the commit
path are encoded (and tasks decoded) by hand-written functions beside the converter that
produce and accept exactly the converter's JSON, byte for byte (proven by
`tests/adapters/lmdb/test_codec.py`); a record they do not take goes to the converter.
A field added to a record with a default keeps old stores readable (cattrs fills the
default), but an older amc would refuse the new key, so bump `SCHEMA_VERSION` with it,
and add the field to the hand-written functions in `amc.adapters.lmdb.codec` (the test fails until then). The tasks, hosts and the indexes are derived
from the log: `amc store verify` replays the log and checks that they agree.
"""

from __future__ import annotations

import functools
import re
import struct
from typing import Any

import attrs
import orjson

from amc.adapters.lmdb import codec
from amc.core.errors import InvalidRequest
from amc.core.events import Event, TaskEnded, TaskSubmitted
from amc.core.records import Host, Plan, Task

SCHEMA_VERSION = 2
FORMAT = b"amc-store"

DATA_FILE = "data.mdb"  # LMDB's own file names (subdir=True)
LMDB_LOCK_FILE = "lock.mdb"
WRITER_LOCK_FILE = "amc.lock"  # flock'ed by the one writer process; see store.py

# meta keys
META_FORMAT = b"format"
META_SCHEMA = b"schema"
META_CREATED_AT = b"created_at"
META_LAST_TIME = b"last_time"  # the latest `now` any command was stamped with
META_MANUAL_NOW = b"manual_now"  # where a manual clock stands (written on every advance)

DB_META = b"meta"
DB_LOG = b"log"
DB_TASKS = b"tasks"
DB_TASK_IDS = b"task_ids"
DB_HOSTS = b"hosts"
DB_LISTING = b"listing"
DB_QUEUE = b"queue"
DB_LEASES = b"leases"
DB_HISTORY = b"history"

# name -> keyword arguments of `Environment.open_db`
DATABASES: dict[bytes, dict[str, bool]] = {
    DB_META: {},
    DB_LOG: {},
    DB_TASKS: {},
    DB_TASK_IDS: {},
    DB_HOSTS: {},
    DB_LISTING: {},
    DB_QUEUE: {},
    DB_LEASES: {},
    DB_HISTORY: {"dupsort": True, "dupfixed": True},
}

U64 = struct.Struct(">Q")
U32 = struct.Struct(">I")
U16 = struct.Struct(">H")
QUEUE_RANK = struct.Struct(">QQ")
PRIORITY_BIAS = 1 << 63  # rank = bias - priority: a higher priority sorts first

# LMDB refuses keys longer than 511 bytes (and empty ones); ids become parts of keys.
MAX_ID_BYTES = 255
_CURSOR = re.compile(r"[0-9]{1,19}")


def u64(value: int) -> bytes:
    return U64.pack(value)


def read_u64(raw: bytes) -> int:
    return U64.unpack(raw)[0]


def id_key(identifier: str) -> bytes | None:
    """The key of a task or host id, or None when no such id can be stored."""
    raw = identifier.encode()
    return raw if 0 < len(raw) <= MAX_ID_BYTES else None


def task_key(task: Task) -> bytes:
    """The key of a task's record (and of its history): its seq."""
    return U64.pack(task.seq)


def task_key_label(key: bytes) -> str:
    """Names the task record under `key` in a message (its id may not be readable)."""
    return f"at seq {read_u64(key)}" if len(key) == 8 else f"under the malformed key {key!r}"


def id_key_label(key: bytes) -> str:
    """Names the host record under `key` in a message."""
    return key.decode(errors="replace")


def check_id(what: str, identifier: str) -> None:
    """Refuse an id the store could not key (before it reaches the kernel)."""
    if id_key(identifier) is None:
        raise InvalidRequest(f"{what}: must be 1 to {MAX_ID_BYTES} bytes of UTF-8")


# --- listing: four scopes per task, each a prefix-free byte string -------------------


def _part(value: str | None) -> bytes:
    if value is None:
        return b"\x00"  # "any"
    raw = value.encode()
    return b"\x01" + U16.pack(len(raw)) + raw


@functools.lru_cache(maxsize=8192)  # tenants x statuses; the commit path builds these often
def listing_prefix(tenant: str | None, status: str | None) -> bytes:
    """The prefix of the listing entries of `tenant`'s tasks with `status` (None: any)."""
    return _part(tenant) + _part(status)


def listing_keys(task: Task) -> tuple[bytes, ...]:
    seq = u64(task.seq)
    return tuple(
        listing_prefix(tenant, status) + seq
        for tenant in (None, task.tenant)
        for status in (None, task.status)
    )


def status_listing_keys(task: Task) -> tuple[bytes, bytes]:
    """The two listing keys that change when the task's status changes."""
    seq = u64(task.seq)
    return listing_prefix(None, task.status) + seq, listing_prefix(task.tenant, task.status) + seq


def parse_cursor(after: str | None) -> int:
    """The first seq a page starting `after` a cursor may show."""
    if after is None:
        return 0
    if not isinstance(after, str) or not _CURSOR.fullmatch(after):
        raise InvalidRequest("after: not a cursor this server returned in `next`")
    return int(after) + 1


def cursor_of(task: Task) -> str:
    """The cursor of a page that ended with `task` (the same form as `MemoryService`)."""
    return str(task.seq)


# --- queue and leases ------------------------------------------------------------------


def queue_key(task: Task) -> bytes:
    return QUEUE_RANK.pack(PRIORITY_BIAS - task.priority, task.seq)


def lease_of(task: Task) -> tuple[bytes, bytes] | None:
    """The leases entry of the task's active attempt, or None when it has none."""
    attempt = task.active_attempt
    if attempt is None:
        return None
    return u64(attempt.lease_expires_at) + task.id.encode(), U32.pack(attempt.number)


def lease_expiry(key: bytes) -> int:
    return read_u64(key[:8])


# --- values ------------------------------------------------------------------------------

_FLAT_TYPES = (int, str, int | None, str | None)


def _encoder(cls: type):
    tag = _TAGS[cls]
    fields = attrs.fields(attrs.resolve_types(cls))
    if all(f.type in _FLAT_TYPES for f in fields):
        # Most events hold only ints and strings, which the converter passes through:
        # one generated dict display gives the same JSON without its per-field dispatch.
        items = ", ".join(f"{f.name!r}: v.{f.name}" for f in fields)
        namespace = {"dumps": orjson.dumps}
        exec(f"def encode(v):\n    return dumps({{{items}, 'type': {tag!r}}})", namespace)  # noqa: S102
        return namespace["encode"]
    unstructure = codec.converter.get_unstructure_hook(cls)

    def encode(value) -> bytes:
        data = unstructure(value)
        data["type"] = tag
        return orjson.dumps(data)

    return encode


_TAGS = {cls: tag for table in (codec.EVENT_TAGS, codec.RECORD_TAGS) for tag, cls in table.items()}
_ENCODERS: dict[type, Any] = {}


def encode(value: Any) -> bytes:
    """A record or an event as tagged JSON: exactly `codec.dumps(value)`.

    The commit path encodes every changed record and every event, so it keeps the
    converter's unstructure hook per class instead of dispatching on every call, and
    encodes tasks with `encode_task`.
    """
    try:
        return _ENCODERS[type(value)](value)
    except KeyError:
        _ENCODERS[type(value)] = _encoder(type(value))
        return _ENCODERS[type(value)](value)


# A task's plan never changes after its submit, but the task record is rewritten on every
# change (claim, start, each renewal, the result). So the plan's JSON is encoded once and
# spliced into each later record as an `orjson.Fragment`: the same bytes. The cache is
# keyed by the plan object's identity (the kernel carries the same `Plan` through every
# replacement of a task) and holds the plan, so an id cannot be reused while cached.
_PLAN_JSON: dict[int, tuple[Plan, orjson.Fragment]] = {}
_PLAN_JSON_MAX = 16_384


def _plan_json(plan: Plan) -> orjson.Fragment:
    cached = _PLAN_JSON.get(id(plan))
    if cached is None or cached[0] is not plan:
        if len(_PLAN_JSON) >= _PLAN_JSON_MAX:
            _PLAN_JSON.clear()
        cached = _PLAN_JSON[id(plan)] = (plan, orjson.Fragment(orjson.dumps(codec.unstructure_plan(plan))))
    return cached[1]


def encode_task(task: Task) -> bytes:
    """`encode(task)`, with the hand-written codec and the plan's JSON encoded once."""
    data = codec.unstructure_task(task, _plan_json(task.plan))
    data["type"] = "task"
    return orjson.dumps(data)


def encode_host(host: Host) -> bytes:
    data = codec.unstructure_host(host)
    data["type"] = "host"
    return orjson.dumps(data)


def encode_task_submitted(e: TaskSubmitted) -> bytes:
    r = e.requirements
    return orjson.dumps({
        "at": e.at,
        "task_id": e.task_id,
        "tenant": e.tenant,
        "plan": _plan_json(e.plan),  # the task record of this submit reuses it
        "requirements": {"serial": r.serial, "attributes": r.attributes},
        "priority": e.priority,
        "max_attempts": e.max_attempts,
        "labels": e.labels,
        "idempotency_key": e.idempotency_key,
        "follow_up_of": e.follow_up_of,
        "collected": [codec.converter.unstructure(f) for f in e.collected] if e.collected else [],
        "type": "task_submitted",
    })


def encode_task_ended(e: TaskEnded) -> bytes:
    steps = e.steps
    return orjson.dumps({
        "at": e.at,
        "task_id": e.task_id,
        "status": e.status,
        "reason": e.reason,
        "attempt": e.attempt,
        "metadata": e.metadata,
        "steps": None if steps is None else [codec.unstructure_step_outcome(o) for o in steps],
        "type": "task_ended",
    })


_ENCODERS[Task] = encode_task
_ENCODERS[Host] = encode_host
_ENCODERS[TaskSubmitted] = encode_task_submitted
_ENCODERS[TaskEnded] = encode_task_ended


# The start-up path decodes every task, so it structures with the hand-written codec
# (`codec.structure_task`, proven equal to the converter) instead of `codec.loads` (which
# copies the dict and dispatches on the tag): the same records, the same stable tags.
# A record the hand-written codec does not take (a field missing, as in a record written
# before a defaulted field was added, or an unknown one) goes to the converter, which
# fills the default or refuses it with its own error, as before.
_HOOKS = {"task": codec.converter.get_structure_hook(Task), "host": codec.converter.get_structure_hook(Host)}


def _decode_record(raw: bytes, tag: str, cls: type) -> Any:
    data = orjson.loads(raw)
    found = data.pop("type", None)
    if found != tag:
        raise ValueError(f"expected a {tag!r} record, found {found!r}")
    if cls is Task:
        try:
            return codec.structure_task(data)
        except Exception:
            return _by_converter(raw, cls)
    return _HOOKS[tag](data, cls)


def _by_converter(raw: bytes, cls: type) -> Any:
    """The converter's verdict on a record the hand-written codec did not take."""
    data = orjson.loads(raw)
    data.pop("type", None)
    return _HOOKS[codec._TAG_OF[cls]](data, cls)


def decode_task(raw: bytes) -> Task:
    return _decode_record(raw, "task", Task)


class TaskLoader:
    """Decodes the task records at start-up, structuring each distinct plan (and each
    distinct set of requirements) once.

    A backlog is mostly many tasks of a few plans, and structuring a plan is the larger
    part of decoding a task. Records are immutable, so tasks decoded from the same plan
    JSON can share one `Plan`. Tasks are structured by `codec.structure_task` (the
    converter's result, by hand), with those two fields routed through a cache. Keep a
    loader for one load: its caches grow with the distinct plans it saw.
    """

    def __init__(self) -> None:
        def shared(structure):
            cache: dict[bytes, Any] = {}
            seen = 0

            def structure_shared(data):
                nonlocal seen
                if seen < 0:  # sharing did not pay: every record structures its own
                    return structure(data)
                key = orjson.dumps(data)  # the same stored JSON gives the same record
                found = cache.get(key)
                if found is None:
                    found = cache[key] = structure(data)
                seen += 1
                # After a few thousand records, stop keying if almost all were distinct
                # (every task its own plan): the key costs more than it saves.
                if seen == 4096 and len(cache) > 4096 - 512:
                    cache.clear()
                    seen = -1
                return found

            return structure_shared

        self._plan = shared(codec.structure_plan)
        self._requirements = shared(codec.structure_requirements)

    def __call__(self, raw: bytes) -> Task:
        data = orjson.loads(raw)
        found = data.pop("type", None)
        if found != "task":
            raise ValueError(f"expected a 'task' record, found {found!r}")
        try:
            return codec.structure_task(data, self._plan, self._requirements)
        except Exception:
            return _by_converter(raw, Task)


def decode_host(raw: bytes) -> Host:
    return _decode_record(raw, "host", Host)


def decode_event(raw: bytes) -> Event:
    event = codec.loads(raw)
    if type(event) not in codec.EVENT_TAGS.values():
        raise ValueError(f"the log holds a {type(event).__name__}, not an event")
    return event


def fields_differing(a: Any, b: Any) -> list[str]:
    """The names of the top-level fields in which two records of one class differ."""
    return [f.name for f in attrs.fields(type(a)) if getattr(a, f.name) != getattr(b, f.name)]
