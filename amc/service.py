"""The service layer: the port between the edges (HTTP, CLI, embedders) and a store.

A `Service` runs commands through the kernel one at a time, makes their events durable
(or not, for `MemoryService`), and answers reads. Edges build commands with ``now=0``:
the service stamps each command with its clock when the command's turn comes, so the
times in a store's log never go backwards, whatever order callers raced in.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from typing import Protocol

import attrs

from amc.core import kernel
from amc.core.commands import Command, ExpireLeases
from amc.core.errors import InvalidRequest
from amc.core.events import Event, HostRegistered, TaskSubmitted
from amc.core.history import history_data, history_type
from amc.core.records import JSON, Host, Task, replace
from amc.core.state import State

# ---------------------------------------------------------------------------------------
# Clocks


class Clock(Protocol):
    def now(self) -> int:
        """Milliseconds since the epoch; never less than an earlier answer."""


class SystemClock:
    """Wall time, but never earlier than `floor` (the last time a store recorded)."""

    def __init__(self, floor: int = 0):
        self._last = floor

    def now(self) -> int:
        self._last = max(self._last, time.time_ns() // 1_000_000)
        return self._last


class ManualClock:
    """A clock that moves only when told to (tests, conformance runs)."""

    def __init__(self, start: int):
        self._now = start

    def now(self) -> int:
        return self._now

    def advance(self, ms: int) -> int:
        if ms <= 0:
            raise ValueError("a clock only moves forward")
        self._now += ms
        return self._now


# ---------------------------------------------------------------------------------------
# The port


@attrs.frozen
class HistoryEntry:
    seq: int
    at: int
    type: str
    data: dict[str, JSON]


@attrs.frozen
class Page:
    tasks: list[Task]
    next: str | None  # an opaque cursor for the next page, or None at the end


class Service(Protocol):
    """What the edges need from a store."""

    clock: Clock

    async def execute(self, command: Command) -> kernel.Decision:
        """Stamp `command` with the clock, decide it, and return once its events are durable."""

    async def advance_clock(self, ms: int) -> int:
        """Move a `ManualClock` forward, apply the expiries that fall due, return the new now.

        Raises `TypeError` when the service does not run a manual clock.
        """

    def task(self, task_id: str) -> Task | None: ...

    def tasks(self, tenant: str | None, status: str | None, after: str | None, limit: int) -> Page:
        """A page of tasks, oldest first; `tenant` None means every tenant.

        `after` is the `next` of an earlier page; anything else raises `InvalidRequest`.
        """

    def status_counts(self) -> dict[str, int]:
        """How many tasks have each status (for metrics)."""

    def history(self, task_id: str) -> list[HistoryEntry]: ...

    def host(self, host_id: str) -> Host | None: ...

    def hosts(self) -> list[Host]: ...

    def next_expiry(self) -> int | None:
        """When the earliest active lease expires, for a timer that expires leases."""


def stamp(command: Command, now: int) -> Command:
    return replace(command, now=now)


class HistoryLog:
    """Per-task history entries, numbered from 1 per task."""

    def __init__(self) -> None:
        self._entries: dict[str, list[HistoryEntry]] = {}

    def record(self, events: Sequence[Event]) -> None:
        for event in events:
            kind = history_type(event)
            if kind is None or isinstance(event, HostRegistered):  # no history shows a host event
                continue
            entries = self._entries.setdefault(event.task_id, [])
            entries.append(HistoryEntry(seq=len(entries) + 1, at=event.at, type=kind, data=history_data(event)))

    def of(self, task_id: str) -> list[HistoryEntry]:
        return list(self._entries.get(task_id, ()))


class MemoryService:
    """A `Service` that keeps everything in memory: for tests and embedders, not durable."""

    def __init__(self, clock: Clock | None = None, state: State | None = None):
        self.clock = clock or SystemClock()
        self.state = state or State()
        self.log: list[Event] = []
        self._history = HistoryLog()
        self._order: list[str] = list(self.state.tasks)  # task ids by submission order

    def execute_now(self, command: Command) -> kernel.Decision:
        decision = kernel.execute(self.state, stamp(command, self.clock.now()))
        self.log.extend(decision.events)
        self._history.record(decision.events)
        self._order.extend(e.task_id for e in decision.events if isinstance(e, TaskSubmitted))
        return decision

    async def execute(self, command: Command) -> kernel.Decision:
        return self.execute_now(command)

    async def advance_clock(self, ms: int) -> int:
        if not isinstance(self.clock, ManualClock):
            raise TypeError("this service does not run a manual clock")
        now = self.clock.advance(ms)
        self.execute_now(ExpireLeases(now=0))
        return now

    def task(self, task_id: str) -> Task | None:
        return self.state.tasks.get(task_id)

    def tasks(self, tenant: str | None, status: str | None, after: str | None, limit: int) -> Page:
        if after is not None and not (after.isdecimal() and int(after) < len(self._order)):
            raise InvalidRequest("after: not a cursor from this server")
        start = 0 if after is None else int(after) + 1  # a task's seq is its place in _order
        found: list[Task] = []
        for task_id in self._order[start:]:
            task = self.state.tasks[task_id]
            if (tenant is None or task.tenant == tenant) and (status is None or task.status == status):
                if len(found) == limit:
                    return Page(found, str(found[-1].seq))
                found.append(task)
        return Page(found, None)

    def status_counts(self) -> dict[str, int]:
        return dict(Counter(task.status for task in self.state.tasks.values()))

    def history(self, task_id: str) -> list[HistoryEntry]:
        return self._history.of(task_id)

    def host(self, host_id: str) -> Host | None:
        return self.state.hosts.get(host_id)

    def hosts(self) -> list[Host]:
        return [self.state.hosts[h] for h in sorted(self.state.hosts)]

    def next_expiry(self) -> int | None:
        return self.state.leases.next_expiry()
