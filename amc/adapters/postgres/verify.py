"""`check`: does a PostgreSQL store agree with its own event log?

The same checks as the LMDB store's `verify` (amc/adapters/lmdb/verify.py), in one
REPEATABLE READ transaction, so it can run beside live servers: the log is gap-free from 1
and replays through `kernel.apply`; the task and host records equal the replayed state;
the columns beside each task record (id, tenant, status, lease expiry) and the history
links of the events agree with the records; the invariants hold; the stored clock is not
earlier than any event.
"""

from __future__ import annotations

from collections import defaultdict

import attrs
import psycopg

from amc.adapters import codec
from amc.adapters.postgres import store
from amc.adapters.postgres.schema import open_schema
from amc.adapters.postgres.writer import task_row
from amc.core import invariants, kernel
from amc.core.events import HostRegistered
from amc.core.history import HISTORY_TYPES
from amc.core.state import State

_SHOWN = 8


@attrs.define
class Findings:
    where: str
    events: int = 0
    tasks: int = 0
    hosts: int = 0
    blobs: int = 0
    differences: list[str] = attrs.field(factory=list)

    @property
    def ok(self) -> bool:
        return not self.differences


def check(url: str) -> Findings:
    with store.connect(url) as conn:
        open_schema(conn, readonly=True)
        with conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            return _check(conn, Findings(where=store.redact(url)))


def _check(conn: psycopg.Connection, report: Findings) -> Findings:
    out = report.differences
    replayed, history, last_at = _replay(conn, report)
    tasks, stored_rows = {}, {}
    for row in conn.execute("SELECT seq, id, tenant, status, lease_expires_at, body FROM amc_tasks ORDER BY seq"):
        try:
            task = codec.decode_task(row[5])
        except Exception as exc:
            out.append(f"task at seq {row[0]}: the record cannot be decoded: {exc}")
            continue
        tasks[task.id] = task
        stored_rows[task.id] = tuple(row[:5])
    hosts = {}
    for host_id, body in conn.execute("SELECT id, body FROM amc_hosts"):
        try:
            hosts[host_id] = codec.decode_host(body)
        except Exception as exc:
            out.append(f"host {host_id}: the record cannot be decoded: {exc}")
    report.tasks, report.hosts = len(tasks), len(hosts)
    _compare("task", tasks, replayed.tasks, out)
    _compare("host", hosts, replayed.hosts, out)
    columns = []
    for task_id, task in tasks.items():
        expected = task_row(task)[:5]
        if stored_rows[task_id] != expected:
            columns.append(f"task {task_id}: its columns are {stored_rows[task_id]!r}, the record implies {expected!r}")
    _extend(out, columns)
    stored_history: dict[str, list[int]] = defaultdict(list)
    seq_of = {task.seq: task.id for task in tasks.values()}
    for task_seq, seq in conn.execute("SELECT task_seq, seq FROM amc_events WHERE task_seq IS NOT NULL ORDER BY seq"):
        stored_history[seq_of.get(task_seq, f"at seq {task_seq}")].append(seq)
    links = [
        f"history of {task_id}: the events link {stored_history.get(task_id)}, the log implies {history.get(task_id)}"
        for task_id in sorted(history.keys() | stored_history.keys())
        if history.get(task_id) != stored_history.get(task_id)
    ]
    _extend(out, links)
    out.extend(f"invariant (replayed log): {v}" for v in invariants.violations(replayed))
    if tasks != replayed.tasks or hosts != replayed.hosts:
        out.extend(
            f"invariant (records): {v}"
            for v in invariants.violations(State.from_records(tasks.values(), hosts.values()))
        )
    stored_time = store.meta_int(conn, "last_time") or 0
    if last_at > stored_time:
        out.append(f"clock: the latest recorded time {stored_time} is earlier than the event at {last_at}")
    counted = conn.execute("SELECT count(*) FROM amc_blobs").fetchone()
    report.blobs = int(counted[0]) if counted else 0
    return report


def _replay(conn: psycopg.Connection, report: Findings):
    out = report.differences
    state = State()
    history: dict[str, list[int]] = defaultdict(list)
    expected, last_at, broken = 1, 0, False
    with conn.cursor(name="amc_verify_log") as cursor:  # server-side: the log may be long
        cursor.execute("SELECT seq, body FROM amc_events ORDER BY seq")
        for seq, body in cursor:
            report.events += 1
            if seq != expected:
                out.append(f"log: entry {seq} follows entry {expected - 1}; entries {expected}..{seq - 1} are missing")
                expected = seq
            expected += 1
            if broken:
                continue
            try:
                event = codec.decode_event(body)
                kernel.apply(state, event)
            except Exception as exc:
                out.append(f"log: entry {seq} cannot be decoded or applied: {exc!r}")
                broken = True
                continue
            last_at = max(last_at, event.at)
            if type(event) in HISTORY_TYPES and not isinstance(event, HostRegistered):
                history[event.task_id].append(seq)
    if broken:
        out.append("log: replay stopped at the first broken entry; the comparisons below are against a prefix")
    return state, history, last_at


def _compare(kind: str, records: dict, replayed: dict, out: list[str]) -> None:
    found = []
    for key in sorted(records.keys() | replayed.keys()):
        mine, theirs = records.get(key), replayed.get(key)
        if theirs is None:
            found.append(f"{kind} {key}: in the records but not in the replayed log")
        elif mine is None:
            found.append(f"{kind} {key}: in the replayed log but missing from the records")
        elif mine != theirs:
            differing = [f.name for f in attrs.fields(type(mine)) if getattr(mine, f.name) != getattr(theirs, f.name)]
            found.append(f"{kind} {key}: {', '.join(differing)} differ between the records and the replayed log")
    _extend(out, found)


def _extend(out: list[str], found: list[str]) -> None:
    out.extend(found[:_SHOWN])
    if len(found) > _SHOWN:
        out.append(f"... and {len(found) - _SHOWN} more like these")


def verify(url: str) -> list[str]:
    return check(url).differences
