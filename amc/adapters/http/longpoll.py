"""Waking long-polling claims when work may have become claimable.

A claim with ``wait_seconds`` that finds nothing waits here and tries again when anything
happens that could give it work: a submission (a successor of follow-ups too), a requeue,
a host registration, an attempt ending (its device is free again), or a held task released
by a resume. A claim reads `generation` *before* it asks the
kernel, and `wait` returns at once if the generation moved meanwhile, so a submission that
lands between the failed claim and the wait is never missed.

Claims of one kind (one host, one device filter) would all find the same work, so of the
claims of a kind waiting at once only the first (`first_of`) waits on the signal; the others
queue behind it, and each takes its turn when the one before it leaves (with work, or at
the end of its wait). A change then wakes one claim per kind, not one per waiting claim. A
Host Agent's claims are each of their own kind (one device each), so this costs them
nothing; a flood of identical claims costs one claim per change. Likewise the signal
remembers which kinds found nothing since the generation last moved (`found_nothing`):
asking again would find nothing again, for the reason the wait is sound at all (only a
waking event makes a claim succeed that failed), so the kernel is not asked (`known_empty`).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import AsyncIterator, Hashable

from amc.core.events import (
    AttemptReleased,
    Event,
    HostRegistered,
    LeaseExpired,
    MessageApplied,
    TaskEnded,
    TaskRequeued,
    TaskSubmitted,
)

# Events after which some claim might succeed that failed before. `MessageApplied` is a
# pause or resume the server applied to a queued task; only a resume can help, but telling
# them apart would mean reading the task here, and a spurious wake costs one claim.
WAKING_EVENTS = (TaskSubmitted, TaskRequeued, HostRegistered, TaskEnded, LeaseExpired, AttemptReleased, MessageApplied)


class WorkSignal:
    def __init__(self) -> None:
        self.generation = 0
        self._event = asyncio.Event()
        self._closed = False
        self._empty: set[Hashable] = set()  # claims that found nothing in this generation
        self._closing = asyncio.Event()
        self._kinds: dict[Hashable, collections.deque[asyncio.Future[None]]] = {}  # waiting claims, by kind

    @property
    def closed(self) -> bool:
        return self._closed

    def notify(self) -> None:
        self.generation += 1
        self._empty.clear()
        event, self._event = self._event, asyncio.Event()
        event.set()

    def found_nothing(self, claim: Hashable, generation: int) -> None:
        """`claim` found nothing, asked at `generation` (read before it was asked)."""
        if generation == self.generation:
            self._empty.add(claim)

    def known_empty(self, claim: Hashable) -> bool:
        """Whether `claim` would find nothing now, as it did since the generation last moved."""
        return claim in self._empty

    def notify_if_waking(self, events: tuple[Event, ...]) -> None:
        if any(isinstance(event, WAKING_EVENTS) for event in events):
            self.notify()

    async def wait(self, generation: int, timeout: float) -> None:
        """Until the generation moves past `generation`, the signal closes, or `timeout` passes."""
        if self._closed or generation != self.generation or timeout <= 0:
            return
        try:
            await asyncio.wait_for(self._event.wait(), timeout)
        except TimeoutError:
            pass

    @contextlib.asynccontextmanager
    async def first_of(self, kind: Hashable, timeout: float) -> AsyncIterator[bool]:
        """Queue a waiting claim behind the others of its `kind`; yields once it is the
        first (True), or when `timeout` passed first or the signal closed (False). On leaving,
        the next claim of the kind takes its turn."""
        queue = self._kinds.setdefault(kind, collections.deque())
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        queue.append(turn)
        if len(queue) == 1:
            turn.set_result(None)
        try:
            if not turn.done() and not self._closed:
                await asyncio.wait({turn}, timeout=timeout)
            yield queue[0] is turn and not self._closed
        finally:
            first = queue[0] is turn
            queue.remove(turn)
            if not queue:
                del self._kinds[kind]
            elif first and not queue[0].done():
                queue[0].set_result(None)  # the next one's turn: work may be left for it

    async def sleep(self, timeout: float) -> None:
        """Until `timeout` passes or the signal closes, whatever else happens."""
        if self._closed or timeout <= 0:
            return
        try:
            await asyncio.wait_for(self._closing.wait(), timeout)
        except TimeoutError:
            pass

    def close(self) -> None:
        """Release every waiter for good: the server is shutting down."""
        self._closed = True
        self._closing.set()
        for queue in self._kinds.values():
            for turn in queue:
                if not turn.done():
                    turn.set_result(None)
        self.notify()


class ClaimWaits:
    """How many claims wait at once, in all and per host, within the server's bounds.

    Every waiting claim holds a connection and wakes on every change to claim again, so a
    flood of them (one host's or many) would make each submission cost a claim per waiter.
    A claim that finds no room does not wait: it is answered like a claim that asked for no
    wait, and its caller asks again later.
    """

    def __init__(self, total: int, per_host: int):
        self.total = total
        self.per_host = per_host
        self._waiting: collections.Counter[str] = collections.Counter()
        self.turned_away = 0

    @property
    def waiting(self) -> int:
        return self._waiting.total()

    def enter(self, host_id: str) -> bool:
        """Take a place for one waiting claim of `host_id`; False when there is none."""
        if self.waiting >= self.total or self._waiting[host_id] >= self.per_host:
            self.turned_away += 1
            return False
        self._waiting[host_id] += 1
        return True

    def leave(self, host_id: str) -> None:
        self._waiting[host_id] -= 1
        if self._waiting[host_id] <= 0:
            del self._waiting[host_id]


class TaskSignals:
    """Part D: waking whoever waits on one task (a host polling for its session's next
    action, a caller waiting for an action's outcome) when any event of that task happens.

    A waiter takes the task's event with `watch` *before* it reads the state, then waits on
    it: a change that lands between the read and the wait has already set the event, so it
    is never missed. `notify` sets and forgets the events of the tasks an event touched; a
    waiter that times out leaves its event behind until the task's next event.
    """

    def __init__(self) -> None:
        self._events: dict[str, asyncio.Event] = {}
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def watch(self, task_id: str) -> asyncio.Event:
        event = self._events.get(task_id)
        if event is None:
            event = self._events[task_id] = asyncio.Event()
        return event

    def notify(self, events: tuple[Event, ...]) -> None:
        if not self._events:
            return
        for event in events:
            task_id = getattr(event, "task_id", None)
            waiting = self._events.pop(task_id, None) if task_id is not None else None
            if waiting is not None:
                waiting.set()

    async def wait(self, event: asyncio.Event, timeout: float) -> None:
        if self._closed or timeout <= 0:
            return
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except TimeoutError:
            pass

    def close(self) -> None:
        """Release every waiter: the server is shutting down."""
        self._closed = True
        for event in self._events.values():
            event.set()
        self._events.clear()
