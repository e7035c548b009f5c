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

Values are the JSON of `amc.adapters.codec` (one cattrs converter, stable tags), so renaming a
Python class never breaks a stored record; the hooks of the records are generated there
from the `attrs` declarations. A field added to a record changes the stored JSON: bump
`SCHEMA_VERSION` with it, add the step that brings older stores forward to `upgrade.py`
and the field to its `STORED_FIELDS` (a test fails, naming the field, until then). A
defaulted field is filled when an older record is read, but an older amc would refuse
the new key. The tasks, hosts and the indexes are derived from the log:
`amc store verify` replays the log and checks that they agree.
"""

from __future__ import annotations

import functools
import re
import struct

from amc.adapters import codec

# The values' encoding is shared with every store (`amc.adapters.codec`); re-exported here,
# where the LMDB code has always found it.
from amc.adapters.codec import TaskLoader as TaskLoader
from amc.adapters.codec import decode_event as decode_event
from amc.adapters.codec import decode_host as decode_host
from amc.adapters.codec import decode_task as decode_task
from amc.adapters.codec import encode as encode
from amc.adapters.codec import encode_host as encode_host
from amc.adapters.codec import encode_task as encode_task
from amc.core.errors import InvalidRequest
from amc.core.records import Task

# The store's version: its records' (the codec's), since this layout's keys have stood still
# from schema 2 on; a change of the keys below needs a version past both (see upgrade.py).
SCHEMA_VERSION = codec.RECORD_SCHEMA
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
    value: int = U64.unpack(raw)[0]
    return value


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
        listing_prefix(tenant, status) + seq for tenant in (None, task.tenant) for status in (None, task.status)
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
