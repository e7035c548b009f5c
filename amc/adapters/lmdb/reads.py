"""Reads: answered from LMDB read transactions, never from the writer's state.

A read transaction sees exactly what was committed when it began, so a read never shows
a change whose batch is still being written, and it never waits for the writer (LMDB
readers take no lock that a writer holds). Every read is a key lookup or a range over
an index; none scans the tasks.
"""

from __future__ import annotations

from collections.abc import Iterator

import lmdb

from amc.adapters.lmdb import layout
from amc.adapters.lmdb.store import Store, read_host, read_task, task_seq_key
from amc.core.history import history_data, history_type
from amc.core.lifecycle import TaskStatus
from amc.core.records import Host, Task
from amc.service import port
from amc.service.port import HistoryEntry, Page, TaskQuery


def _indexed(txn: lmdb.Transaction[bytes], key: bytes, db: lmdb._Database) -> bytes:
    """The record an index entry points at, which the writer stores in the same transaction."""
    value = txn.get(key, db=db)
    assert value is not None, f"an index entry points at a missing record {key!r}"
    return value


def task(store: Store, txn: lmdb.Transaction[bytes], task_id: str) -> Task | None:
    return read_task(txn, store, task_id)


def tasks(store: Store, txn: lmdb.Transaction[bytes], query: TaskQuery) -> Page:
    """A page of tasks by `seq`, oldest or newest first, from the listing index of one scope;
    with a `label`, only the tasks that have it, examining at most `port.LABEL_SCAN_LIMIT` of them."""
    tenant, status, after = query.tenant, query.status, query.after
    start_seq = layout.parse_cursor(after)  # oldest first: the first seq shown; newest first: one past the last
    too_long = (tenant is not None and len(tenant.encode()) > layout.MAX_ID_BYTES) or (
        status is not None and len(status.encode()) > 64
    )
    if too_long:
        return Page([], None)  # nothing that long was ever stored (nor could be keyed)
    prefix = layout.listing_prefix(tenant, status)
    keys = (
        _newest_first(txn, store, prefix, start_seq - 1 if after else None)
        if query.newest_first
        else _oldest_first(txn, store, prefix, start_seq)
    )
    found: list[Task] = []
    examined = 0
    for key in keys:
        if len(found) == query.limit:  # one beyond the page exists: the page gets a cursor
            return Page(found, layout.cursor_of(found[-1]))
        seq_key = key[-8:]  # a listing key ends with the task's seq: its record's key
        if query.label is None:
            found.append(layout.decode_task(_indexed(txn, seq_key, store.tasks)))
            continue
        if examined == port.LABEL_SCAN_LIMIT:  # stop here; the next page starts with this task
            seq = int.from_bytes(seq_key, "big")
            return Page(found, str(seq + 1 if query.newest_first else seq - 1))
        examined += 1
        task = layout.decode_task(_indexed(txn, seq_key, store.tasks))
        if query.label_matches(task):
            found.append(task)
    return Page(found, None)


def status_counts(store: Store, txn: lmdb.Transaction[bytes]) -> dict[str, int]:
    """How many tasks have each status, for a metrics scrape: a walk over the keys of each
    status's all-tenant listing scope, which reads no record."""
    counts: dict[str, int] = {}
    cursor = txn.cursor(db=store.listing)
    for status in TaskStatus:
        prefix = layout.listing_prefix(None, status)
        found = 0
        if cursor.set_range(prefix):
            for key in cursor.iternext(values=False):
                if not key.startswith(prefix):
                    break
                found += 1
        if found:
            counts[status] = found
    return counts


def _oldest_first(txn: lmdb.Transaction[bytes], store: Store, prefix: bytes, start_seq: int) -> Iterator[bytes]:
    """The listing keys of `prefix` from `start_seq` on, in ascending seq."""
    cursor = txn.cursor(db=store.listing)
    if cursor.set_range(prefix + layout.u64(start_seq)):
        for key in cursor.iternext(values=False):
            if not key.startswith(prefix):
                return
            yield key


def _newest_first(txn: lmdb.Transaction[bytes], store: Store, prefix: bytes, below: int | None) -> Iterator[bytes]:
    """The listing keys of `prefix` with a seq below `below` (None: all), in descending seq."""
    cursor = txn.cursor(db=store.listing)
    bound = prefix + (layout.u64(below) if below is not None else b"\xff" * 9)
    # Stand on the first key at or past the bound, then step back: the last key below it.
    positioned = cursor.prev() if cursor.set_range(bound) else cursor.last()
    if not positioned:
        return
    for key in cursor.iterprev(values=False):
        if not key.startswith(prefix):
            return
        yield key


def history(store: Store, txn: lmdb.Transaction[bytes], task_id: str) -> list[HistoryEntry]:
    """The task's history entries, numbered from 1, from its entries in the history index."""
    key = task_seq_key(txn, store, task_id)
    if key is None:
        return []
    cursor = txn.cursor(db=store.history)
    if not cursor.set_key(key):
        return []
    entries = []
    for number, log_key in enumerate(cursor.iternext_dup(), start=1):
        event = layout.decode_event(_indexed(txn, log_key, store.log))
        shown = history_type(event)
        assert shown is not None, "the history index lists only events a history shows"
        entries.append(HistoryEntry(seq=number, at=event.at, type=shown, data=history_data(event)))
    return entries


def host(store: Store, txn: lmdb.Transaction[bytes], host_id: str) -> Host | None:
    return read_host(txn, store, host_id)


def hosts(store: Store, txn: lmdb.Transaction[bytes]) -> list[Host]:
    """Every host, by id (UTF-8 byte order is code point order, as `sorted` gives)."""
    return [layout.decode_host(raw) for _, raw in txn.cursor(db=store.hosts)]


def next_expiry(store: Store, txn: lmdb.Transaction[bytes]) -> int | None:
    cursor = txn.cursor(db=store.leases)
    return layout.lease_expiry(cursor.key()) if cursor.first() else None
