"""The on-disk layout of an amc store: one LMDB environment, its named databases, their keys.

This module is the storage format. Everything that turns a record, an event or an index
entry into bytes, or back, lives here, so a reader can check the format in one place.
Change anything below and bump `SCHEMA_VERSION`.

Databases (all keys sort bytewise, which is how LMDB orders them)::

    meta      name -> value            format marker, schema version, clock state
    log       seq (u64 BE) -> event    the event log, append-only, seq counting from 1
    tasks     task id -> task          the current task records
    hosts     host id -> host          the current host records; a host holds its devices
                                       in serial order, so it is the devices-per-host index
    listing   scope + seq -> task id   tasks oldest first, four entries per task: every
                                       task, per tenant, per status, per tenant and status
    queue     rank + seq -> task id    queued tasks, highest priority first, then oldest
    leases    expiry + task id -> n    active leases by expiry (n: the attempt number)
    history   task id -> log seq       dupsort: the log entries a task's history shows, in order

Values are the JSON of `amc.codec` (one cattrs converter, stable tags), so renaming a
Python class never breaks a stored record. A field added to a record with a default
keeps old stores readable (cattrs fills the default), but an older amc would refuse the
new key, so bump `SCHEMA_VERSION` with it. The tasks, hosts and the indexes are derived
from the log: `amc store verify` replays the log and checks that they agree.
"""

from __future__ import annotations

import functools
import re
import struct
from typing import Any

import attrs
import orjson
from cattrs.gen import make_dict_structure_fn, override

from amc import codec
from amc.core.errors import InvalidRequest
from amc.core.events import Event
from amc.core.records import Host, Plan, Requirements, Task

SCHEMA_VERSION = 1
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

def _encoder(cls: type):
    tag = _TAGS[cls]
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
    converter's unstructure hook per class instead of dispatching on every call.
    """
    try:
        return _ENCODERS[type(value)](value)
    except KeyError:
        _ENCODERS[type(value)] = _encoder(type(value))
        return _ENCODERS[type(value)](value)


# The start-up path decodes every task, so it calls the converter's structure hooks
# directly instead of `codec.loads` (which copies the dict and dispatches on the tag): the
# same converter, the same stable tags, a few microseconds less per record.
_HOOKS = {"task": codec.converter.get_structure_hook(Task), "host": codec.converter.get_structure_hook(Host)}


def _decode_record(raw: bytes, tag: str, cls: type) -> Any:
    data = orjson.loads(raw)
    found = data.pop("type", None)
    if found != tag:
        raise ValueError(f"expected a {tag!r} record, found {found!r}")
    return _HOOKS[tag](data, cls)


def decode_task(raw: bytes) -> Task:
    return _decode_record(raw, "task", Task)


class TaskLoader:
    """Decodes the task records at start-up, structuring each distinct plan (and each
    distinct set of requirements) once.

    A backlog is mostly many tasks of a few plans, and structuring a plan is the larger
    part of decoding a task. Records are immutable, so tasks decoded from the same plan
    JSON can share one `Plan`. The Task structure function is generated from the one
    converter (`amc.codec`), with only those two fields routed through a cache. Keep a
    loader for one load: its caches grow with the distinct plans it saw.
    """

    def __init__(self) -> None:
        def shared(cls: type):
            structure = codec.converter.get_structure_hook(cls)
            cache: dict[bytes, Any] = {}

            def structure_shared(data, _):
                key = orjson.dumps(data)  # the same stored JSON gives the same record
                found = cache.get(key)
                if found is None:
                    found = cache[key] = structure(data, cls)
                return found

            return structure_shared

        self._structure = make_dict_structure_fn(
            Task,
            codec.converter,
            plan=override(struct_hook=shared(Plan)),
            requirements=override(struct_hook=shared(Requirements)),
        )

    def __call__(self, raw: bytes) -> Task:
        data = orjson.loads(raw)
        found = data.pop("type", None)
        if found != "task":
            raise ValueError(f"expected a 'task' record, found {found!r}")
        return self._structure(data, Task)


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
