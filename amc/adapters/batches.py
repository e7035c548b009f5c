"""What a store's writer thread and its callers hand each other (the LMDB and PostgreSQL
stores alike): a caller's request (`Work`), the mark of a command that raised in the kernel
(`Poison`), and `release`, which answers the callers of a batch once it is durable.

A caller waits on a future: a `concurrent.futures.Future` when it is a thread (answered
directly), or an asyncio future of its event loop (answered with one wake-up per loop and
batch, since waking a loop from another thread is the costly part).
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Future, InvalidStateError
from typing import Any

from amc.core.commands import Command


class Work:
    """One caller's request: a command, or a manual clock advance."""

    __slots__ = ("command", "advance_ms", "loop", "future")

    def __init__(
        self,
        command: Command | None,
        future: Future | asyncio.Future,
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


Outcome = tuple[Work, Any, BaseException | None]  # the work, its reply, or the error it gets


def release(outcomes: list[Outcome]) -> None:
    """Resolve the callers' futures: directly for threads, one wake-up per event loop."""
    by_loop: dict[asyncio.AbstractEventLoop, list] = {}
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


def _settle(items: list) -> None:
    for future, reply, error in items:
        if future.done():  # cancelled: the caller stopped waiting (the command still happened)
            continue
        if error is None:
            future.set_result(reply)
        else:
            future.set_exception(error)
