"""The writer: one thread that owns the kernel state and commits commands in batches.

Theory of operation
===================

Callers, on any thread or event loop, put `Work` on a queue and wait for its future. The
writer thread takes the first item and then everything else already waiting (up to
`max_batch`): that is the batch. For each item, in arrival order, it stamps the command
with the clock and runs `kernel.execute` on the in-memory state, which is the only place
the state changes. A rejected command is just a decision without events; it does not
disturb the others. Then the batch's events, the records they changed and the index
entries that moved are written in ONE LMDB write transaction, committed with one fsync,
and only then are the callers' futures resolved and the service's watchers told which records
the batch changed (`ChangeFeed`, from the same journal). While the writer waits for the fsync
(LMDB releases the GIL), callers keep queueing the next batch: group commit falls out of
the queue, with no timer and no added latency for a lone caller.

What goes into the transaction. The writer opens the state's journal (`State.open_journal`)
for the batch: the kernel notes there each record it replaces, with the value the record
held before the batch. At the end of the batch, each record the journal names is encoded
once, however many events touched it, and its index entries (listing, queue, leases) are
diffed between that earlier and the current value, so an unchanged index entry costs
nothing. Events get consecutive log sequence numbers; those that a task's history shows
also get a `history` entry.

A batch that produced no events (claims that found nothing, rejections) has nothing to
make durable: its replies are released without a transaction. Every decision in it was
taken on a state whose changes were all committed before the batch began.

Failures, so that nothing is ever half-applied:

- the kernel (or encoding an event) raises on one command: that is a bug, and the state
  may be half-changed. Reload the state from disk, fail that caller with the exception,
  and run the rest of the batch again.
- the commit fails (disk full, IO error): the transaction was aborted. Reload the state
  from disk and fail every caller of the batch with `CommitFailed`.
- the map is full: `Store.write` grows it and retries the same prepared writes; callers
  never see it.

The clock: commands are stamped in the order they run, so the times in the log never go
backwards. The latest stamp is stored with every batch, and a store reopens its system
clock no earlier than that. A manual clock moves only here, inside a batch, and its new
reading is stored in the same transaction as the expiries it caused.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from amc.adapters.batches import Outcome, Poison, Stamper, Work, release
from amc.adapters.errors import CommitFailed, StoreClosed, StoreError
from amc.adapters.lmdb import layout
from amc.adapters.lmdb.store import Store
from amc.core.events import HostRegistered
from amc.core.history import HISTORY_TYPES
from amc.core.lifecycle import TaskStatus
from amc.core.state import Journal, State
from amc.service import Change, ChangeFeed, Clock, ManualClock

log = logging.getLogger("amc.store")

_STOP: Any = object()


class _Prepared:
    """A decided batch: the replies, and the writes that make it durable."""

    __slots__ = (
        "replies",
        "log_items",
        "history_items",
        "deletes",
        "puts",
        "meta",
        "last_seq",
        "last_time",
        "manual_now",
        "advanced",
        "journal",
    )

    def __init__(self) -> None:
        self.replies: list[Any] = []
        self.log_items: list[tuple[bytes, bytes]] = []
        self.history_items: list[tuple[bytes, bytes]] = []
        self.deletes: list[tuple[Any, bytes]] = []
        self.puts: dict[Any, list[tuple[bytes, bytes]]] = {}
        self.meta: list[tuple[bytes, bytes]] = []
        self.last_seq = 0
        self.last_time = 0
        self.manual_now = 0
        self.advanced = 0
        self.journal: Journal | None = None

    @property
    def empty(self) -> bool:
        return not self.log_items and not self.advanced


class Writer:
    """The thread that owns the state and commits batches (see the module docstring)."""

    def __init__(
        self,
        store: Store,
        clock: Clock,
        *,
        on_commit: Callable[[int, float], None] | None = None,
        max_batch: int = 512,
    ):
        self.store = store
        self.clock = clock
        self.manual = isinstance(clock, ManualClock)
        self.on_commit = on_commit
        self.changes = ChangeFeed()  # told, after each commit, which records it changed
        self.max_batch = max_batch
        self.state: State = State()
        self.next_seq = 1
        self.last_time = 0
        self._broken: BaseException | None = None
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._accepting = True
        self._submit_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"amc-store-writer:{store.path}", daemon=True)
        self._reload()

    # --- the callers' side -----------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def submit(self, work: Work) -> None:
        """Queue `work`; its future is resolved after the batch holding it committed."""
        with self._submit_lock:
            if not self._accepting:
                raise StoreClosed(f"the store in {self.store.path} is closed")
            self._queue.put(work)

    def stop(self) -> None:
        """Refuse new work, let the writer finish what is queued, and wait for it."""
        with self._submit_lock:
            if self._accepting:
                self._accepting = False
                self._queue.put(_STOP)
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join()

    # --- the writer thread -------------------------------------------------------------------

    def _run(self) -> None:
        take = self._queue.get
        take_waiting = self._queue.get_nowait
        while True:
            first = take()
            if first is _STOP:
                return
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
            except BaseException as exc:  # a bug in this module: fail the batch, keep serving
                log.exception("the store writer failed on a batch")
                release([(work, None, CommitFailed(f"internal store error: {exc!r}")) for work in batch])
                self._try_reload()
            if stop:
                return

    def _process(self, batch: list[Work]) -> None:
        started = time.perf_counter()
        if self._broken is not None:
            error = CommitFailed(f"the store in {self.store.path} failed and must be reopened: {self._broken!r}")
            release([(work, None, error) for work in batch])
            return
        outcomes: list[Outcome] = []
        while True:
            try:
                prepared = self._decide(batch)
                break
            except Poison as poison:
                # The state may hold part of the failed command: start over from disk.
                log.error("command %r raised in the kernel", batch[poison.index].command, exc_info=poison.error)
                outcomes.append((batch[poison.index], None, poison.error))
                del batch[poison.index]
                if not self._try_reload():
                    outcomes.extend((work, None, CommitFailed(repr(self._broken))) for work in batch)
                    release(outcomes)
                    return
        if not prepared.empty:
            try:
                self.store.write(lambda txn: self._write(txn, prepared))
            except BaseException as exc:
                log.exception("a batch of %d commands could not be committed", len(batch))
                failure = CommitFailed(f"the batch could not be committed to {self.store.path}: {exc!r}")
                failure.__cause__ = exc
                self._try_reload()
                outcomes.extend((work, None, failure) for work in batch)
                release(outcomes)
                return
            self.next_seq = prepared.last_seq + 1
            self.last_time = prepared.last_time
            if prepared.advanced:
                assert isinstance(self.clock, ManualClock)  # only a manual clock is advanced
                self.clock.advance(prepared.advanced)
        outcomes.extend((work, reply, None) for work, reply in zip(batch, prepared.replies))
        release(outcomes)
        # After the replies are on their way: an edge that records something of the moment
        # with a reply (a renewal's progress) has done so before a watcher renders the change.
        if prepared.journal is not None and not prepared.empty and self.changes.listening:
            self.changes.publish(Change.of(prepared.journal, self.state))
        if self.on_commit is not None and not prepared.empty:
            try:
                self.on_commit(len(batch), time.perf_counter() - started)
            except Exception:
                log.exception("on_commit failed")

    def _decide(self, batch: list[Work]) -> _Prepared:
        """Run the batch through the kernel and prepare its writes (no IO)."""
        state = self.state
        prepared = _Prepared()
        state.open_journal()
        try:
            self._run_batch(batch, prepared)
        finally:
            journal = prepared.journal = state.close_journal()
        if not prepared.empty:
            self._prepare_records(prepared, journal)
            prepared.meta.append((layout.META_LAST_TIME, layout.u64(prepared.last_time)))
            if self.manual:
                prepared.meta.append((layout.META_MANUAL_NOW, layout.u64(prepared.manual_now)))
        return prepared

    def _run_batch(self, batch: list[Work], prepared: _Prepared) -> None:
        """Each command of the batch through the kernel, its events encoded for the log."""
        tasks, replies = self.state.tasks, prepared.replies
        seq = self.next_seq - 1
        stamper = Stamper(self.clock.now, self.manual, self.last_time, self.clock.now() if self.manual else 0)
        log_items, history_items = prepared.log_items, prepared.history_items
        encode, u64, task_key, shown = layout.encode, layout.u64, layout.task_key, HISTORY_TYPES
        for index, reply, events in stamper.run(self.state, batch):
            try:
                for event in events:
                    seq += 1
                    key = u64(seq)
                    log_items.append((key, encode(event)))
                    if type(event) in shown and not isinstance(event, HostRegistered):  # no history shows a host event
                        history_items.append((task_key(tasks[event.task_id]), key))
            except Exception as exc:
                raise Poison(index, exc) from None
            replies.append(reply)
        prepared.last_seq = seq
        prepared.last_time = stamper.last_time
        prepared.manual_now = stamper.manual_now
        prepared.advanced = stamper.advanced

    def _prepare_records(self, prepared: _Prepared, journal: Journal) -> None:
        """Encode each record the journal names once, and diff its index entries."""
        store, encode_task, encode_host, task_key = self.store, layout.encode_task, layout.encode_host, layout.task_key
        tasks, hosts = self.state.tasks, self.state.hosts
        deletes = prepared.deletes
        task_puts: list = []
        task_id_puts: list = []
        listing_puts: list = []
        queue_puts: list = []
        lease_puts: list = []
        for task_id, old in journal.tasks.items():
            new = tasks[task_id]
            key = task_id.encode()
            task_puts.append((task_key(new), encode_task(new)))
            # listing: every task once per scope; only the status scopes ever move
            if old is None:
                task_id_puts.append((key, task_key(new)))
                listing_puts.extend((k, key) for k in layout.listing_keys(new))
            elif old.status != new.status:
                deletes.extend((store.listing, k) for k in layout.status_listing_keys(old))
                listing_puts.extend((k, key) for k in layout.status_listing_keys(new))
            # queue: queued tasks by priority, then age
            old_rank = layout.queue_key(old) if old is not None and old.status == TaskStatus.queued else None
            new_rank = layout.queue_key(new) if new.status == TaskStatus.queued else None
            if old_rank != new_rank:
                if old_rank is not None:
                    deletes.append((store.queue, old_rank))
                if new_rank is not None:
                    queue_puts.append((new_rank, key))
            # leases: active leases by expiry
            old_lease = layout.lease_of(old) if old is not None else None
            new_lease = layout.lease_of(new)
            if old_lease != new_lease:
                if old_lease is not None:
                    deletes.append((store.leases, old_lease[0]))
                if new_lease is not None:
                    lease_puts.append(new_lease)
        host_puts: list = []
        for host_id in journal.hosts:
            host_puts.append((host_id.encode(), encode_host(hosts[host_id])))
        prepared.puts = {
            store.tasks: task_puts,
            store.task_ids: task_id_puts,
            store.hosts: host_puts,
            store.listing: listing_puts,
            store.queue: queue_puts,
            store.leases: lease_puts,
        }

    def _write(self, txn, prepared: _Prepared) -> None:
        """Apply the prepared writes in `txn` (repeatable: `Store.write` may retry it)."""
        store = self.store
        for db, key in prepared.deletes:
            txn.delete(key, db=db)
        if prepared.log_items:
            # append=True skips the B-tree search; a key that is not past the last one is
            # not written, which would mean a second writer: refuse the whole batch.
            _, added = txn.cursor(db=store.log).putmulti(prepared.log_items, append=True)
            if added != len(prepared.log_items):
                raise StoreError(f"the event log of {store.path} has entries this writer did not expect")
        if prepared.history_items:
            txn.cursor(db=store.history).putmulti(prepared.history_items)
        for db, items in prepared.puts.items():
            if items:
                txn.cursor(db=db).putmulti(items)
        for key, value in prepared.meta:
            txn.put(key, value, db=store.meta)

    # --- loading ---------------------------------------------------------------------------

    def _reload(self) -> None:
        """Rebuild the state, the next log sequence number and the clock floor from disk."""
        self.state = self.store.load_state()
        with self.store.read() as txn:
            self.next_seq = self.store.last_log_seq(txn) + 1
            raw = txn.get(layout.META_LAST_TIME, db=self.store.meta)
        self.last_time = 0 if raw is None else layout.read_u64(raw)

    def _try_reload(self) -> bool:
        try:
            self._reload()
            return True
        except BaseException as exc:
            log.exception("the store could not be reloaded; refusing further commands")
            self._broken = exc
            return False
