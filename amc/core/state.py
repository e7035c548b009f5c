"""The kernel's state: the records, plus two indexes that keep every command O(log n), and
a journal of the records that changed, for whoever asked to know (a store's writer).

The records (tasks, hosts, idempotency keys) are the state's meaning; `snapshot` returns
exactly them, and two states are equal when their snapshots are. The indexes are derived
from the records by the same events, so a replayed log rebuilds them too:

`ClaimQueue`
    queued tasks grouped by their requirements; each group is a heap ordered by
    (-priority, submission order). Entries are removed lazily: a task that leaves
    ``queued`` leaves a stale entry behind, and `apply` pops stale entries off the top of
    that heap, so the top of every heap is always a queued task. `decide` only ever looks
    at tops, and never mutates.

`LeaseIndex`
    one heap of (lease_expires_at, task_id, attempt) for every active lease. A renewal
    pushes a fresh entry and strands the old one; the same lazy clean-up keeps the top
    valid. `due` walks the heap read-only, visiting only entries at or before `now`.

`Journal` (not part of the state's meaning, nor of its equality)
    which records `apply` replaced while a journal was open, each with the record it held
    before its first change. A store opens one for a batch of commands and writes exactly
    the records the journal names (a unit of work, as a repository's `seen` set): the
    kernel says what it changed, instead of the store watching its dicts.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator

import attrs

from amc.core.records import Device, Host, Requirements, Task

QueueEntry = tuple[int, int, str]  # (-priority, seq, task_id)
LeaseEntry = tuple[int, str, int]  # (lease_expires_at, task_id, attempt)
GroupKey = tuple[str | None, tuple[tuple[str, str], ...]]  # Requirements.key()
Groups = dict[GroupKey, tuple[Requirements, list[QueueEntry]]]


class ClaimQueue:
    """Queued tasks, grouped by requirements, best first within each group."""

    def __init__(self) -> None:
        # requirements key -> (requirements, heap). Groups that pin a serial are kept
        # apart by serial, so a claim only looks at the groups its devices could match.
        self._open: Groups = {}
        self._pinned: dict[str, Groups] = {}

    def _groups_for(self, requirements: Requirements) -> Groups:
        if requirements.serial is None:
            return self._open
        return self._pinned.setdefault(requirements.serial, {})

    def _heap(self, requirements: Requirements, key: GroupKey) -> list[QueueEntry]:
        """The heap of the group `requirements` (whose key is `key`) wait in, made if new."""
        groups = self._groups_for(requirements)
        group = groups.get(key)
        if group is None:
            group = groups[key] = (requirements, [])
        return group[1]

    def push(self, task: Task) -> None:
        heapq.heappush(self._heap(task.requirements, task.requirements.key()), (-task.priority, task.seq, task.id))

    @classmethod
    def of(cls, tasks: Iterable[Task]) -> ClaimQueue:
        """A queue holding `tasks` (a start-up's backlog): the same queue as pushing them one
        by one, built with one `heapify` per group. A backlog's tasks mostly share a few
        `Requirements` objects, so each one's group key is computed once."""
        queue = cls()
        keys: dict[int, GroupKey] = {}  # id(requirements) -> key; the tasks keep them alive
        for task in tasks:
            requirements = task.requirements
            key = keys.get(id(requirements))
            if key is None:
                key = keys[id(requirements)] = requirements.key()
            queue._heap(requirements, key).append((-task.priority, task.seq, task.id))
        for groups in (queue._open, *queue._pinned.values()):
            for _, heap in groups.values():
                heapq.heapify(heap)
        return queue

    def clean(self, requirements: Requirements, tasks: dict[str, Task]) -> None:
        """Pop entries of tasks that cannot be claimed (no longer queued, or held) off the
        top of their group."""
        groups = self._groups_for(requirements)
        key = requirements.key()
        group = groups.get(key)
        if group is None:
            return
        heap = group[1]
        while heap and not tasks[heap[0][2]].claimable:
            heapq.heappop(heap)
        if not heap:
            del groups[key]
            if requirements.serial is not None and not groups:
                del self._pinned[requirements.serial]

    def best(self, devices: Iterable[Device]) -> tuple[str, Requirements] | None:
        """The best queued task that one of `devices` matches: (task id, its requirements)."""
        devices = tuple(devices)
        candidates = [self._open]
        candidates.extend(self._pinned[d.serial] for d in devices if d.serial in self._pinned)
        best_entry: QueueEntry | None = None
        best_requirements: Requirements | None = None
        for groups in candidates:
            for requirements, heap in groups.values():
                top = heap[0]
                if best_entry is not None and top >= best_entry:
                    continue
                if any(requirements.matches(d.serial, d.attributes) for d in devices):
                    best_entry, best_requirements = top, requirements
        if best_entry is None or best_requirements is None:  # both are set together
            return None
        return best_entry[2], best_requirements

    def __len__(self) -> int:
        groups = [self._open, *self._pinned.values()]
        return sum(len(heap) for g in groups for _, heap in g.values())


class LeaseIndex:
    """Active leases ordered by expiry."""

    def __init__(self) -> None:
        self._heap: list[LeaseEntry] = []

    def push(self, expires_at: int, task_id: str, attempt: int) -> None:
        heapq.heappush(self._heap, (expires_at, task_id, attempt))

    @staticmethod
    def _valid(entry: LeaseEntry, tasks: dict[str, Task]) -> bool:
        expires_at, task_id, number = entry
        active = tasks[task_id].active_attempt
        return active is not None and active.number == number and active.lease_expires_at == expires_at

    def clean(self, tasks: dict[str, Task]) -> None:
        heap = self._heap
        while heap and not self._valid(heap[0], tasks):
            heapq.heappop(heap)

    def next_expiry(self) -> int | None:
        return self._heap[0][0] if self._heap else None

    def next_expiry_or_none(self) -> int | None:
        """`next_expiry` for a reader in another thread while the owner may pop the heap."""
        try:
            return self._heap[0][0]
        except IndexError:
            return None

    def due(self, now: int, tasks: dict[str, Task]) -> list[LeaseEntry]:
        """Every active lease with lease_expires_at <= now, earliest first (read-only)."""
        heap, found, stack = self._heap, [], [0] if self._heap else []
        while stack:
            i = stack.pop()
            entry = heap[i]
            if entry[0] > now:
                continue  # the heap property: nothing below is due either
            if self._valid(entry, tasks):
                found.append(entry)
            stack.extend(child for child in (2 * i + 1, 2 * i + 2) if child < len(heap))
        # A start or renewal within the same millisecond pushes an equal entry twice.
        return sorted(set(found))

    def __len__(self) -> int:
        return len(self._heap)


class IdleIndex(LeaseIndex):
    """Part D: active session attempts ordered by when they end as idle (`Task.idle_expires_at`),
    kept exactly as the lease index is: an entry is valid while the task's idle deadline is
    still that one for that attempt."""

    @staticmethod
    def _valid(entry: LeaseEntry, tasks: dict[str, Task]) -> bool:
        expires_at, task_id, number = entry
        task = tasks[task_id]
        active = task.active_attempt
        return active is not None and active.number == number and task.idle_expires_at == expires_at


@attrs.define
class Journal:
    """The records changed since the journal was opened: id -> the record before its first
    change (None: the record is new). Records are never removed, so every id named here
    has a current record in the state."""

    tasks: dict[str, Task | None] = attrs.field(factory=dict)
    hosts: dict[str, Host | None] = attrs.field(factory=dict)


@attrs.define(eq=False)
class State:
    """Everything the kernel knows. Change it only through `amc.core.kernel.apply`."""

    tasks: dict[str, Task] = attrs.field(factory=dict)
    hosts: dict[str, Host] = attrs.field(factory=dict)
    idempotency: dict[tuple[str, str], str] = attrs.field(factory=dict)  # (tenant, key) -> task id
    submitted: int = 0  # tasks ever submitted; the next task's `seq`
    queue: ClaimQueue = attrs.field(factory=ClaimQueue)
    leases: LeaseIndex = attrs.field(factory=LeaseIndex)
    # Part D: sessions wait in a queue of their own, which only claims that run sessions see,
    # and their idle deadlines are an index beside the leases'.
    session_queue: ClaimQueue = attrs.field(factory=ClaimQueue)
    idle: IdleIndex = attrs.field(factory=IdleIndex)
    # Open (not None) while someone wants to know what changed; see `open_journal`.
    journal: Journal | None = None

    def put_task(self, task: Task) -> None:
        """Store `task` as the record of its id (the only way `apply` changes a task)."""
        journal = self.journal
        if journal is not None and task.id not in journal.tasks:
            journal.tasks[task.id] = self.tasks.get(task.id)
        self.tasks[task.id] = task

    def put_host(self, host: Host) -> None:
        """Store `host` as the record of its id (the only way `apply` changes a host)."""
        journal = self.journal
        if journal is not None and host.id not in journal.hosts:
            journal.hosts[host.id] = self.hosts.get(host.id)
        self.hosts[host.id] = host

    def queue_of(self, task: Task) -> ClaimQueue:
        """The claim queue `task` waits in: sessions apart from plans."""
        return self.session_queue if task.session is not None else self.queue

    def next_deadline(self) -> int | None:
        """The earliest lease expiry or session idle end, or None."""
        due = [t for t in (self.leases.next_expiry(), self.idle.next_expiry()) if t is not None]
        return min(due) if due else None

    def open_journal(self) -> None:
        """Start recording which records change (from now until `close_journal`)."""
        self.journal = Journal()

    def close_journal(self) -> Journal:
        """Stop recording, and return what changed since `open_journal`."""
        journal, self.journal = self.journal, None
        if journal is None:
            raise RuntimeError("no journal is open")
        return journal

    @classmethod
    def from_records(cls, tasks: Iterable[Task], hosts: Iterable[Host]) -> State:
        """Rebuild a state, indexes included, from its records (a store's start-up path)."""
        state = cls()
        claimable: list[Task] = []
        sessions: list[Task] = []
        for task in sorted(tasks, key=_seq_of):
            state.tasks[task.id] = task
            if task.idempotency_key is not None:
                state.idempotency[(task.tenant, task.idempotency_key)] = task.id
            if task.claimable:
                (claimable if task.session is None else sessions).append(task)
            elif (attempt := task.active_attempt) is not None:
                state.leases.push(attempt.lease_expires_at, task.id, attempt.number)
                if (idle_at := task.idle_expires_at) is not None:
                    state.idle.push(idle_at, task.id, attempt.number)
        state.queue = ClaimQueue.of(claimable)
        state.session_queue = ClaimQueue.of(sessions)
        state.submitted = len(state.tasks)
        state.hosts = {host.id: host for host in hosts}
        return state

    def records_copy(self) -> State:
        """A copy of the records (records are immutable, so this is cheap), without indexes."""
        return State(
            tasks=dict(self.tasks),
            hosts=dict(self.hosts),
            idempotency=dict(self.idempotency),
            submitted=self.submitted,
        )

    def snapshot(self) -> tuple[dict[str, Task], dict[str, Host], dict[tuple[str, str], str], int]:
        """The state's meaning, comparable with ==, without the indexes."""
        return (self.tasks, self.hosts, self.idempotency, self.submitted)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, State) and self.snapshot() == other.snapshot()

    def active_tasks(self) -> Iterator[Task]:
        return (t for t in self.tasks.values() if t.active_attempt is not None)


def _seq_of(task: Task) -> int:
    return task.seq
