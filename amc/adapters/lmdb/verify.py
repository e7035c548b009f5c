"""`verify`: does a store agree with its own event log?

The records and indexes are derived data: the log is the truth. `check` replays the whole
log from empty through `kernel.apply`, then compares, in one read transaction (a
consistent snapshot, so it can run beside a live server):

- the log itself: sequence numbers 1..n without gaps, every entry decodes and applies;
- the task and host records with the replayed state, field by field;
- every index (task ids, listing, queue, leases, history) with what the records imply;
- the invariants of specs/design.md (`amc.core.invariants.violations`) on the replayed state;
- the clock: the stored latest time is not earlier than any event.
"""

from __future__ import annotations

import os
from collections import defaultdict

import attrs
import lmdb

from amc.adapters.lmdb import layout
from amc.adapters.lmdb.store import Store
from amc.core import invariants, kernel
from amc.core.events import HostRegistered
from amc.core.history import HISTORY_TYPES
from amc.core.lifecycle import TaskStatus
from amc.core.state import State

_SHOWN = 8  # differences listed per kind before summarising the rest


@attrs.define
class Findings:
    """What `check` found: `differences` is empty when the store is consistent."""

    path: str
    events: int = 0
    tasks: int = 0
    hosts: int = 0
    differences: list[str] = attrs.field(factory=list)

    @property
    def ok(self) -> bool:
        return not self.differences


def verify(path: str | os.PathLike) -> list[str]:
    """Every difference between the store's records and its replayed log, and every
    violated invariant, as readable sentences; empty when the store is consistent.

    Raises `NotAStore` or `SchemaMismatch` when `path` holds no readable store.
    """
    return check(path).differences


def check(path: str | os.PathLike) -> Findings:
    """`verify`, with counts (for `amc store verify`)."""
    store = Store.open(path, readonly=True)
    try:
        with store.read() as txn:
            return _check(store, txn)
    finally:
        store.close()


def _check(store: Store, txn: lmdb.Transaction[bytes]) -> Findings:
    report = Findings(path=str(store.path))
    out = report.differences
    replayed, history, last_at = _replay(store, txn, report)

    tasks = _records(txn, store.tasks, layout.decode_task, "task", layout.task_key, layout.task_key_label, out)
    hosts = _records(txn, store.hosts, layout.decode_host, "host", _id_key, layout.id_key_label, out)
    report.tasks, report.hosts = len(tasks), len(hosts)
    _compare("task", tasks, replayed.tasks, out)
    _compare("host", hosts, replayed.hosts, out)

    expected_ids = {t.id.encode(): layout.task_key(t) for t in tasks.values()}
    _compare_index("task_ids", expected_ids, dict(txn.cursor(db=store.task_ids)), out)
    expected_listing = {k: t.id.encode() for t in tasks.values() for k in layout.listing_keys(t)}
    expected_queue = {layout.queue_key(t): t.id.encode() for t in tasks.values() if t.status == TaskStatus.queued}
    expected_leases = dict(lease for t in tasks.values() if (lease := layout.lease_of(t)) is not None)
    _compare_index("listing", expected_listing, dict(txn.cursor(db=store.listing)), out)
    _compare_index("queue", expected_queue, dict(txn.cursor(db=store.queue)), out)
    _compare_index("leases", expected_leases, dict(txn.cursor(db=store.leases)), out)
    # History entries are keyed by the task's seq; they are compared, and named, by task id.
    task_of = {layout.task_key(t): t.id for t in (*replayed.tasks.values(), *tasks.values())}
    stored_history: dict[str, list[bytes]] = defaultdict(list)
    for key, value in txn.cursor(db=store.history):
        stored_history[task_of.get(key, layout.task_key_label(key))].append(value)
    expected_history = {task_id: [layout.u64(seq) for seq in seqs] for task_id, seqs in history.items()}
    _compare_index("history", expected_history, dict(stored_history), out)

    out.extend(f"invariant (replayed log): {v}" for v in invariants.violations(replayed))
    if tasks != replayed.tasks or hosts != replayed.hosts:
        records_state = State.from_records(tasks.values(), hosts.values())
        out.extend(f"invariant (records): {v}" for v in invariants.violations(records_state))

    raw = txn.get(layout.META_LAST_TIME, db=store.meta)
    stored_time = 0 if raw is None else layout.read_u64(raw)
    if last_at > stored_time:
        out.append(f"clock: the latest recorded time {stored_time} is earlier than the event at {last_at}")
    return report


def _replay(store: Store, txn: lmdb.Transaction[bytes], report: Findings):
    out = report.differences
    state = State()
    history: dict[str, list[int]] = defaultdict(list)
    expected, last_at, broken = 1, 0, False
    for key, raw in txn.cursor(db=store.log):
        seq = layout.read_u64(key)
        report.events += 1
        if seq != expected:
            out.append(f"log: entry {seq} follows entry {expected - 1}; entries {expected}..{seq - 1} are missing")
            expected = seq
        expected += 1
        if broken:
            continue
        try:
            event = layout.decode_event(raw)
        except Exception as exc:
            out.append(f"log: entry {seq} cannot be decoded: {exc}")
            broken = True  # later events would be applied to a state that missed this one
            continue
        try:
            kernel.apply(state, event)
        except Exception as exc:
            out.append(f"log: entry {seq} ({type(event).__name__}) does not apply to the replayed state: {exc!r}")
            broken = True
            continue
        last_at = max(last_at, event.at)
        if type(event) in HISTORY_TYPES and not isinstance(event, HostRegistered):  # no history shows a host event
            history[event.task_id].append(seq)
    if broken:
        out.append("log: replay stopped at the first broken entry; the comparisons below are against a prefix")
    return state, history, last_at


def _records(txn, db, decode, kind: str, key_of, label, out: list[str]) -> dict:
    """The records of `db` by id; `key_of(record)` is the key it belongs under, and
    `label(key)` names a record that cannot be decoded."""
    found = {}
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


def _id_key(record) -> bytes:
    return record.id.encode()


def _compare(kind: str, records: dict, replayed: dict, out: list[str]) -> None:
    found = []
    for key in sorted(records.keys() | replayed.keys()):
        mine, theirs = records.get(key), replayed.get(key)
        if theirs is None:
            found.append(f"{kind} {key}: in the records but not in the replayed log")
        elif mine is None:
            found.append(f"{kind} {key}: in the replayed log but missing from the records")
        elif mine != theirs:
            for name in layout.fields_differing(mine, theirs):
                found.append(
                    f"{kind} {key}: {name} is {_short(getattr(mine, name))} in the records, "
                    f"{_short(getattr(theirs, name))} in the replayed log"
                )
    _extend(out, found)


def _compare_index(name: str, expected: dict, stored: dict, out: list[str]) -> None:
    found = []
    for key in sorted(expected.keys() | stored.keys()):
        want, have = expected.get(key), stored.get(key)
        if want == have:
            continue
        if have is None:
            found.append(f"index {name}: missing entry {key!r} -> {_short(want)}")
        elif want is None:
            found.append(f"index {name}: stray entry {key!r} -> {_short(have)}")
        else:
            found.append(f"index {name}: entry {key!r} is {_short(have)}, the records imply {_short(want)}")
    _extend(out, found)


def _extend(out: list[str], found: list[str]) -> None:
    out.extend(found[:_SHOWN])
    if len(found) > _SHOWN:
        out.append(f"... and {len(found) - _SHOWN} more like these")


def _short(value, limit: int = 160) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
