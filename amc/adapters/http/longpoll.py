"""Waking long-polling claims when work may have become claimable.

A claim with ``wait_seconds`` that finds nothing waits here and tries again when anything
happens that could give it work: a submission (a successor of follow-ups too), a requeue,
a host registration, an attempt ending (its device is free again), or a held task released
by a resume. A claim reads `generation` *before* it asks the
kernel, and `wait` returns at once if the generation moved meanwhile, so a submission that
lands between the failed claim and the wait is never missed.

Every waiter wakes on every change and simply claims again; the kernel decides. That is a
thundering herd with many idle hosts, but each retry is one O(log n) command, and it keeps
matching rules out of this module.
"""

from __future__ import annotations

import asyncio

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

    @property
    def closed(self) -> bool:
        return self._closed

    def notify(self) -> None:
        self.generation += 1
        event, self._event = self._event, asyncio.Event()
        event.set()

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

    def close(self) -> None:
        """Release every waiter for good: the server is shutting down."""
        self._closed = True
        self.notify()


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
