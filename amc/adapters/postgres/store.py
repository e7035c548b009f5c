"""Connections to the database, and everything the store reads from it.

Reads are answered from the database through a small pool of autocommit connections (each
statement its own snapshot of what was committed), never from the writer's in-memory
state, exactly as the LMDB store reads from LMDB: a read never shows a change whose batch
has not committed. Every read is an index lookup or an index range; none scans the tasks.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
from psycopg_pool import ConnectionPool

from amc.adapters import codec
from amc.adapters.errors import NotAStore
from amc.core.errors import InvalidRequest
from amc.core.history import history_data, history_type
from amc.core.records import Host, Task
from amc.core.state import State
from amc.service import port
from amc.service.port import HistoryEntry, Page, TaskQuery

Record = TypeVar("Record", Task, Host)

# Server-side settings of every connection: keep a session alive across a quiet network
# (TCP keepalives find a dead peer in about 10 s) and give up a statement that hangs.
CONNECT_OPTIONS: dict[str, Any] = {
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 1,
    "keepalives_count": 5,
    "connect_timeout": 5,
}
MAX_ID_BYTES = 255  # as the LMDB store: the ids of every store fit either
READ_POOL_SIZE = 4


def connect(url: str, application_name: str = "amc", **options: Any) -> psycopg.Connection:
    """One connection to the store's database; `options` are session settings (`SET`).
    `application_name` shows in pg_stat_activity which server (and which part of it) this is."""
    try:
        conn = psycopg.connect(url, autocommit=True, application_name=application_name, **CONNECT_OPTIONS)
    except psycopg.Error as exc:
        raise NotAStore(f"cannot connect to {redact(url)}: {exc}") from None
    for name, value in options.items():
        conn.execute(f"SET {name} = {value}")  # names and values are ours, never a caller's
    return conn


def autocommit_pool(url: str, size: int, name: str) -> ConnectionPool:
    """A pool of autocommit connections that opens them as they are needed (the blob store's
    and the input catalogue's: neither needs a connection before its first request)."""
    pool = ConnectionPool(
        url, min_size=0, max_size=size, kwargs={"autocommit": True, **CONNECT_OPTIONS}, open=False, name=name
    )
    pool.open(wait=False)
    return pool


def read_pool(url: str, size: int = READ_POOL_SIZE, application_name: str = "amc") -> ConnectionPool:
    pool = ConnectionPool(
        url,
        min_size=1,
        max_size=size,
        kwargs={"autocommit": True, "application_name": application_name, **CONNECT_OPTIONS},
        open=False,
        name="amc-reads",
    )
    pool.open(wait=True, timeout=10)
    return pool


def redact(url: str) -> str:
    """The URL without its password, for messages."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "the database URL"
    info.pop("password", None)
    return " ".join(f"{key}={value}" for key, value in sorted(info.items()))


def check_id(what: str, identifier: str) -> None:
    if not 0 < len(identifier.encode()) <= MAX_ID_BYTES or "\x00" in identifier:
        raise InvalidRequest(f"{what}: must be 1 to {MAX_ID_BYTES} bytes of UTF-8 without NUL")


# --- loading ----------------------------------------------------------------------------


def load_state(conn: psycopg.Connection) -> State:
    """The kernel state, rebuilt from the task and host records (not from the log), as the
    LMDB store's start-up does; `conn` should be in a transaction that sees one snapshot."""
    was_enabled = gc.isenabled()
    gc.disable()  # see the LMDB store's load_state: no cycles, and twice as fast without
    try:
        loader = codec.TaskLoader()
        tasks = [_decoded(loader, body, "task", seq) for seq, body in conn.execute("SELECT seq, body FROM amc_tasks")]
        hosts = [
            _decoded(codec.decode_host, body, "host", hid)
            for hid, body in conn.execute("SELECT id, body FROM amc_hosts")
        ]
        return State.from_records(tasks, hosts)
    finally:
        if was_enabled:
            gc.enable()


def _decoded(decode: Callable[[bytes], Record], body: bytes, kind: str, key: object) -> Record:
    try:
        return decode(body)
    except Exception as exc:
        raise NotAStore(f"the {kind} {key} cannot be decoded ({exc}); run `amc store verify`") from None


def meta_int(conn: psycopg.Connection, key: str) -> int | None:
    row = conn.execute("SELECT value FROM amc_meta WHERE key = %s", (key,)).fetchone()
    return None if row is None else int(row[0])


def last_seq(conn: psycopg.Connection) -> int:
    row = conn.execute("SELECT coalesce(max(seq), 0) FROM amc_events").fetchone()
    assert row is not None
    return int(row[0])


# --- reads --------------------------------------------------------------------------------


def _storable(text: str | None) -> bool:
    """Whether any record could hold `text` (PostgreSQL text cannot hold NUL; see check_id)."""
    return text is None or "\x00" not in text


def task(conn: psycopg.Connection, task_id: str) -> Task | None:
    if not _storable(task_id):
        return None
    row = conn.execute("SELECT body FROM amc_tasks WHERE id = %s", (task_id,)).fetchone()
    return None if row is None else codec.decode_task(row[0])


def tasks(conn: psycopg.Connection, query: TaskQuery) -> Page:
    """A page of tasks by `seq`, oldest or newest first; the cursor is the seq of the page's
    last task. With a `label`, only the tasks that have it, examining at most
    `port.LABEL_SCAN_LIMIT` of them (the same rule and cursors as the other stores)."""
    start = _parse_cursor(query.after)  # oldest first: the first seq shown; newest first: one past the last
    if not (_storable(query.tenant) and _storable(query.status)):
        return Page([], None)  # nothing like that was ever stored
    where: list[str] = []
    params: list[object] = []
    if query.newest_first and query.after is not None:
        where.append("seq < %s")
        params.append(start - 1)
    elif not query.newest_first:
        where.append("seq >= %s")
        params.append(start)
    if query.tenant is not None:
        where.append("tenant = %s")
        params.append(query.tenant)
    if query.status is not None:
        where.append("status = %s")
        params.append(query.status)
    scan_limit = port.LABEL_SCAN_LIMIT
    rows_needed = query.limit + 1 if query.label is None else max(query.limit, scan_limit) + 1
    sql = (
        f"SELECT seq, body FROM amc_tasks WHERE {' AND '.join(where) or 'true'} "
        f"ORDER BY seq {'DESC' if query.newest_first else 'ASC'} LIMIT %s"
    )
    found: list[Task] = []
    examined = 0
    for seq, body in conn.execute(sql.encode(), [*params, rows_needed]):
        if len(found) == query.limit:  # one beyond the page exists: the page gets a cursor
            return Page(found, str(found[-1].seq))
        if query.label is not None:
            if examined == scan_limit:  # stop here; the next page starts with this task
                return Page(found, str(seq + 1 if query.newest_first else seq - 1))
            examined += 1
        task = codec.decode_task(body)
        if query.label_matches(task):
            found.append(task)
    return Page(found, None)


def status_counts(conn: psycopg.Connection) -> dict[str, int]:
    return {
        status: int(count) for status, count in conn.execute("SELECT status, count(*) FROM amc_tasks GROUP BY status")
    }


def _parse_cursor(after: str | None) -> int:
    if after is None:
        return 0
    if not isinstance(after, str) or not (after.isascii() and after.isdecimal() and len(after) <= 18):
        raise InvalidRequest("after: not a cursor this server returned in `next`")
    return int(after) + 1


def history(conn: psycopg.Connection, task_id: str) -> list[HistoryEntry]:
    if not _storable(task_id):
        return []
    rows = conn.execute(
        "SELECT e.body FROM amc_events e JOIN amc_tasks t ON e.task_seq = t.seq WHERE t.id = %s ORDER BY e.seq",
        (task_id,),
    ).fetchall()
    entries = []
    for number, (body,) in enumerate(rows, start=1):
        event = codec.decode_event(body)
        shown = history_type(event)
        assert shown is not None, "only events a history shows name a task_seq"
        entries.append(HistoryEntry(seq=number, at=event.at, type=shown, data=history_data(event)))
    return entries


def host(conn: psycopg.Connection, host_id: str) -> Host | None:
    if not _storable(host_id):
        return None
    row = conn.execute("SELECT body FROM amc_hosts WHERE id = %s", (host_id,)).fetchone()
    return None if row is None else codec.decode_host(row[0])


def hosts(conn: psycopg.Connection) -> list[Host]:
    """Every host, by id in code point order (the column's "C" collation), as the LMDB store."""
    return [codec.decode_host(body) for (body,) in conn.execute("SELECT body FROM amc_hosts ORDER BY id")]


# --- what `amc store info` shows -----------------------------------------------------------


def summary(conn: psycopg.Connection) -> dict[str, Any]:
    """Counts, versions, the leadership and the clock, from one statement each."""
    counted = conn.execute(
        "SELECT (SELECT count(*) FROM amc_events), (SELECT count(*) FROM amc_tasks),"
        " (SELECT count(*) FROM amc_tasks WHERE status = 'queued'),"
        " (SELECT count(*) FROM amc_tasks WHERE lease_expires_at IS NOT NULL),"
        " (SELECT count(*) FROM amc_hosts), (SELECT count(*) FROM amc_blobs),"
        " (SELECT coalesce(sum(size), 0) FROM amc_blobs), pg_database_size(current_database())"
    ).fetchone()
    assert counted is not None
    events, tasks_, queued, leased, hosts_, blobs, blob_bytes, size = (int(v) for v in counted)
    leadership = conn.execute("SELECT epoch, leader, elected_at FROM amc_leadership WHERE id = 1").fetchone()
    meta: dict[str, str] = dict(conn.execute("SELECT key, value FROM amc_meta").fetchall())
    return {
        "events": events,
        "tasks": tasks_,
        "queued": queued,
        "leased": leased,
        "hosts": hosts_,
        "blobs": blobs,
        "blob_bytes": blob_bytes,
        "database_bytes": size,
        "epoch": leadership[0] if leadership else None,
        "leader": leadership[1] if leadership else None,
        "elected_at": leadership[2] if leadership else None,
        "meta": meta,
    }
