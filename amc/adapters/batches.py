"""What a store's writer thread and its callers hand each other (the LMDB and PostgreSQL
stores alike): a caller's request (`Work`), the mark of a command that raised in the kernel
(`Poison`), `Stamper`, which runs a batch's requests through the kernel at the store's time,
and `release`, which answers the callers of a batch once it is durable.

A caller waits on a future: a `concurrent.futures.Future` when it is a thread (answered
directly), or an asyncio future of its event loop (answered with one wake-up per loop and
batch, since waking a loop from another thread is the costly part).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from concurrent.futures import Future, InvalidStateError
from typing import Any

from amc.core import kernel
from amc.core.commands import Command, ExpireLeases, stamp
from amc.core.events import Event
from amc.core.state import State


class Work:
    """One caller's request: a command, or a manual clock advance."""

    __slots__ = ("command", "advance_ms", "loop", "future")

    def __init__(
        self,
        command: Command | None,
        future: Future[Any] | asyncio.Future[Any],
        loop: asyncio.AbstractEventLoop | None = None,
        advance_ms: int | None = None,
    ):
        self.command = command
        self.advance_ms = advance_ms
        self.future = future
        self.loop = loop


class Poison(Exception):
    """Running item `index` of the batch raised `error`."""

    def __init__(self, index: int, error: BaseException):
        self.index = index
        self.error = error


class Stamper:
    """Runs callers' requests through the kernel one after another, each at the store's time:
    the system clock (`now`), never earlier than the latest time already stamped, so that a
    store's times never go back; or, with `manual`, the manual clock, which only the callers'
    advances move (an advance expires what falls due and answers the new time).

    `last_time`, `manual_now` and `advanced` (the sum of the advances) are where the requests
    run so far left them: what the writer records with the batch, and the manual clock moves
    by once it is durable."""

    def __init__(self, now: Callable[[], int], manual: bool, last_time: int, manual_now: int):
        self._now = now
        self.manual = manual
        self.last_time = last_time
        self.manual_now = manual_now
        self.advanced = 0

    def run(self, state: State, batch: list[Work]) -> Iterator[tuple[int, Any, tuple[Event, ...]]]:
        """(index, reply, events) of each request in turn. A request that raises in the kernel
        raises `Poison` with its index (the state may hold part of it)."""
        for index, work in enumerate(batch):
            try:
                if work.advance_ms is not None:
                    self.manual_now += work.advance_ms
                    self.advanced += work.advance_ms
                    now = self.manual_now
                    decision = kernel.execute(state, ExpireLeases(now=now))
                    reply: Any = now
                else:
                    assert work.command is not None  # a Work is a command or a clock advance
                    now = self.manual_now if self.manual else max(self._now(), self.last_time)
                    decision = reply = kernel.execute(state, stamp(work.command, now))
            except Exception as exc:
                raise Poison(index, exc) from None
            if now > self.last_time:
                self.last_time = now
            yield index, reply, decision.events


Outcome = tuple[Work, Any, BaseException | None]  # the work, its reply, or the error it gets
_Answer = tuple[asyncio.Future[Any] | Future[Any], Any, BaseException | None]  # a future, its reply or error


def release(outcomes: list[Outcome]) -> None:
    """Resolve the callers' futures: directly for threads, one wake-up per event loop."""
    by_loop: dict[asyncio.AbstractEventLoop, list[_Answer]] = {}
    for work, reply, error in outcomes:
        if work.loop is None:
            try:
                if error is None:
                    work.future.set_result(reply)
                else:
                    work.future.set_exception(error)
            except InvalidStateError:
                pass  # cancelled by its caller
        else:
            by_loop.setdefault(work.loop, []).append((work.future, reply, error))
    for loop, items in by_loop.items():
        try:
            loop.call_soon_threadsafe(_settle, items)
        except RuntimeError:
            pass  # that event loop is closed; nobody is waiting any more


def _settle(items: list[_Answer]) -> None:
    for future, reply, error in items:
        if future.done():  # cancelled: the caller stopped waiting (the command still happened)
            continue
        if error is None:
            future.set_result(reply)
        else:
            future.set_exception(error)
