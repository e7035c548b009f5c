"""`check`: does a PostgreSQL store agree with its own event log?

The same checks as the LMDB store's `verify` (amc/adapters/lmdb/verify.py; the replay and
the record comparisons are shared, amc/adapters/replay.py), in one REPEATABLE READ transaction, so it can run beside live servers: the log is gap-free from 1
and replays through `kernel.apply`; the task and host records equal the replayed state;
the columns beside each task record (id, tenant, status, lease expiry) and the history
links of the events agree with the records; the invariants hold; the stored clock is not
earlier than any event.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import psycopg

from amc.adapters import codec
from amc.adapters.postgres import store
from amc.adapters.postgres.schema import open_schema
from amc.adapters.postgres.writer import task_row
from amc.adapters.replay import Findings, Replayed, check_clock, compare_records, extend, replay
from amc.core.records import Task


def verify(url: str) -> list[str]:
    return check(url).differences


def check(url: str) -> Findings:
    with store.connect(url) as conn:
        open_schema(conn, readonly=True)
        with conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            return _check(conn, Findings(where=store.redact(url)))


def _check(conn: psycopg.Connection, report: Findings) -> Findings:
    out = report.differences
    with conn.cursor(name="amc_verify_log") as cursor:  # server-side: the log may be long
        cursor.execute("SELECT seq, body FROM amc_events ORDER BY seq")
        replayed = replay(cursor, codec.decode_event, report)
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
    compare_records(tasks, hosts, replayed, report)
    _compare_columns(conn, tasks, stored_rows, replayed, out)
    check_clock(store.meta_int(conn, "last_time") or 0, replayed, report)
    return report


def _compare_columns(
    conn: psycopg.Connection,
    tasks: dict[str, Task],
    stored_rows: dict[str, tuple[Any, ...]],
    replayed: Replayed,
    out: list[str],
) -> None:
    """The columns beside each task record, and the events' history links."""
    columns = []
    for task_id, task in tasks.items():
        expected = task_row(task)[:5]
        if stored_rows[task_id] != expected:
            columns.append(f"task {task_id}: its columns are {stored_rows[task_id]!r}, the record implies {expected!r}")
    extend(out, columns)
    stored_history: dict[str, list[int]] = defaultdict(list)
    seq_of = {task.seq: task.id for task in tasks.values()}
    for task_seq, seq in conn.execute("SELECT task_seq, seq FROM amc_events WHERE task_seq IS NOT NULL ORDER BY seq"):
        stored_history[seq_of.get(task_seq, f"at seq {task_seq}")].append(seq)
    history = replayed.history
    links = [
        f"history of {task_id}: the events link {stored_history.get(task_id)}, the log implies {history.get(task_id)}"
        for task_id in sorted(history.keys() | stored_history.keys())
        if history.get(task_id) != stored_history.get(task_id)
    ]
    extend(out, links)
