"""How the LMDB store makes a decided batch durable: the commit back-end of its writer.

The writer (amc/adapters/writer.py; read its theory of operation first) decides the
batches; this module turns each into ONE LMDB write transaction, committed with one fsync.
While the writer waits for the fsync (LMDB releases the GIL), callers keep queueing the
next batch: the commit blocks the writer's thread, so it never sends part of a batch early.

What goes into the transaction. Events get their log sequence number as key, and those
that a task's history shows also get a `history` entry. Each record the batch's journal
names is encoded once, however many events touched it, and its index entries (listing,
queue, leases) are diffed between the value it held before the batch and its current one,
so an unchanged index entry costs nothing.

Failures: a commit that fails (disk full, IO error) was aborted; its callers get
`CommitFailed`, and the writer reloads the state from disk and carries on. When the map is
full, `Store.write` grows it and retries the same prepared writes; callers never see it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import lmdb

from amc.adapters.errors import CommitFailed, StoreClosed, StoreError
from amc.adapters.lmdb import layout
from amc.adapters.lmdb.store import Store
from amc.adapters.writer import Loaded, Writer
from amc.core.events import Event
from amc.core.lifecycle import TaskStatus
from amc.core.records import Task
from amc.core.state import Journal, State
from amc.service import ChangeFeed, Clock

log = logging.getLogger("amc.store")

Items = list[tuple[bytes, bytes]]


class LmdbWrites:
    """What one batch writes: its log and history entries, records, index entries and meta."""

    __slots__ = ("store", "log_items", "history_items", "deletes", "puts", "meta")

    def __init__(self, store: Store) -> None:
        self.store = store
        self.log_items: Items = []
        self.history_items: Items = []
        self.deletes: list[tuple[lmdb._Database, bytes]] = []  # (database, key)
        self.puts: dict[lmdb._Database, Items] = {}  # database -> its (key, value) items
        self.meta: Items = []

    def event(self, seq: int, event: Event, shown_by: Task | None) -> None:
        key = layout.u64(seq)
        self.log_items.append((key, layout.encode(event)))
        if shown_by is not None:
            self.history_items.append((layout.task_key(shown_by), key))

    def records(self, journal: Journal, state: State) -> None:
        """Encode each record the journal names once, and diff its index entries."""
        store, encode_task, encode_host, task_key = self.store, layout.encode_task, layout.encode_host, layout.task_key
        tasks, hosts = state.tasks, state.hosts
        deletes = self.deletes
        task_puts: Items = []
        task_id_puts: Items = []
        listing_puts: Items = []
        queue_puts: Items = []
        lease_puts: Items = []
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
        host_puts: Items = [(host_id.encode(), encode_host(hosts[host_id])) for host_id in journal.hosts]
        self.puts = {
            store.tasks: task_puts,
            store.task_ids: task_id_puts,
            store.hosts: host_puts,
            store.listing: listing_puts,
            store.queue: queue_puts,
            store.leases: lease_puts,
        }

    def clock(self, last_time: int, manual_now: int | None) -> None:
        self.meta.append((layout.META_LAST_TIME, layout.u64(last_time)))
        if manual_now is not None:
            self.meta.append((layout.META_MANUAL_NOW, layout.u64(manual_now)))


class LmdbCommits:
    """The LMDB store's `CommitBackEnd`: each group of batches in one write transaction of `store`."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def writes(self) -> LmdbWrites:
        return LmdbWrites(self.store)

    def load(self) -> Loaded:
        """The state, the next log sequence number and the clock floor, from disk."""
        store = self.store
        state = store.load_state()
        with store.read() as txn:
            next_seq = store.last_log_seq(txn) + 1
            raw = txn.get(layout.META_LAST_TIME, db=store.meta)
        return Loaded(state, next_seq, 0 if raw is None else layout.read_u64(raw))

    def send_early(self) -> bool:
        return False  # a commit blocks the thread: the whole batch goes in one transaction

    def commit(self, group: list[LmdbWrites]) -> asyncio.Future[None] | None:
        self.store.write(lambda txn: self._write(txn, group))
        return None

    def _write(self, txn: lmdb.Transaction[bytes], group: list[LmdbWrites]) -> None:
        """Apply the prepared writes in `txn` (repeatable: `Store.write` may retry it)."""
        store = self.store
        for writes in group:
            for db, key in writes.deletes:
                txn.delete(key, db=db)
            if writes.log_items:
                # append=True skips the B-tree search; a key that is not past the last one is
                # not written, which would mean a second writer: refuse the whole batch.
                _, added = txn.cursor(db=store.log).putmulti(writes.log_items, append=True)
                if added != len(writes.log_items):
                    raise StoreError(f"the event log of {store.path} has entries this writer did not expect")
            if writes.history_items:
                txn.cursor(db=store.history).putmulti(writes.history_items)
            for db, items in writes.puts.items():
                if items:
                    txn.cursor(db=db).putmulti(items)
            for key, value in writes.meta:
                txn.put(key, value, db=store.meta)

    def failed(self, error: BaseException) -> BaseException:
        log.error("a batch could not be committed", exc_info=error)
        failure = CommitFailed(f"the batch could not be committed to {self.store.path}: {error!r}")
        failure.__cause__ = error
        return failure

    def refusal(self, ended: BaseException | None) -> BaseException:
        if ended is None:
            return StoreClosed(f"the store in {self.store.path} is closed")
        return CommitFailed(f"the store in {self.store.path} failed and must be reopened: {ended!r}")

    def close(self) -> None:
        pass  # the store is the service's to close


def open_writer(
    store: Store, clock: Clock, *, on_commit: Callable[[int, float], None] | None, max_batch: int
) -> Writer[LmdbWrites]:
    """The writer of `store`, loaded from it (not yet started)."""
    writer = Writer(
        LmdbCommits(store),
        clock,
        ChangeFeed(),
        name=f"amc-store-writer:{store.path}",
        on_commit=on_commit,
        max_batch=max_batch,
    )
    writer.load()
    return writer
