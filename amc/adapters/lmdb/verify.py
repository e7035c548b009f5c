"""`verify`: does a store agree with its own event log?

The records and indexes are derived data: the log is the truth. `check` replays the whole
log from empty through `kernel.apply` (amc/adapters/replay.py, shared with the PostgreSQL
store), then compares, in one read transaction (a consistent snapshot, so it can run beside
a live server):

- the log itself: sequence numbers 1..n without gaps, every entry decodes and applies;
- the task and host records with the replayed state, field by field;
- every index (task ids, listing, queue, leases, history) with what the records imply;
- the invariants of specs/design.md (`amc.core.invariants.violations`) on the replayed state;
- the clock: the stored latest time is not earlier than any event.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import lmdb

from amc.adapters.lmdb import layout
from amc.adapters.lmdb.store import Store
from amc.adapters.replay import Findings, Replayed, check_clock, compare_records, extend, replay, short
from amc.core.lifecycle import TaskStatus
from amc.core.records import Host, Task

Record = TypeVar("Record", Task, Host)


def verify(path: str | os.PathLike[str]) -> list[str]:
    """Every difference between the store's records and its replayed log, and every
    violated invariant, as readable sentences; empty when the store is consistent.

    Raises `NotAStore` or `SchemaMismatch` when `path` holds no readable store.
    """
    return check(path).differences


def check(path: str | os.PathLike[str]) -> Findings:
    """`verify`, with counts (for `amc store verify`)."""
    store = Store.open(path, readonly=True)
    try:
        with store.read() as txn:
            return _check(store, txn)
    finally:
        store.close()


def _check(store: Store, txn: lmdb.Transaction[bytes]) -> Findings:
    report = Findings(where=str(store.path))
    out = report.differences
    log = ((layout.read_u64(key), raw) for key, raw in txn.cursor(db=store.log))
    replayed = replay(log, layout.decode_event, report)

    tasks = _records(txn, store.tasks, layout.decode_task, "task", layout.task_key, layout.task_key_label, out)
    hosts = _records(txn, store.hosts, layout.decode_host, "host", _id_key, layout.id_key_label, out)
    compare_records(tasks, hosts, replayed, report)
    _compare_indexes(store, txn, tasks, replayed, out)

    raw = txn.get(layout.META_LAST_TIME, db=store.meta)
    check_clock(0 if raw is None else layout.read_u64(raw), replayed, report)
    return report


def _compare_indexes(
    store: Store, txn: lmdb.Transaction[bytes], tasks: dict[str, Task], replayed: Replayed, out: list[str]
) -> None:
    expected_ids = {t.id.encode(): layout.task_key(t) for t in tasks.values()}
    _compare_index("task_ids", expected_ids, dict(txn.cursor(db=store.task_ids)), out)
    expected_listing = {k: t.id.encode() for t in tasks.values() for k in layout.listing_keys(t)}
    expected_queue = {layout.queue_key(t): t.id.encode() for t in tasks.values() if t.status == TaskStatus.queued}
    expected_leases = dict(lease for t in tasks.values() if (lease := layout.lease_of(t)) is not None)
    _compare_index("listing", expected_listing, dict(txn.cursor(db=store.listing)), out)
    _compare_index("queue", expected_queue, dict(txn.cursor(db=store.queue)), out)
    _compare_index("leases", expected_leases, dict(txn.cursor(db=store.leases)), out)
    # History entries are keyed by the task's seq; they are compared, and named, by task id.
    task_of = {layout.task_key(t): t.id for t in (*replayed.state.tasks.values(), *tasks.values())}
    stored_history: dict[str, list[bytes]] = defaultdict(list)
    for key, value in txn.cursor(db=store.history):
        stored_history[task_of.get(key, layout.task_key_label(key))].append(value)
    expected_history = {task_id: [layout.u64(seq) for seq in seqs] for task_id, seqs in replayed.history.items()}
    _compare_index("history", expected_history, dict(stored_history), out)


def _records(
    txn: lmdb.Transaction[bytes],
    db: lmdb._Database,
    decode: Callable[[bytes], Record],
    kind: str,
    key_of: Callable[[Record], bytes],
    label: Callable[[bytes], str],
    out: list[str],
) -> dict[str, Record]:
    """The records of `db` by id; `key_of(record)` is the key it belongs under, and
    `label(key)` names a record that cannot be decoded."""
    found: dict[str, Record] = {}
    for key, raw in txn.cursor(db=db):
        try:
            record = decode(raw)
        except Exception as exc:
            out.append(f"{kind} {label(key)}: the record cannot be decoded: {exc}")
            continue
        if key_of(record) != key:
            out.append(
                f"{kind} {record.id}: the record is stored under the wrong key ({key!r}, not {key_of(record)!r})"
            )
        found[record.id] = record
    return found


def _id_key(record: Host) -> bytes:
    return record.id.encode()


def _compare_index(name: str, expected: Mapping[Any, Any], stored: Mapping[Any, Any], out: list[str]) -> None:
    found = []
    for key in sorted(expected.keys() | stored.keys()):
        want, have = expected.get(key), stored.get(key)
        if want == have:
            continue
        if have is None:
            found.append(f"index {name}: missing entry {key!r} -> {short(want)}")
        elif want is None:
            found.append(f"index {name}: stray entry {key!r} -> {short(have)}")
        else:
            found.append(f"index {name}: entry {key!r} is {short(have)}, the records imply {short(want)}")
    extend(out, found)
