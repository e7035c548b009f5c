"""`LmdbService`: the durable `amc.service.Service`.

Start-up is "open, load, serve": the task and host records are decoded and the kernel's
indexes rebuilt from them (`State.from_records`); the log is not replayed (that is what
`amc store verify` does). Commands go to the writer thread (`writer.py`) and their reply
comes back after their batch committed; reads come straight from LMDB (`reads.py`).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Literal

from amc.adapters.batches import Work
from amc.adapters.lmdb import layout, reads
from amc.adapters.lmdb.store import DEFAULT_MAP_SIZE, DEFAULT_MAX_MAP_SIZE, Store
from amc.adapters.lmdb.writer import LmdbWrites, open_writer
from amc.adapters.writer import Writer
from amc.core import kernel
from amc.core.commands import Command, RegisterHost, SubmitTask
from amc.core.records import Host, Task
from amc.service import ChangeListener, Clock, HistoryEntry, ManualClock, NoManualClock, Page, SystemClock, TaskQuery

DEFAULT_DATA_DIR = ".amc"


class LmdbService:
    """A `Service` whose every acknowledged command is on disk.

    Open it with `LmdbService.open`; use it as a (sync) context manager or call `close`.
    All methods are thread-safe. `execute` and `advance_clock` are coroutines that never
    block the event loop; `execute_sync` is the same for threads. Do not call either from
    an `on_commit` callback: it runs on the writer thread.
    """

    clock: Clock
    # Only one server opens an LMDB store (its writer lock): that server always leads it.
    may_stand_by = False
    leading = True

    def __init__(self, store: Store, clock: Clock, writer: Writer[LmdbWrites]):
        self._store = store
        self.clock = clock
        self._writer = writer
        self._closed = False

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str] = DEFAULT_DATA_DIR,
        clock: Literal["system", "manual"] = "system",
        on_commit: Callable[[int, float], None] | None = None,
        *,
        map_size: int = DEFAULT_MAP_SIZE,
        max_map_size: int = DEFAULT_MAX_MAP_SIZE,
        max_batch: int = 512,
    ) -> LmdbService:
        """Open the store in directory `path`, creating it if the directory is new or empty.

        Args:
            path: the data directory (the server's ``--data``).
            clock: ``"system"``: wall time, never earlier than the latest time the store
                recorded; ``"manual"``: starts at wall time in a new store, resumes where
                it stood in an existing one, and moves only by `advance_clock`.
            on_commit: called as ``on_commit(batch_size, seconds)`` on the writer thread
                after each commit (`seconds`: from taking the batch to the end of its
                fsync). Keep it quick; exceptions are logged and ignored.
            map_size: the initial LMDB map size in bytes; it doubles whenever it is full...
            max_map_size: ...up to this; a batch that does not fit even then fails with
                `CommitFailed` (a `StorageUnavailable`), as on a full disk.
            max_batch: the most commands committed in one transaction.

        Raises:
            NotAStore, SchemaMismatch, StoreLocked (see `amc.adapters.errors`).
        """
        store = Store.open(path, map_size=map_size, max_map_size=max_map_size)
        try:
            chosen = _open_clock(store, clock)
            writer = open_writer(store, chosen, on_commit=on_commit, max_batch=max_batch)
            writer.start()
        except BaseException:
            store.close()
            raise
        return cls(store, chosen, writer)

    # --- commands ----------------------------------------------------------------------

    async def execute(self, command: Command) -> kernel.Decision:
        """Stamp `command` with the clock, decide it, and return once its batch is durable.

        Raises `CommitFailed` if its batch could not be committed (nothing of it was
        applied), `StoreClosed` after `close`, `InvalidRequest` for an id the store could
        not key.
        """
        _check_ids(command)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[kernel.Decision] = loop.create_future()
        self._writer.submit(Work(command, future, loop))
        return await future

    def execute_sync(self, command: Command, timeout: float | None = None) -> kernel.Decision:
        """`execute` for threads: blocks until the command's batch committed."""
        _check_ids(command)
        future: Future[kernel.Decision] = Future()
        self._writer.submit(Work(command, future))
        return future.result(timeout)

    async def advance_clock(self, ms: int) -> int:
        """Move the manual clock forward by `ms`, apply the expiries that fall due, and
        return the new now once both are durable. Raises `NoManualClock` without a manual clock."""
        if not isinstance(self.clock, ManualClock):
            raise NoManualClock("this service does not run a manual clock")
        if int(ms) != ms or ms <= 0:
            raise ValueError("a clock only moves forward, by a whole number of milliseconds")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[int] = loop.create_future()
        self._writer.submit(Work(None, future, loop, advance_ms=int(ms)))
        return await future

    # --- reads ---------------------------------------------------------------------------

    def task(self, task_id: str) -> Task | None:
        with self._store.read() as txn:
            return reads.task(self._store, txn, task_id)

    def tasks(self, query: TaskQuery) -> Page:
        """The page `query` asks for; a malformed `after` raises `InvalidRequest`."""
        with self._store.read() as txn:
            return reads.tasks(self._store, txn, query)

    def status_counts(self) -> dict[str, int]:
        """How many tasks have each status (for metrics), from the listing index."""
        with self._store.read() as txn:
            return reads.status_counts(self._store, txn)

    def history(self, task_id: str) -> list[HistoryEntry]:
        with self._store.read() as txn:
            return reads.history(self._store, txn, task_id)

    def host(self, host_id: str) -> Host | None:
        with self._store.read() as txn:
            return reads.host(self._store, txn, host_id)

    def hosts(self) -> list[Host]:
        with self._store.read() as txn:
            return reads.hosts(self._store, txn)

    def next_expiry(self) -> int | None:
        """When the earliest active lease expires (committed leases only) or a session's idle
        timeout ends it (Part D: from the writer's state; an idle deadline made stale since
        only wakes the timer early, to find nothing due)."""
        with self._store.read() as txn:
            lease = reads.next_expiry(self._store, txn)
        idle = self._writer.state.idle.next_expiry_or_none()
        return lease if idle is None else idle if lease is None else min(lease, idle)

    def watch(self, listener: ChangeListener) -> Callable[[], None]:
        """Call `listener` on the writer thread after each commit (see `Service.watch`)."""
        return self._writer.changes.watch(listener)

    # --- housekeeping ------------------------------------------------------------------

    def size_bytes(self) -> int:
        """The bytes of the store's map in use."""
        return self._store.size_bytes()

    def close(self) -> None:
        """Finish the queued commands, stop the writer, close the store. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self._writer.stop()
        finally:
            self._store.close()

    async def aclose(self) -> None:
        """`close` without blocking the event loop."""
        await asyncio.to_thread(self.close)

    def __enter__(self) -> LmdbService:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _open_clock(store: Store, kind: str) -> Clock:
    """The clock of specs/protocol.md: never earlier than the latest time the store recorded."""
    last_time = store.get_meta_u64(layout.META_LAST_TIME) or 0
    if kind == "system":
        return SystemClock(floor=last_time)
    if kind != "manual":
        raise ValueError(f"clock: expected 'system' or 'manual', not {kind!r}")
    stood = store.get_meta_u64(layout.META_MANUAL_NOW)
    start = max(stood if stood is not None else time.time_ns() // 1_000_000, last_time)
    if stood != start:
        # Record where the manual clock starts, so that a restart resumes from here.
        store.write(lambda txn: store.put_meta(txn, layout.META_MANUAL_NOW, layout.u64(start)))
    return ManualClock(start)


def _check_ids(command: Command) -> None:
    # Ids become LMDB keys; refuse those it cannot store before they reach the kernel.
    if isinstance(command, SubmitTask):
        layout.check_id("task_id", command.task_id)
        layout.check_id("tenant", command.tenant)
    elif isinstance(command, RegisterHost):
        layout.check_id("host_id", command.host_id)
