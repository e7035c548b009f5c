"""`MemoryService`: the kernel in memory behind the service port, nothing durable (tests,
embedders, `amc serve --store memory`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence

from amc.core import kernel
from amc.core.commands import Command, ExpireLeases, stamp
from amc.core.errors import InvalidRequest
from amc.core.events import Event, HostRegistered, TaskSubmitted
from amc.core.history import history_data, history_type
from amc.core.records import Host, Task
from amc.core.state import State
from amc.service import port
from amc.service.clock import Clock, ManualClock, SystemClock
from amc.service.port import Change, ChangeFeed, ChangeListener, HistoryEntry, NoManualClock, Page, TaskQuery


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

    # Nobody else can open this store: this server always leads it.
    may_stand_by = False
    leading = True

    def __init__(self, clock: Clock | None = None, state: State | None = None):
        self.clock = clock or SystemClock()
        self.state = state or State()
        self.log: list[Event] = []
        self._history = HistoryLog()
        self._order: list[str] = list(self.state.tasks)  # task ids by submission order
        self._changes = ChangeFeed()

    def execute_sync(self, command: Command, timeout: float | None = None) -> kernel.Decision:
        """Decide `command` at once, on the caller's thread (so `timeout` never comes into it)."""
        self.state.open_journal()
        try:
            decision = kernel.execute(self.state, stamp(command, self.clock.now()))
        finally:
            journal = self.state.close_journal()
        self.log.extend(decision.events)
        self._history.record(decision.events)
        self._order.extend(e.task_id for e in decision.events if isinstance(e, TaskSubmitted))
        if self._changes.listening:
            self._changes.publish(Change.of(journal, self.state))
        return decision

    def watch(self, listener: ChangeListener) -> Callable[[], None]:
        return self._changes.watch(listener)

    async def execute(self, command: Command) -> kernel.Decision:
        return self.execute_sync(command)

    async def advance_clock(self, ms: int) -> int:
        if not isinstance(self.clock, ManualClock):
            raise NoManualClock("this service does not run a manual clock")
        now = self.clock.advance(ms)
        self.execute_sync(ExpireLeases(now=0))
        return now

    def task(self, task_id: str) -> Task | None:
        return self.state.tasks.get(task_id)

    def tasks(self, query: TaskQuery) -> Page:
        after = query.after
        if after is not None and not (after.isdecimal() and int(after) < len(self._order)):
            raise InvalidRequest("after: not a cursor from this server")
        # A task's seq is its place in _order.
        if query.newest_first:
            seqs: Iterable[int] = range(len(self._order) - 1 if after is None else int(after) - 1, -1, -1)
        else:
            seqs = range(0 if after is None else int(after) + 1, len(self._order))
        found: list[Task] = []
        examined = 0
        for seq in seqs:
            task = self.state.tasks[self._order[seq]]
            if query.tenant not in (None, task.tenant) or query.status not in (None, task.status):
                continue
            if len(found) == query.limit:
                return Page(found, str(found[-1].seq))
            if query.label is not None:
                if examined == port.LABEL_SCAN_LIMIT:
                    return Page(found, str(seq + 1 if query.newest_first else seq - 1))
                examined += 1
                if not query.label_matches(task):
                    continue
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
        return self.state.next_deadline()

    def close(self) -> None:
        """Nothing to release: the memory goes with the service."""

    async def aclose(self) -> None:
        """Nothing to release (see `close`)."""
