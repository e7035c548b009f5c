"""The port between the edges (HTTP, CLI, embedders) and a store: `Service`, and the values
and errors that cross it.

A `Service` runs commands through the kernel one at a time, makes their events durable
(or not, for `MemoryService`), and answers reads. Edges build commands with ``now=0``:
the service stamps each command with its clock when the command's turn comes, so the
times in a store's log never go backwards, whatever order callers raced in.

A service tells whoever `watch`es it which records each commit changed (a `Change`), after
the commit and in commit order: the HTTP edge's event stream is built on it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

import attrs

from amc.core import kernel
from amc.core.commands import Command
from amc.core.errors import InvalidRequest
from amc.core.records import JSON, Host, Task
from amc.core.state import Journal, State
from amc.service.clock import Clock

log = logging.getLogger("amc.service")


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


# A listing filtered by a label has no index to answer from: it reads the tasks of its scope
# in order and keeps those with the label. It examines at most this many per page, and a
# page that reaches the bound ends early, with a cursor where it stopped, so one request
# never reads the whole store however rare the label (specs/protocol.md, Listing tasks).
# Every store reads it here at each listing (`port.LABEL_SCAN_LIMIT`), so a test may lower it.
LABEL_SCAN_LIMIT = 5000


@attrs.frozen(kw_only=True)
class TaskQuery:
    """One page of a task listing: whose tasks, which, from where, how many, in which order.

    Pages go oldest first, or newest first; `tenant` None means every tenant; `label`
    (key, value) keeps only the tasks with that label, examining at most `LABEL_SCAN_LIMIT`
    tasks per page. `after` is the `next` of an earlier page in the same order; a store
    raises `InvalidRequest` for anything else, as this class does for a `limit` below 1.
    """

    limit: int
    tenant: str | None = None
    status: str | None = None
    after: str | None = None
    newest_first: bool = False
    label: tuple[str, str] | None = None

    def __attrs_post_init__(self) -> None:
        if self.limit < 1:
            raise InvalidRequest("limit: must be at least 1")

    def label_matches(self, task: Task) -> bool:
        return self.label is None or task.labels.get(self.label[0]) == self.label[1]

    def following(self, page: Page) -> TaskQuery | None:
        """The query of the page after `page` (which this query read), or None at the end."""
        return None if page.next is None else attrs.evolve(self, after=page.next)


@attrs.frozen
class Change:
    """The records one commit changed, as they stand after it: each task and host the commit
    changed, once, in the order of its first change within the commit."""

    tasks: tuple[Task, ...]
    hosts: tuple[Host, ...]

    @classmethod
    def of(cls, journal: Journal, state: State) -> Change:
        """The records `journal` names, as they stand in `state` (right after its batch)."""
        return cls(
            tasks=tuple(state.tasks[task_id] for task_id in journal.tasks),
            hosts=tuple(state.hosts[host_id] for host_id in journal.hosts),
        )


ChangeListener = Callable[[Change], None]


class ChangeFeed:
    """The listeners of one service's commits, and the one way a service tells them.

    A service calls `publish` with the `Change` of a batch (`Change.of` its journal, which
    names exactly the records `State.put_task`/`put_host` replaced) once that batch is
    durable, one batch after another, so the listeners see the changes in commit order.
    """

    def __init__(self) -> None:
        self._listeners: list[ChangeListener] = []

    def watch(self, listener: ChangeListener) -> Callable[[], None]:
        self._listeners.append(listener)

        def stop() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return stop

    @property
    def listening(self) -> bool:
        """Whether anyone listens: a service that builds its `Change` at commit time skips
        building one for nobody."""
        return bool(self._listeners)

    def publish(self, change: Change) -> None:
        if not (change.tasks or change.hosts):
            return
        for listener in list(self._listeners):  # a copy: a listener may stop watching meanwhile
            try:
                listener(change)
            except Exception:  # a listener's bug must not fail the commit it hears of
                log.exception("a change listener failed")


class NotLeader(Exception):
    """This server is a standby of a shared store (or stopped leading while the command
    waited): nothing of the command was applied by it. The edge answers 503 `not_leader`
    (specs/protocol.md, High availability); the caller retries on the leader."""


class NoManualClock(Exception):
    """`advance_clock` on a service whose clock is not a `ManualClock`: nothing moved."""


class StorageUnavailable(Exception):
    """A write could not be stored (a full disk, a store at its size ceiling, an IO error):
    nothing of it was applied, and the same request may succeed later. The HTTP edge answers
    503 `storage_unavailable` with `Retry-After` (specs/protocol.md, "Storage unavailable")."""


class Service(Protocol):
    """What the edges need from a store."""

    @property
    def clock(self) -> Clock:
        """The clock the service stamps commands with."""

    @property
    def may_stand_by(self) -> bool:
        """Whether other servers share this store, so that this one may be a standby (then
        the HTTP edge puts its standby gate in front of every route). Fixed for the
        service's life; a store only this server opens always leads."""

    @property
    def leading(self) -> bool:
        """Whether this server leads its store now: only the leader decides commands (a
        standby's raise `NotLeader`) and answers requests (specs/protocol.md, High availability)."""

    async def execute(self, command: Command) -> kernel.Decision:
        """Stamp `command` with the clock, decide it, and return once its events are durable."""

    def execute_sync(self, command: Command, timeout: float | None = None) -> kernel.Decision:
        """`execute` for threads: blocks until the command's events are durable (at most
        `timeout` seconds). Not from an event loop's thread, nor from a `watch` listener."""

    async def advance_clock(self, ms: int) -> int:
        """Move a `ManualClock` forward, apply the expiries that fall due, return the new now.

        Raises `NoManualClock` when the service does not run a manual clock.
        """

    def task(self, task_id: str) -> Task | None: ...

    def tasks(self, query: TaskQuery) -> Page:
        """The page of tasks `query` asks for (see `TaskQuery`)."""

    def status_counts(self) -> dict[str, int]:
        """How many tasks have each status (for metrics)."""

    def history(self, task_id: str) -> list[HistoryEntry]: ...

    def host(self, host_id: str) -> Host | None: ...

    def hosts(self) -> list[Host]: ...

    def next_expiry(self) -> int | None:
        """When the earliest active lease expires or session goes idle, for a timer that
        applies them."""

    def watch(self, listener: ChangeListener) -> Callable[[], None]:
        """Call `listener` with the `Change` of every commit from now on, once it is durable,
        in commit order, until the returned function is called.

        It is called on the thread that committed (a store's writer thread, say): keep it
        quick, and hand the change over to where it is used. A `ChangeFeed` does the work.
        """

    def close(self) -> None:
        """Finish the queued commands and release the store. Idempotent."""

    async def aclose(self) -> None:
        """`close` without blocking the event loop."""
