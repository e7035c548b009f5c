"""Checking a store against its own event log, whichever store holds it.

The log is the truth; the records (and any index or column beside them) are derived. Each
store's `verify` (amc/adapters/lmdb/verify.py, amc/adapters/postgres/verify.py) reads its own
store in one consistent snapshot and checks its own indexes or columns; what they share is
here: replaying the log from empty through `kernel.apply`, comparing the records with the
replayed state field by field, the invariants, and the clock. Findings are readable
sentences, a few per kind before the rest are counted.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import attrs

from amc.core import invariants, kernel
from amc.core.events import Event, HostRegistered
from amc.core.history import HISTORY_TYPES
from amc.core.records import Host, Task
from amc.core.state import State

SHOWN = 8  # differences listed per kind before summarising the rest
Record = TypeVar("Record", Task, Host)


@attrs.define
class Findings:
    """What a `check` found: `differences` is empty when the store is consistent."""

    where: str
    events: int = 0
    tasks: int = 0
    hosts: int = 0
    differences: list[str] = attrs.field(factory=list)

    @property
    def ok(self) -> bool:
        return not self.differences


@attrs.define
class Replayed:
    """The state the log replays to, each task's history (its events' sequence numbers), and
    the latest time any event carries."""

    state: State = attrs.field(factory=State)
    history: dict[str, list[int]] = attrs.field(factory=lambda: defaultdict(list))
    last_at: int = 0


def replay(log: Iterable[tuple[int, bytes]], decode: Callable[[bytes], Event], report: Findings) -> Replayed:
    """Replay `log`, (sequence number, encoded event) in order: gaps are reported, and the
    replay stops at the first entry that does not decode or apply (later ones would be
    applied to a state that missed it)."""
    out, replayed = report.differences, Replayed()
    expected, broken = 1, False
    for seq, raw in log:
        report.events += 1
        if seq != expected:
            out.append(f"log: entry {seq} follows entry {expected - 1}; entries {expected}..{seq - 1} are missing")
            expected = seq
        expected += 1
        if broken:
            continue
        try:
            event = decode(raw)
        except Exception as exc:
            out.append(f"log: entry {seq} cannot be decoded: {exc}")
            broken = True
            continue
        try:
            kernel.apply(replayed.state, event)
        except Exception as exc:
            out.append(f"log: entry {seq} ({type(event).__name__}) does not apply to the replayed state: {exc!r}")
            broken = True
            continue
        replayed.last_at = max(replayed.last_at, event.at)
        if type(event) in HISTORY_TYPES and not isinstance(event, HostRegistered):  # no history shows a host event
            replayed.history[event.task_id].append(seq)
    if broken:
        out.append("log: replay stopped at the first broken entry; the comparisons below are against a prefix")
    return replayed


def compare_records(tasks: dict[str, Task], hosts: dict[str, Host], replayed: Replayed, report: Findings) -> None:
    """The stored records against the replayed ones, then the invariants on both."""
    out = report.differences
    report.tasks, report.hosts = len(tasks), len(hosts)
    _compare("task", tasks, replayed.state.tasks, out)
    _compare("host", hosts, replayed.state.hosts, out)
    out.extend(f"invariant (replayed log): {v}" for v in invariants.violations(replayed.state))
    if tasks != replayed.state.tasks or hosts != replayed.state.hosts:
        records = State.from_records(tasks.values(), hosts.values())
        out.extend(f"invariant (records): {v}" for v in invariants.violations(records))


def check_clock(stored_time: int, replayed: Replayed, report: Findings) -> None:
    if replayed.last_at > stored_time:
        report.differences.append(
            f"clock: the latest recorded time {stored_time} is earlier than the event at {replayed.last_at}"
        )


def _compare(kind: str, records: Mapping[str, Record], replayed: Mapping[str, Record], out: list[str]) -> None:
    found = []
    for key in sorted(records.keys() | replayed.keys()):
        mine, theirs = records.get(key), replayed.get(key)
        if theirs is None:
            found.append(f"{kind} {key}: in the records but not in the replayed log")
        elif mine is None:
            found.append(f"{kind} {key}: in the replayed log but missing from the records")
        elif mine != theirs:
            for field in attrs.fields(type(mine)):
                if getattr(mine, field.name) != getattr(theirs, field.name):
                    found.append(
                        f"{kind} {key}: {field.name} is {short(getattr(mine, field.name))} in the records, "
                        f"{short(getattr(theirs, field.name))} in the replayed log"
                    )
    extend(out, found)


def extend(out: list[str], found: list[str]) -> None:
    """Add `found` to `out`, the first `SHOWN` of them and a count of the rest."""
    out.extend(found[:SHOWN])
    if len(found) > SHOWN:
        out.append(f"... and {len(found) - SHOWN} more like these")


def short(value: Any, limit: int = 160) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
