"""The writer of one leadership term: a thread that owns the kernel state and commits batches.

It has the shape of the LMDB store's writer (amc/adapters/lmdb/writer.py; read its theory
of operation first): callers queue `Work`, the thread takes everything waiting as one batch,
runs each command through the kernel on the in-memory state with the state's journal open,
and makes the batch durable in ONE PostgreSQL transaction (the events, and each record the
journal names, encoded once) before it releases the callers' replies. Group commit falls
out of the queue here too: while one transaction waits for PostgreSQL's WAL flush, the next
batch gathers.

What differs is fencing. A writer belongs to one term: it was started when this server
took the leadership with epoch E (leadership.py), and every transaction begins with

    SELECT 1 / (epoch = E)::int FROM amc_leadership WHERE id = 1 FOR SHARE

which fails the transaction unless the epoch is still E, so nothing after it is written.
(The check is made inside the server rather than compared by the writer so that the whole
transaction, check, writes and COMMIT, travels as one pipeline: one round trip per batch.) The row lock it takes is what makes this
safe: a server that takes over bumps the epoch with an UPDATE of that row, which waits until
every transaction that already checked E has ended, and any transaction that begins after
the bump sees the new epoch. So a commit of this writer either happened before the new
leader loaded its state (and the new leader sees it) or does not happen at all.

The first failure of a transaction, whatever it is (the epoch moved, the connection died,
the server refused it), ends the term for good: the batch and everything queued fail with
`NotLeader`, nothing is ever committed by this writer again, and the service becomes a
standby (it may later be elected again, with a new epoch, a new writer and a fresh load).
A commit whose connection died while PostgreSQL committed it is the one ambiguous case: its
callers get `NotLeader` although the command took effect; they retry on the new leader,
which answers a repeated renewal, start, result or idempotent submit as the first (specs/design.md).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg

from amc.adapters import codec
from amc.adapters.batches import Outcome, Poison, Work, release
from amc.adapters.postgres import store
from amc.adapters.postgres.errors import Deposed
from amc.core import kernel
from amc.core.commands import ExpireLeases
from amc.core.events import HostRegistered
from amc.core.history import HISTORY_TYPES
from amc.core.records import Task
from amc.core.state import Journal, State
from amc.service import ChangeFeed, Clock, ManualClock, NotLeader, stamp

log = logging.getLogger("amc.store")

_STOP: Any = object()

# The fence: share-lock the leadership row and fail (division by zero) unless its epoch is ours.
FENCE = "SELECT 1 / (epoch = %s)::int FROM amc_leadership WHERE id = 1 FOR SHARE"
INSERT_EVENT = "INSERT INTO amc_events (seq, task_seq, body) VALUES (%s, %s, %s)"
UPSERT_TASK = (
    "INSERT INTO amc_tasks (seq, id, tenant, status, lease_expires_at, body) VALUES (%s, %s, %s, %s, %s, %s) "
    "ON CONFLICT (seq) DO UPDATE SET status = excluded.status, lease_expires_at = excluded.lease_expires_at, "
    "body = excluded.body"
)
UPSERT_HOST = "INSERT INTO amc_hosts (id, body) VALUES (%s, %s) ON CONFLICT (id) DO UPDATE SET body = excluded.body"
UPSERT_META = "INSERT INTO amc_meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value"


class _Prepared:
    __slots__ = (
        "replies",
        "events",
        "tasks",
        "hosts",
        "meta",
        "last_seq",
        "last_time",
        "manual_now",
        "advanced",
        "journal",
    )

    def __init__(self) -> None:
        self.replies: list[Any] = []
        self.events: list[tuple[int, int | None, bytes]] = []
        self.tasks: list[tuple[int, str, str, str, int | None, bytes]] = []
        self.hosts: list[tuple[str, bytes]] = []
        self.meta: list[tuple[str, str]] = []
        self.last_seq = 0
        self.last_time = 0
        self.manual_now = 0
        self.advanced = 0
        self.journal: Journal | None = None

    @property
    def empty(self) -> bool:
        return not self.events and not self.advanced


class Writer:
    """The thread of one term (see the module docstring). `conn` is its own connection."""

    def __init__(
        self,
        conn: psycopg.Connection,
        epoch: int,
        clock: Clock,
        *,
        on_commit: Callable[[int, float], None] | None = None,
        on_lost: Callable[[int], None] | None = None,
        changes: ChangeFeed | None = None,
        max_batch: int = 512,
    ):
        self.conn = conn
        self.epoch = epoch
        self.clock = clock
        self.manual = isinstance(clock, ManualClock)
        self.on_commit = on_commit
        self.on_lost = on_lost
        self.changes = changes  # told, after each commit, which records it changed (the service's feed)
        self.max_batch = max_batch
        self.state = State()
        self.next_seq = 1
        self.last_time = 0
        self.lost: BaseException | None = None  # set once, never cleared: the term is over
        # When the earliest committed lease expires: read from the state after each commit (or
        # load), when the state holds exactly what is committed; other threads read it.
        self.next_expiry: int | None = None
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._accepting = True
        self._submit_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"amc-pg-writer:{epoch}", daemon=True)

    # --- the callers' side -----------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def submit(self, work: Work) -> None:
        with self._submit_lock:
            if not self._accepting:
                raise NotLeader(self._why())
            self._queue.put(work)

    def stop(self) -> None:
        """Refuse new work, let the thread finish what is queued, and wait for it."""
        with self._submit_lock:
            if self._accepting:
                self._accepting = False
                self._queue.put(_STOP)
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join()

    def lose(self, why: BaseException) -> None:
        """End the term: refuse new work and fail what is queued; never commit again."""
        with self._submit_lock:
            if self.lost is None:
                self.lost = why
            if self._accepting:
                self._accepting = False
                self._queue.put(_STOP)

    def _why(self) -> str:
        if self.lost is None:
            return "this server is stopping"
        return f"this server stopped leading (epoch {self.epoch}): {self.lost}"

    # --- loading ---------------------------------------------------------------------------

    def load(self) -> None:
        """The state, the next log sequence number and the clock floor, from one snapshot."""
        with self.conn.transaction():
            self.conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            self.state = store.load_state(self.conn)
            self.next_seq = store.last_seq(self.conn) + 1
            self.last_time = store.meta_int(self.conn, "last_time") or 0
        self.next_expiry = self.state.next_deadline()

    def write_meta(self, items: list[tuple[str, str]]) -> None:
        """Store metadata (where a manual clock starts) under the epoch check."""
        prepared = _Prepared()
        prepared.meta = items
        self._commit(prepared)

    # --- the writer thread -------------------------------------------------------------------

    def _run(self) -> None:
        take, take_waiting = self._queue.get, self._queue.get_nowait
        while True:
            first = take()
            if first is _STOP:
                break
            batch, stop = [first], False
            while len(batch) < self.max_batch:
                try:
                    work = take_waiting()
                except queue.Empty:
                    break
                if work is _STOP:
                    stop = True
                    break
                batch.append(work)
            try:
                self._process(batch)
            except BaseException as exc:  # a bug in this module: end the term rather than guess
                log.exception("the store writer failed on a batch")
                self._end(exc)
                release([(work, None, NotLeader(self._why())) for work in batch])
            if stop:
                break
        self._drain()
        try:
            self.conn.close()  # its transactions are over: this term commits nothing more
        except psycopg.Error:
            pass

    def _drain(self) -> None:
        """Fail whatever is still queued (the term ended with work waiting)."""
        leftover: list[Outcome] = []
        while True:
            try:
                work = self._queue.get_nowait()
            except queue.Empty:
                break
            if work is not _STOP:
                leftover.append((work, None, NotLeader(self._why())))
        release(leftover)

    def _process(self, batch: list[Work]) -> None:
        started = time.perf_counter()
        if self.lost is not None:
            release([(work, None, NotLeader(self._why())) for work in batch])
            return
        outcomes: list[Outcome] = []
        while True:
            try:
                prepared = self._decide(batch)
                break
            except Poison as poison:
                log.error("command %r raised in the kernel", batch[poison.index].command, exc_info=poison.error)
                outcomes.append((batch[poison.index], None, poison.error))
                del batch[poison.index]
                try:
                    self.load()  # the state may hold part of the failed command
                except BaseException as exc:
                    self._end(exc)
                    outcomes.extend((work, None, NotLeader(self._why())) for work in batch)
                    release(outcomes)
                    return
        if not prepared.empty:
            try:
                self._commit(prepared)
            except BaseException as exc:
                self._end(exc)
                outcomes.extend((work, None, NotLeader(self._why())) for work in batch)
                release(outcomes)
                return
            self.next_seq = prepared.last_seq + 1
            self.last_time = prepared.last_time
            if prepared.advanced:
                assert isinstance(self.clock, ManualClock)
                self.clock.advance(prepared.advanced)
        self.next_expiry = self.state.next_deadline()  # the state is what is committed now
        outcomes.extend((work, reply, None) for work, reply in zip(batch, prepared.replies))
        release(outcomes)
        if self.changes is not None and prepared.journal is not None and not prepared.empty:
            self.changes.publish(prepared.journal, self.state)
        if self.on_commit is not None and not prepared.empty:
            try:
                self.on_commit(len(batch), time.perf_counter() - started)
            except Exception:
                log.exception("on_commit failed")

    def _end(self, why: BaseException) -> None:
        if isinstance(why, Deposed):
            log.warning("deposed: %s", why)
        else:
            log.error("ending the term of epoch %d: %r", self.epoch, why)
        self.lose(why)
        if self.on_lost is not None:
            self.on_lost(self.epoch)

    def _commit(self, prepared: _Prepared) -> None:
        """One transaction: the epoch check, then every write of the batch, sent as one
        pipeline (one round trip). The check fails the transaction inside the server when
        the epoch moved, so everything after it, the COMMIT included, does nothing."""
        conn = self.conn
        try:
            with conn.pipeline(), conn.transaction(), conn.cursor() as cursor:
                cursor.execute(FENCE, (self.epoch,))
                if prepared.events:
                    cursor.executemany(INSERT_EVENT, prepared.events)
                if prepared.tasks:
                    cursor.executemany(UPSERT_TASK, prepared.tasks)
                if prepared.hosts:
                    cursor.executemany(UPSERT_HOST, prepared.hosts)
                if prepared.meta:
                    cursor.executemany(UPSERT_META, prepared.meta)
        except psycopg.errors.DivisionByZero:
            raise Deposed(f"the leadership epoch is no longer {self.epoch}: another server leads") from None

    def _decide(self, batch: list[Work]) -> _Prepared:
        state = self.state
        prepared = _Prepared()
        state.open_journal()
        try:
            self._run_batch(batch, prepared)
        finally:
            journal = prepared.journal = state.close_journal()
        if not prepared.empty:
            self._prepare_records(prepared, journal)
            prepared.meta.append(("last_time", str(prepared.last_time)))
            if self.manual:
                prepared.meta.append(("manual_now", str(prepared.manual_now)))
        return prepared

    def _run_batch(self, batch: list[Work], prepared: _Prepared) -> None:
        state, tasks, replies = self.state, self.state.tasks, prepared.replies
        seq = self.next_seq - 1
        last_time = self.last_time
        manual_now = self.clock.now() if self.manual else 0
        events, encode, shown = prepared.events, codec.encode, HISTORY_TYPES
        for index, work in enumerate(batch):
            try:
                if work.advance_ms is not None:
                    manual_now += work.advance_ms
                    prepared.advanced += work.advance_ms
                    now = manual_now
                    decision = kernel.execute(state, ExpireLeases(now=now))
                    reply: Any = now
                else:
                    assert work.command is not None
                    now = manual_now if self.manual else max(self.clock.now(), last_time)
                    decision = reply = kernel.execute(state, stamp(work.command, now))
                for event in decision.events:
                    seq += 1
                    task_seq = None
                    if type(event) in shown and not isinstance(event, HostRegistered):  # no history shows a host event
                        task_seq = tasks[event.task_id].seq
                    events.append((seq, task_seq, encode(event)))
            except Exception as exc:
                raise Poison(index, exc) from None
            if now > last_time:
                last_time = now
            replies.append(reply)
        prepared.last_seq = seq
        prepared.last_time = last_time
        prepared.manual_now = manual_now

    def _prepare_records(self, prepared: _Prepared, journal: Journal) -> None:
        """Each record the journal names, encoded once, with the columns the reads filter on."""
        tasks, hosts = self.state.tasks, self.state.hosts
        prepared.tasks = [task_row(tasks[task_id]) for task_id in journal.tasks]
        prepared.hosts = [(host_id, codec.encode_host(hosts[host_id])) for host_id in journal.hosts]


def task_row(task: Task) -> tuple[int, str, str, str, int | None, bytes]:
    """The row of `amc_tasks` that holds `task` (shared with `amc store migrate`)."""
    attempt = task.active_attempt
    expires = None if attempt is None else attempt.lease_expires_at
    return (task.seq, task.id, task.tenant, str(task.status), expires, codec.encode_task(task))
