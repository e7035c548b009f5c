"""Reads: answered from LMDB read transactions, never from the writer's state.

A read transaction sees exactly what was committed when it began, so a read never shows
a change whose batch is still being written, and it never waits for the writer (LMDB
readers take no lock that a writer holds). Every read is a key lookup or a range over
an index; none scans the tasks.
"""

from __future__ import annotations

import lmdb

from amc.adapters.lmdb import layout
from amc.adapters.lmdb.store import Store, read_host, read_task, task_seq_key
from amc.core.errors import InvalidRequest
from amc.core.history import history_data, history_type
from amc.core.records import Host, Task
from amc.service import HistoryEntry, Page


def _indexed(txn: lmdb.Transaction[bytes], key: bytes, db: lmdb._Database) -> bytes:
    """The record an index entry points at, which the writer stores in the same transaction."""
    value = txn.get(key, db=db)
    assert value is not None, f"an index entry points at a missing record {key!r}"
    return value


def task(store: Store, txn: lmdb.Transaction[bytes], task_id: str) -> Task | None:
    return read_task(txn, store, task_id)


def tasks(
    store: Store, txn: lmdb.Transaction[bytes], tenant: str | None, status: str | None, after: str | None, limit: int
) -> Page:
    """A page of tasks, oldest first (by `seq`), from the listing index of one scope."""
    if limit < 1:
        raise InvalidRequest("limit: must be at least 1")
    start_seq = layout.parse_cursor(after)
    too_long = (tenant is not None and len(tenant.encode()) > layout.MAX_ID_BYTES) or (
        status is not None and len(status.encode()) > 64
    )
    if too_long:
        return Page([], None)  # nothing that long was ever stored (nor could be keyed)
    prefix = layout.listing_prefix(tenant, status)
    start = prefix + layout.u64(start_seq)
    cursor = txn.cursor(db=store.listing)
    seq_keys: list[bytes] = []
    more = False
    if cursor.set_range(start):
        for key in cursor.iternext(values=False):
            if not key.startswith(prefix):
                break
            if len(seq_keys) == limit:
                more = True  # one beyond the page exists: the page gets a cursor
                break
            seq_keys.append(key[-8:])  # a listing key ends with the task's seq: its record's key
    found = [layout.decode_task(_indexed(txn, key, store.tasks)) for key in seq_keys]
    return Page(found, layout.cursor_of(found[-1]) if more else None)


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
