"""`PostgresService`: the `amc.service.Service` of a store that several servers share.

Each server opens the same database. One leads (leadership.py): it holds the kernel state in
memory, decides commands and commits them in batches under its epoch (writer.py), exactly as
the LMDB store's one server does. The others are standbys: they hold no state, `leading` is
False, every command raises `NotLeader` (the HTTP edge answers every request with 503, see
amc/adapters/http/standby.py), and they try the leader lock twice a second. When the leader
goes, one of them bumps the epoch, loads the state from the records (the same "open, load,
serve" as an LMDB start-up) and leads.

Reads go to the database (store.py), so they show what is committed whoever committed it.
The clock is per term: a new leader's system clock never reads earlier than the latest
time the store recorded, and a manual clock resumes where the store says it stood.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Literal

import psycopg
from psycopg_pool import ConnectionPool

from amc.adapters.batches import Work
from amc.adapters.postgres import schema, store
from amc.adapters.postgres.leadership import DEFAULT_LEASE_S, DEFAULT_POLL_S, Leadership, server_name
from amc.adapters.postgres.writer import Rows, TermCommits
from amc.adapters.writer import Writer
from amc.core import kernel
from amc.core.commands import Command, RegisterHost, SubmitTask
from amc.core.records import Host, Task
from amc.service import (
    ChangeFeed,
    ChangeListener,
    Clock,
    HistoryEntry,
    ManualClock,
    NoManualClock,
    NotLeader,
    Page,
    SystemClock,
    TaskQuery,
)

log = logging.getLogger("amc.store")


class TermClock:
    """The service's clock: the clock of the current term, which a takeover replaces.

    The edge keeps one `Clock` for the life of the app (liveness, the expiry timer), so this
    one stays and delegates. A standby has no term: it reads wall time (nothing it answers
    shows a time)."""

    def __init__(self) -> None:
        self.current: Clock = SystemClock()

    def now(self) -> int:
        return self.current.now()


class PostgresService:
    """A `Service` over a PostgreSQL database shared with other servers (see the module docstring).

    Open it with `PostgresService.open`; close it with `close`. `leading` says whether this
    server leads now; `wait_leading` waits until it does.
    """

    may_stand_by = True  # other servers share the store: whoever does not lead stands by

    def __init__(
        self,
        url: str,
        clock_kind: Literal["system", "manual"],
        on_commit: Callable[[int, float], None] | None,
        *,
        max_batch: int,
        poll_s: float,
        lease_s: float,
        name: str | None,
        on_role: Callable[[int | None], None] | None = None,
    ):
        if clock_kind not in ("system", "manual"):
            raise ValueError(f"clock: expected 'system' or 'manual', not {clock_kind!r}")
        self.url = url
        self.clock = TermClock()
        self.manual = clock_kind == "manual"
        self._on_commit = on_commit
        self._max_batch = max_batch
        self._lease_s = lease_s
        self._writer: Writer[Rows] | None = None
        self._epoch = 0  # the epoch of `_writer`'s term
        self._changes = ChangeFeed()  # one feed across terms: a listener hears whichever term leads
        self._closed = False
        self._elected = threading.Condition()
        self._on_role = on_role
        self.name = name or server_name()
        self._pool: ConnectionPool = store.read_pool(url, application_name=f"amc {self.name} reads")
        self._leadership = Leadership(
            url, self._start_term, self._end_term, poll_s=poll_s, lease_s=lease_s, name=self.name
        )

    @classmethod
    def open(
        cls,
        url: str,
        clock: Literal["system", "manual"] = "system",
        on_commit: Callable[[int, float], None] | None = None,
        *,
        max_batch: int = 512,
        poll_s: float = DEFAULT_POLL_S,
        lease_s: float = DEFAULT_LEASE_S,
        name: str | None = None,
        on_role: Callable[[int | None], None] | None = None,
    ) -> PostgresService:
        """Open (creating or upgrading its tables) the store in the database at `url`, and
        start leading, or standing by when another server leads. `on_role(epoch)` is told
        each time this server starts leading (the term's epoch) and each time it stops
        (None), on the leadership thread, so that an operator can be told (LEADER/s1).

        Raises `NotAStore` (unreachable, or not an amc store) or `SchemaMismatch`.
        """
        with store.connect(url) as conn:
            schema.open_schema(conn)
        service = cls(
            url, clock, on_commit, max_batch=max_batch, poll_s=poll_s, lease_s=lease_s, name=name, on_role=on_role
        )
        try:
            service._leadership.step()  # lead at once when nobody does
            service._leadership.start()
        except BaseException:
            service.close()
            raise
        return service

    # --- leadership ------------------------------------------------------------------------

    @property
    def leading(self) -> bool:
        writer = self._writer
        return writer is not None and writer.lost is None and not self._closed

    @property
    def epoch(self) -> int | None:
        """The epoch of the term this server leads, or None on a standby."""
        writer = self._writer
        return self._epoch if writer is not None and writer.lost is None else None

    def wait_leading(self, timeout: float) -> bool:
        """Wait until this server leads; False when `timeout` seconds passed first."""
        with self._elected:
            return self._elected.wait_for(lambda: self.leading, timeout)

    def _start_term(self, epoch: int) -> None:
        """Elected with `epoch` (on the leadership thread): load, set the clock, serve."""
        options = {"idle_in_transaction_session_timeout": f"'{round(self._lease_s * 1000)}ms'"}
        conn = store.connect(self.url, f"amc {self.name} writer", **options)
        commits: psycopg.Connection | None = None
        try:
            commits = store.connect(self.url, f"amc {self.name} commits", **options)
            clock = self._term_clock(conn)
            term = TermCommits(conn, commits, epoch)
            writer = Writer(
                term,
                clock,
                self._changes,
                name=f"amc-pg-writer:{epoch}",
                on_commit=self._on_commit,
                on_lost=lambda: self._writer_lost(epoch),
                max_batch=self._max_batch,
            )
            writer.load()
            if isinstance(clock, ManualClock):
                # Record where the manual clock starts, so that the next term resumes from here.
                term.write_meta([("manual_now", str(clock.now()))])
        except BaseException:
            conn.close()
            if commits is not None:
                commits.close()
            raise
        # A previous term's writer has been told to stop (lose); its thread ends by itself.
        self.clock.current = clock
        writer.start()
        with self._elected:
            self._writer, self._epoch = writer, epoch
            self._elected.notify_all()
        if self._on_role is not None:
            self._on_role(epoch)

    def _term_clock(self, conn: psycopg.Connection) -> Clock:
        last_time = store.meta_int(conn, "last_time") or 0
        if not self.manual:
            return SystemClock(floor=last_time)
        stood = store.meta_int(conn, "manual_now")
        return ManualClock(max(stood if stood is not None else time.time_ns() // 1_000_000, last_time))

    def _end_term(self, why: BaseException) -> None:
        """The leadership thread saw the term end: stop the writer (it commits nothing more)."""
        writer = self._writer
        if writer is not None:
            writer.lose(why)
        if self._on_role is not None and not self._closed:
            self._on_role(None)

    def _writer_lost(self, epoch: int) -> None:
        """The writer of `epoch` saw its term end (a transaction failed): give the lock up."""
        self._leadership.resign(epoch)

    # --- commands ----------------------------------------------------------------------

    def _current(self) -> Writer[Rows]:
        writer = self._writer
        if writer is None or writer.lost is not None or self._closed:
            raise NotLeader("this server is a standby")
        return writer

    async def execute(self, command: Command) -> kernel.Decision:
        """Stamp `command`, decide it, return once its batch committed. Raises `NotLeader`
        on a standby, or when the term ended before the batch committed (nothing applied,
        but see writer.py on a commit whose connection died)."""
        _check_ids(command)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[kernel.Decision] = loop.create_future()
        self._current().submit(Work(command, future, loop))
        return await future

    def execute_sync(self, command: Command, timeout: float | None = None) -> kernel.Decision:
        _check_ids(command)
        future: Future[kernel.Decision] = Future()
        self._current().submit(Work(command, future))
        return future.result(timeout)

    async def advance_clock(self, ms: int) -> int:
        if not self.manual:
            raise NoManualClock("this service does not run a manual clock")
        if int(ms) != ms or ms <= 0:
            raise ValueError("a clock only moves forward, by a whole number of milliseconds")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[int] = loop.create_future()
        self._current().submit(Work(None, future, loop, advance_ms=int(ms)))
        return await future

    # --- reads ---------------------------------------------------------------------------

    def task(self, task_id: str) -> Task | None:
        with self._pool.connection() as conn:
            return store.task(conn, task_id)

    def tasks(self, query: TaskQuery) -> Page:
        with self._pool.connection() as conn:
            return store.tasks(conn, query)

    def status_counts(self) -> dict[str, int]:
        """How many tasks have each status (for metrics): one grouped count."""
        with self._pool.connection() as conn:
            return store.status_counts(conn)

    def history(self, task_id: str) -> list[HistoryEntry]:
        with self._pool.connection() as conn:
            return store.history(conn, task_id)

    def host(self, host_id: str) -> Host | None:
        with self._pool.connection() as conn:
            return store.host(conn, host_id)

    def hosts(self) -> list[Host]:
        with self._pool.connection() as conn:
            return store.hosts(conn)

    def watch(self, listener: ChangeListener) -> Callable[[], None]:
        """Call `listener` on the leading term's writer thread after each commit (see
        `Service.watch`). A standby commits nothing, so its listeners hear nothing until it leads."""
        return self._changes.watch(listener)

    def next_expiry(self) -> int | None:
        """When the earliest committed lease expires, as the leader's writer last saw it after a
        commit (no round trip: the expiry timer asks after every new lease); None on a standby."""
        writer = self._writer
        if writer is None or writer.lost is not None or self._closed:
            return None
        return writer.next_expiry

    # --- housekeeping ------------------------------------------------------------------

    def close(self) -> None:
        """Finish the queued commands, stop leading (or standing by), close. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            writer = self._writer
            if writer is not None:
                writer.stop()  # commits what is queued, still under the lock
        finally:
            try:
                self._leadership.stop()  # closing the lock connection frees the lock for a standby
            finally:
                self._pool.close()

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

    def __enter__(self) -> PostgresService:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _check_ids(command: Command) -> None:
    # Ids become text columns; refuse what PostgreSQL's text cannot hold before the kernel.
    if isinstance(command, SubmitTask):
        store.check_id("task_id", command.task_id)
        store.check_id("tenant", command.tenant)
    elif isinstance(command, RegisterHost):
        store.check_id("host_id", command.host_id)
