"""The writer of one leadership term: the thread that owns the kernel state and commits batches.

It has the shape of the LMDB store's writer (amc/adapters/lmdb/writer.py; read its theory
of operation first): callers queue `Work`, the writer takes everything waiting as one batch,
runs each command through the kernel on the in-memory state with the state's journal open,
encodes the events and each record the journal names once, and makes the batch durable in
ONE PostgreSQL transaction before it releases the callers' replies.

What differs first is overlap. A PostgreSQL commit is a round trip to another process,
which works on the other core while this one waits; the LMDB writer's "decide, commit,
decide the next batch" would leave each side idle half the time. So this writer runs its
own event loop on its thread: it sends a commit (commits.py) and decides the next commands
while that commit is on its way, and when the commit's answer is in it sends everything
decided meanwhile as the next commit (one transaction, one WAL flush for all of it). Callers
answered together come back together; to keep them from forming one batch that alternates
with its own commit, the writer, deciding a batch, looks every few commands whether the
connection is free (`_connection_ready`) and if so sends what it has decided so far, so two
groups of callers settle in, one committing while the other is decided.

The state therefore runs ahead of what is committed, which is safe because nothing of it is
seen before its commit: replies, the change feed and the next lease expiry are released
after the commit that holds them, in decision order (a reply that wrote nothing, a refusal,
waits too, since it may rest on an earlier batch's uncommitted decision), and reads go to
the database. If a commit fails the term ends (below), so no batch decided on top of the
failed one is ever sent.

Then there is fencing. A writer belongs to one term: it was started when this server took
the leadership with epoch E (leadership.py), and every batch's statement (COMMIT_BATCH) holds

    SELECT 1 / (epoch = E)::int FROM amc_leadership WHERE id = 1 FOR SHARE

which fails the statement unless the epoch is still E, so nothing of it is written. (The
check is made inside the server rather than compared by the writer so that the check and
the writes travel together: one round trip per batch.) The row lock it takes is what makes
this safe: a server that takes over bumps the epoch with an UPDATE of that row, which waits
until every transaction that already checked E has ended, and any transaction that locks
the row after the bump sees the new epoch. So a commit of this writer either happened before
the new leader loaded its state (and the new leader sees it) or does not happen at all.

The first failure of a transaction, whatever it is (the epoch moved, the connection died,
the server refused it), ends the term for good: the batch and everything queued fail with
`NotLeader`, nothing is ever committed by this writer again, and the service becomes a
standby (it may later be elected again, with a new epoch, a new writer and a fresh load).
A commit whose connection died while PostgreSQL committed it is the one ambiguous case: its
callers get `NotLeader` although the command took effect; they retry on the new leader,
which answers a repeated renewal, start, result or idempotent submit as the first (specs/design.md).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg

from amc.adapters import codec
from amc.adapters.batches import Outcome, Poison, Stamper, Work, release
from amc.adapters.errors import Deposed
from amc.adapters.postgres import arrays, store
from amc.adapters.postgres.commits import CommitConnection
from amc.core.events import HostRegistered
from amc.core.history import HISTORY_TYPES
from amc.core.records import Task
from amc.core.state import Journal, State
from amc.service import Change, ChangeFeed, Clock, ManualClock, NotLeader

log = logging.getLogger("amc.store")

_STOP: Any = object()
# While deciding a batch, how often (in commands) the writer looks whether the connection is
# ready for the next commit: a look is a poll of its socket, a few microseconds.
READY_EVERY = 8

# A batch's transaction is ONE statement (in autocommit: one round trip; prepared once per
# term, commits.py): the fence, and each table's rows as arrays, a column
# each, unnested into rows. The fence share-locks the leadership row and fails (division by
# zero) unless its epoch is ours; a failure anywhere aborts the whole statement. Data-
# modifying parts of a WITH always run; the fence, a plain SELECT, runs because the
# statement returns it.
COMMIT_BATCH = """
WITH fence AS (
    SELECT 1 / (epoch = $1)::int AS ok FROM amc_leadership WHERE id = 1 FOR SHARE
), events AS (
    INSERT INTO amc_events (seq, task_seq, body) SELECT * FROM unnest($2, $3, $4)
), tasks AS (
    INSERT INTO amc_tasks (seq, id, tenant, status, lease_expires_at, body)
    SELECT * FROM unnest($5, $6, $7, $8, $9, $10)
    ON CONFLICT (seq) DO UPDATE
    SET status = excluded.status, lease_expires_at = excluded.lease_expires_at, body = excluded.body
), hosts AS (
    INSERT INTO amc_hosts (id, body) SELECT * FROM unnest($11, $12)
    ON CONFLICT (id) DO UPDATE SET body = excluded.body
), meta AS (
    INSERT INTO amc_meta (key, value) SELECT * FROM unnest($13, $14)
    ON CONFLICT (key) DO UPDATE SET value = excluded.value
)
SELECT ok FROM fence
"""
COMMIT_TYPES = (
    "int8",  # the epoch
    *("int8[]", "int8[]", "bytea[]"),  # events: seq, task_seq, body
    *("int8[]", "text[]", "text[]", "text[]", "int8[]", "bytea[]"),  # tasks: seq, id, tenant, status, expiry, body
    *("text[]", "bytea[]"),  # hosts: id, body
    *("text[]", "text[]"),  # meta: key, value
)


class _Prepared:
    """One decided batch: its callers, their replies, and what committing it writes."""

    __slots__ = (
        "batch",
        "replies",
        "events",
        "tasks",
        "hosts",
        "meta",
        "last_seq",
        "last_time",
        "manual_now",
        "advanced",
        "change",
        "next_expiry",
    )

    def __init__(self) -> None:
        self.batch: list[Work] = []  # the callers decided, in order (a prefix of what was taken)
        self.replies: list[Any] = []
        self.events: list[tuple[int, int | None, bytes]] = []
        self.tasks: list[tuple[int, str, str, str, int | None, bytes]] = []
        self.hosts: list[tuple[str, bytes]] = []
        self.meta: list[tuple[str, str]] = []
        self.last_seq = 0
        self.last_time = 0
        self.manual_now = 0
        self.advanced = 0
        self.change: Change | None = None
        self.next_expiry: int | None = None

    @property
    def empty(self) -> bool:
        return not self.events and not self.advanced


def _merged(group: list[_Prepared]) -> _Prepared:
    """The writes of several batches decided one after another, as one transaction: every
    event, and each record as the last of them left it."""
    if len(group) == 1:
        return group[0]
    merged = _Prepared()
    tasks: dict[int, tuple] = {}
    hosts: dict[str, tuple] = {}
    meta: dict[str, tuple] = {}
    for prepared in group:
        merged.events.extend(prepared.events)
        tasks.update((row[0], row) for row in prepared.tasks)
        hosts.update((row[0], row) for row in prepared.hosts)
        meta.update((row[0], row) for row in prepared.meta)
    merged.tasks, merged.hosts, merged.meta = list(tasks.values()), list(hosts.values()), list(meta.values())
    return merged


class Writer:
    """The thread of one term (see the module docstring). `conn` is its connection for
    loading, `commits` the one its commits travel on; the writer closes both when it ends."""

    def __init__(
        self,
        conn: psycopg.Connection,
        epoch: int,
        clock: Clock,
        *,
        commits: psycopg.Connection,
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
        self._commits = CommitConnection(commits, COMMIT_BATCH, COMMIT_TYPES)
        # The state as decided: ahead of what is committed by the batches on their way.
        self.state = State()
        self.next_seq = 1
        self.last_time = 0
        self.manual_now = clock.now() if self.manual else 0
        self.lost: BaseException | None = None  # set once, never cleared: the term is over
        # When the earliest committed lease expires: set as each batch commits (from the state
        # its decision left), or on load; other threads read it.
        self.next_expiry: int | None = None
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._accepting = True
        self._submit_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"amc-pg-writer:{epoch}", daemon=True)
        # Owned by the writer's thread and its event loop:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._sleeping = False  # the loop waits for work (read by `_put` to wake it)
        self._decided: list[_Prepared] = []  # decided, waiting for the connection
        self._inflight: asyncio.Task | None = None  # the commit on the connection now
        self._stopping = False

    # --- the callers' side -----------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def submit(self, work: Work) -> None:
        with self._submit_lock:
            if not self._accepting:
                raise NotLeader(self._why())
            self._put(work)

    def stop(self) -> None:
        """Refuse new work, let the thread finish what is queued, and wait for it."""
        with self._submit_lock:
            if self._accepting:
                self._accepting = False
                self._put(_STOP)
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join()

    def lose(self, why: BaseException) -> None:
        """End the term: refuse new work and fail what is queued; never commit again."""
        with self._submit_lock:
            if self.lost is None:
                self.lost = why
            if self._accepting:
                self._accepting = False
                self._put(_STOP)

    def _put(self, item: Any) -> None:
        self._queue.put(item)
        if self._sleeping:  # set before the loop last looked at the queue: wake it
            self._sleeping = False
            assert self._loop is not None and self._wake is not None
            try:
                self._loop.call_soon_threadsafe(self._wake.set)
            except RuntimeError:
                pass  # the loop has ended: nothing is waiting for this

    def _why(self) -> str:
        if self.lost is None:
            return "this server is stopping"
        return f"this server stopped leading (epoch {self.epoch}): {self.lost}"

    # --- loading ---------------------------------------------------------------------------

    def load(self) -> None:
        """The state, the next log sequence number and the clock floor, from one snapshot.
        Only while nothing decided is uncommitted (before `start`, or after `_settle_all`)."""
        with self.conn.transaction():
            self.conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            self.state = store.load_state(self.conn)
            self.next_seq = store.last_seq(self.conn) + 1
            self.last_time = store.meta_int(self.conn, "last_time") or 0
        self.next_expiry = self.state.next_deadline()

    def write_meta(self, items: list[tuple[str, str]]) -> None:
        """Store metadata (where a manual clock starts) under the epoch check (before `start`)."""
        prepared = _Prepared()
        prepared.meta = items
        try:
            self._commits.execute_sync(self._params(prepared))
        except psycopg.errors.DivisionByZero:
            raise self._deposed() from None

    # --- the writer's thread -----------------------------------------------------------------

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # a bug in this module: end the term rather than guess
            log.exception("the store writer failed")
            self._end(exc)
        self._fail_queued()
        try:
            self.conn.close()
        except psycopg.Error:
            pass

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        try:
            while True:
                batch = self._take_waiting()
                if batch:
                    await self._process(batch)
                self._send_decided()
                if batch:
                    await asyncio.sleep(0)  # send what was just handed over; see replies that came
                    continue
                if self._stopping and self._inflight is None and not self._decided:
                    break
                await self._sleep()
        finally:
            self._commits.close()  # its transactions are over: this term commits nothing more

    def _take_waiting(self) -> list[Work]:
        batch: list[Work] = []
        while len(batch) < self.max_batch:
            try:
                work = self._queue.get_nowait()
            except queue.Empty:
                break
            if work is _STOP:
                self._stopping = True  # nothing is queued after it (`submit` refuses)
                break
            batch.append(work)
        return batch

    async def _sleep(self) -> None:
        """Wait for work, or for the commit in flight to end."""
        assert self._wake is not None
        self._wake.clear()
        self._sleeping = True
        if self._queue.empty() and not (self._inflight is not None and self._inflight.done()):
            await self._wake.wait()
        self._sleeping = False

    def _fail_queued(self) -> None:
        """Fail whatever callers still queued (the term ended with work waiting)."""
        leftover: list[Outcome] = []
        while True:
            try:
                work = self._queue.get_nowait()
            except queue.Empty:
                break
            if work is not _STOP:
                leftover.append((work, None, NotLeader(self._why())))
        release(leftover)

    async def _process(self, batch: list[Work]) -> None:
        """Decide `batch`, keeping the connection busy: whenever it is free (or its commit's
        answer has arrived) and something is decided, that goes out at once and the rest is
        decided while it commits. Without this, callers answered together would come back
        together and form one batch that alternates with its own commit: PostgreSQL idle
        while the kernel decides, and the kernel idle while PostgreSQL commits.

        A command that raised in the kernel gets its error at once (nothing of it is
        written), and the state is reloaded from what is committed, once everything decided
        before it is."""
        if self.lost is not None:
            release([(work, None, NotLeader(self._why())) for work in batch])
            return
        while batch:
            try:
                prepared = self._decide(batch)
            except Poison as poison:
                log.error("command %r raised in the kernel", batch[poison.index].command, exc_info=poison.error)
                release([(batch[poison.index], None, poison.error)])
                del batch[poison.index]
                try:
                    await self._settle_all()
                    if self.lost is not None:
                        raise NotLeader(self._why()) from None
                    self.load()  # the state may hold part of the failed command
                except BaseException as exc:
                    self._end(exc)
                    release([(work, None, NotLeader(self._why())) for work in batch])
                    return
                continue
            self._decided.append(prepared)
            batch = batch[len(prepared.batch) :]
            if batch:  # stopped early: the connection is free, or about to be
                if self._inflight is not None:  # its answer is here: take it, answer its callers
                    await asyncio.wait([self._inflight])
                self._send_decided()
                await asyncio.sleep(0)  # the next commit goes out before the rest is decided

    def _connection_ready(self) -> bool:
        """Whether a commit could be sent now: none is in flight, or its answer is here."""
        inflight = self._inflight
        if inflight is None or inflight.done():
            return True
        return self._commits.answered()

    def _decide(self, batch: list[Work]) -> _Prepared:
        """Decide `batch`, or as much of it as was decided when the connection became ready
        for another commit (looked at every `READY_EVERY` commands)."""
        state = self.state
        prepared = _Prepared()
        state.open_journal()
        try:
            self._run_batch(batch, prepared)
        finally:
            journal = state.close_journal()
        if not prepared.empty:
            self._prepare_records(prepared, journal)
            prepared.meta.append(("last_time", str(prepared.last_time)))
            if self.manual:
                prepared.meta.append(("manual_now", str(prepared.manual_now)))
            # Built whether or not anyone listens now: one who starts before the commit hears it.
            prepared.change = Change.of(journal, state)
            self.next_seq = prepared.last_seq + 1
            self.last_time = prepared.last_time
            self.manual_now = prepared.manual_now
        prepared.next_expiry = state.next_deadline()
        return prepared

    def _run_batch(self, batch: list[Work], prepared: _Prepared) -> None:
        tasks, replies, decided = self.state.tasks, prepared.replies, prepared.batch
        ready = self._connection_ready
        seq = self.next_seq - 1
        stamper = Stamper(self.clock.now, self.manual, self.last_time, self.manual_now)
        events, encode, shown = prepared.events, codec.encode, HISTORY_TYPES
        for index, reply, decided_events in stamper.run(self.state, batch):
            try:
                for event in decided_events:
                    seq += 1
                    task_seq = None
                    if type(event) in shown and not isinstance(event, HostRegistered):  # no history shows a host event
                        task_seq = tasks[event.task_id].seq
                    events.append((seq, task_seq, encode(event)))
            except Exception as exc:
                raise Poison(index, exc) from None
            replies.append(reply)
            decided.append(batch[index])
            if index % READY_EVERY == READY_EVERY - 1 and ready():
                break
        prepared.last_seq = seq
        prepared.last_time = stamper.last_time
        prepared.manual_now = stamper.manual_now
        prepared.advanced = stamper.advanced

    def _prepare_records(self, prepared: _Prepared, journal: Journal) -> None:
        """Each record the journal names, encoded once, with the columns the reads filter on."""
        tasks, hosts = self.state.tasks, self.state.hosts
        prepared.tasks = [task_row(tasks[task_id]) for task_id in journal.tasks]
        prepared.hosts = [(host_id, codec.encode_host(hosts[host_id])) for host_id in journal.hosts]

    # --- committing ----------------------------------------------------------------------------

    def _send_decided(self) -> None:
        """When the connection is free, send every batch decided meanwhile as one commit."""
        inflight = self._inflight
        if inflight is not None:
            if not inflight.done():
                return
            self._inflight = None
            if inflight.exception() is not None:  # a bug in this module: end the term rather than guess
                log.error("the store writer failed on a commit", exc_info=inflight.exception())
                self._end(inflight.exception())  # type: ignore[arg-type]
        if not self._decided:
            return
        group, self._decided = self._decided, []
        if self.lost is not None:
            release([(work, None, NotLeader(self._why())) for prepared in group for work in prepared.batch])
            return
        assert self._loop is not None and self._wake is not None
        self._inflight = self._loop.create_task(self._commit_group(group))
        self._inflight.add_done_callback(lambda _: self._wake.set())  # type: ignore[union-attr]

    async def _settle_all(self) -> None:
        """Commit (or fail) everything decided so far, and wait for it."""
        while self._inflight is not None or self._decided:
            if self._inflight is not None:
                await asyncio.wait([self._inflight])
            self._send_decided()

    async def _commit_group(self, group: list[_Prepared]) -> None:
        """Commit batches decided one after another, in one statement, then answer their
        callers in order. Replies wait for the commit even when their batch wrote nothing:
        a refusal may rest on an earlier batch's uncommitted decision."""
        started = time.perf_counter()
        written = [prepared for prepared in group if not prepared.empty]
        try:
            if written:
                await self._commits.execute(self._params(_merged(written)))
        except BaseException as exc:
            if isinstance(exc, psycopg.errors.DivisionByZero):
                exc = self._deposed()
            self._end(exc)
            release([(work, None, NotLeader(self._why())) for prepared in group for work in prepared.batch])
            return
        advanced = sum(prepared.advanced for prepared in group)
        if advanced:
            assert isinstance(self.clock, ManualClock)
            self.clock.advance(advanced)
        self.next_expiry = group[-1].next_expiry  # the state each batch left is committed now
        release([outcome for prepared in group for outcome in zip(prepared.batch, prepared.replies, _no_errors)])
        for prepared in group:
            if self.changes is not None and prepared.change is not None:
                self.changes.publish(prepared.change)
        if self.on_commit is not None and written:
            try:
                self.on_commit(sum(len(prepared.batch) for prepared in group), time.perf_counter() - started)
            except Exception:
                log.exception("on_commit failed")

    def _params(self, prepared: _Prepared) -> list[Any]:
        return [
            arrays.int8(self.epoch),
            *_columns(prepared.events, EVENT_COLUMNS),
            *_columns(prepared.tasks, TASK_COLUMNS),
            *_columns(prepared.hosts, HOST_COLUMNS),
            *_columns(prepared.meta, META_COLUMNS),
        ]

    def _deposed(self) -> Deposed:
        return Deposed(f"the leadership epoch is no longer {self.epoch}: another server leads")

    def _end(self, why: BaseException) -> None:
        if isinstance(why, Deposed):
            log.warning("deposed: %s", why)
        else:
            log.error("ending the term of epoch %d: %r", self.epoch, why)
        self.lose(why)
        if self.on_lost is not None:
            self.on_lost(self.epoch)


_no_errors = itertools.repeat(None)


# How each column of a table's rows is sent (in the order of COMMIT_BATCH's arrays).
EVENT_COLUMNS = (arrays.int8_array, arrays.int8_array, arrays.bytea_array)
TASK_COLUMNS = (
    arrays.int8_array,
    arrays.text_array,
    arrays.text_array,
    arrays.text_array,
    arrays.int8_array,
    arrays.bytea_array,
)
HOST_COLUMNS = (arrays.text_array, arrays.bytea_array)
META_COLUMNS = (arrays.text_array, arrays.text_array)


def _columns(rows: list[tuple], encoders: tuple[Callable[[Any], bytes], ...]) -> list[bytes]:
    """Rows as columns, each encoded as the array that COMMIT_BATCH unnests."""
    columns = list(zip(*rows)) if rows else [()] * len(encoders)
    return [encode(column) for encode, column in zip(encoders, columns)]


def task_row(task: Task) -> tuple[int, str, str, str, int | None, bytes]:
    """The row of `amc_tasks` that holds `task` (shared with `amc store migrate`)."""
    attempt = task.active_attempt
    expires = None if attempt is None else attempt.lease_expires_at
    return (task.seq, task.id, task.tenant, str(task.status), expires, codec.encode_task(task))
