"""The store writer: one thread that owns the kernel state, decides commands in batches, and
answers their callers once a commit back-end has made them durable. The LMDB and the
PostgreSQL store run this same writer; each brings only its back-end (`CommitBackEnd`): how
a decided batch is written down (amc/adapters/lmdb/writer.py, amc/adapters/postgres/writer.py).

Theory of operation
===================

Callers, on any thread or event loop, put `Work` on a queue and wait for its future. The
writer thread takes everything waiting (up to `max_batch`): that is the batch. For each
item, in arrival order, it stamps the command with the clock and runs `kernel.execute` on
the in-memory state, which is the only place the state changes (`batches.Stamper`). A
rejected command is just a decision without events; it does not disturb the others.

What a batch writes. The writer opens the state's journal (`State.open_journal`) for the
batch: the kernel notes there each record it replaces. Events get consecutive sequence
numbers, and those that a task's history shows are linked to that task; at the end of the
batch each record the journal names is handed to the back-end once, however many events
touched it, with where the clock stands. The back-end gathers all of it in its own form
(`Writes`) and commits it in ONE transaction. A batch that produced no events (claims
that found nothing, rejections) writes nothing.

Nothing decided shows before its commit: replies (refusals too, which may rest on an earlier
batch's decision), the change feed (`Change`, built from the journal when the batch is
decided, so a listener that starts before the commit hears it) and the next lease expiry
are released after the commit that holds them, in decision order. So the state may run
ahead of what is durable, and a back-end may overlap deciding with committing: while a
commit is on its way (`CommitBackEnd.commit` answered with a future), the writer decides
what has queued meanwhile, and sends all of it as the next commit when the answer is in.
Every few commands it asks the back-end whether to stop and send what it has decided so
far (`send_early`), so that callers answered together do not come back together as one
batch that alternates with its own commit. A back-end whose commit blocks (LMDB: the fsync
releases the GIL, and callers queue the next batch meanwhile) answers at once, and never
asks to send early: group commit falls out of the queue, with no timer and no added
latency for a lone caller.

The thread runs an event loop of its own (for the back-ends whose commits travel on it);
with nothing on its way it simply blocks on the queue.

Failures, so that nothing is ever half-applied:

- the kernel (or encoding an event) raises on one command (`Poison`): that is a bug, and
  the state may be half-changed. That caller gets the exception at once; once everything
  decided before it has committed, the state is reloaded from what is committed and the
  rest of the batch is decided again.
- a commit fails: its callers, and those decided after it, fail with what the back-end
  says (`CommitBackEnd.failed`), and the state is reloaded; or the back-end ends the
  writer (it raises), and everything fails with its refusal (`CommitBackEnd.refusal`).
- reloading fails, or this module has a bug: the writer ends; the work it holds and all
  that comes later fails with the refusal.

The clock: commands are stamped in the order they run, so the times in the log never go
backwards, and the latest stamp is written with every batch (a store reopens its system
clock no earlier than that). A manual clock moves only here, inside a batch: its new
reading is written in the same transaction as the expiries it caused, and the clock is
advanced once that transaction is durable.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

from amc.adapters.batches import Outcome, Poison, Stamper, Work, release
from amc.core.events import Event, HostRegistered
from amc.core.history import HISTORY_TYPES
from amc.core.records import Task
from amc.core.state import Journal, State
from amc.service import Change, ChangeFeed, Clock, ManualClock

log = logging.getLogger("amc.store")

_STOP: Any = object()
# While deciding a batch, how often (in commands) the writer asks the back-end whether to
# send what it has decided so far (for PostgreSQL: a poll of its socket, a few microseconds).
READY_EVERY = 8


class Writes(Protocol):
    """What committing one batch writes, gathered by a back-end while the batch is decided."""

    def event(self, seq: int, event: Event, shown_by: Task | None) -> None:
        """The event numbered `seq`; `shown_by` is the task whose history shows it, if any."""

    def records(self, journal: Journal, state: State) -> None:
        """Each record `journal` names, as it stands in `state` (right after the batch)."""

    def clock(self, last_time: int, manual_now: int | None) -> None:
        """Where the clock stands after the batch (`manual_now`: None without a manual clock)."""


W = TypeVar("W", bound=Writes)


class Loaded(NamedTuple):
    """What is committed: the state, the next event's number, and the latest time stamped."""

    state: State
    next_seq: int
    last_time: int


class CommitBackEnd(Protocol[W]):
    """How decided batches become durable: the part of a writer that differs by store."""

    def writes(self) -> W:
        """Nothing yet: what the next batch is decided into."""

    def load(self) -> Loaded:
        """What is committed (only asked while nothing decided is uncommitted)."""

    def send_early(self) -> bool:
        """Whether to stop deciding the batch and send what is decided so far."""

    def commit(self, group: list[W]) -> asyncio.Future[None] | None:
        """Make the writes of batches decided one after another durable, in one transaction:
        now (None; raises if that failed), or on the writer's event loop (the commit's future)."""

    def failed(self, error: BaseException) -> BaseException:
        """A commit failed with `error`: what its callers get. Raises instead to end the writer."""

    def refusal(self, ended: BaseException | None) -> BaseException:
        """What work gets once the writer stopped (`ended` None), or ended because of `ended`."""

    def close(self) -> None:
        """The writer is done (called on its thread, with its event loop still running)."""


class Decided(Generic[W]):
    """One decided batch: its callers, their replies, what committing it writes (`writes`),
    and what the writer releases once that is durable."""

    __slots__ = ("batch", "replies", "writes", "written", "advanced", "change", "next_expiry")

    def __init__(self, writes: W) -> None:
        self.batch: list[Work] = []  # the callers decided, in order (a prefix of what was taken)
        self.replies: list[Any] = []
        self.writes = writes
        self.written = False  # whether it has anything to commit (events, or a clock advance)
        self.advanced = 0  # the manual clock's advances in it
        self.change: Change | None = None
        self.next_expiry: int | None = None  # the earliest deadline in the state it left


class Writer(Generic[W]):
    """The thread that owns the state and commits batches through `commits` (see the module
    docstring). Call `load`, then `start`; `stop` finishes what is queued."""

    def __init__(
        self,
        commits: CommitBackEnd[W],
        clock: Clock,
        changes: ChangeFeed,
        *,
        name: str,
        on_commit: Callable[[int, float], None] | None = None,
        on_lost: Callable[[], None] | None = None,
        max_batch: int = 512,
    ):
        self.commits = commits
        self.clock = clock
        self.manual = isinstance(clock, ManualClock)
        self.changes = changes  # told, after each commit, which records it changed
        self.on_commit = on_commit  # called as on_commit(commands, seconds) after each commit
        self.on_lost = on_lost  # called on the writer's thread when it ends itself
        self.max_batch = max_batch
        # The state as decided: ahead of what is committed by the batches on their way.
        self.state = State()
        self.next_seq = 1
        self.last_time = 0
        self.manual_now = 0
        # When the earliest committed deadline falls: set as each batch commits (from the
        # state its decision left), or on load; other threads read it.
        self.next_expiry: int | None = None
        self.lost: BaseException | None = None  # set once, never cleared: this writer commits no more
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._accepting = True
        self._submit_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        # Owned by the writer's thread and its event loop:
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sleeping = False  # the loop waits on `_wake` (read by `_put` to wake it)
        self._decided: list[Decided[W]] = []  # decided, waiting for the commit on its way
        self._inflight: tuple[asyncio.Future[None], list[Decided[W]], float] | None = None
        self._stopping = False

    # --- the callers' side -----------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def submit(self, work: Work) -> None:
        """Queue `work`; its future is resolved after the batch holding it committed."""
        with self._submit_lock:
            if not self._accepting:
                raise self.commits.refusal(self.lost)
            self._put(work)

    def stop(self) -> None:
        """Refuse new work, let the writer finish what is queued, and wait for it."""
        with self._submit_lock:
            if self._accepting:
                self._accepting = False
                self._put(_STOP)
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join()

    def lose(self, why: BaseException) -> None:
        """End the writer: refuse new work and fail what is queued; never commit again."""
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

    # --- loading ---------------------------------------------------------------------------

    def load(self) -> None:
        """The state, the next event number and the clock floor, from what is committed.
        Only while nothing decided is uncommitted (before `start`, or after `_settle_all`)."""
        self.state, self.next_seq, self.last_time = self.commits.load()
        self.manual_now = self.clock.now() if self.manual else 0
        self.next_expiry = self.state.next_deadline()

    def _reload(self) -> None:
        try:
            self.load()
        except BaseException as exc:
            log.exception("the store could not be reloaded; it takes no more commands")
            self._end(exc)

    # --- the writer's thread -----------------------------------------------------------------

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # a bug in this module: end rather than guess
            log.exception("the store writer failed")
            self._end(exc)
        self._fail_queued()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        first: Any = None
        try:
            while True:
                batch = self._take(first)
                first = None
                if batch:
                    try:
                        await self._process(batch)
                    except Exception as exc:  # a bug in this module: fail the batch, and end
                        log.exception("the store writer failed on a batch")
                        self._end(exc)
                        release([(work, None, self.commits.refusal(self.lost)) for work in batch])
                self._send_decided()
                if batch:
                    if self._inflight is not None:
                        await asyncio.sleep(0)  # the commit goes out; answers that came are read
                    continue
                if self._stopping and self._inflight is None and not self._decided:
                    break
                if self._inflight is None and not self._stopping:
                    first = self._queue.get()  # nothing on its way: only new work can come
                else:
                    await self._sleep()
        finally:
            self.commits.close()

    def _take(self, first: Any) -> list[Work]:
        """`first` (if any) and everything else waiting, up to `max_batch`."""
        batch: list[Work] = []
        work = first
        while len(batch) < self.max_batch:
            if work is None:
                try:
                    work = self._queue.get_nowait()
                except queue.Empty:
                    break
            if work is _STOP:
                self._stopping = True  # nothing is queued after it (`submit` refuses)
                break
            batch.append(work)
            work = None
        return batch

    async def _sleep(self) -> None:
        """Wait for work, or for the commit on its way to be answered."""
        assert self._wake is not None
        self._wake.clear()
        self._sleeping = True
        if self._queue.empty() and self._inflight is not None:
            await self._wake.wait()
        self._sleeping = False

    def _fail_queued(self) -> None:
        """Fail whatever callers still queued (the writer ended with work waiting)."""
        leftover: list[Outcome] = []
        while True:
            try:
                work = self._queue.get_nowait()
            except queue.Empty:
                break
            if work is not _STOP:
                leftover.append((work, None, self.commits.refusal(self.lost)))
        release(leftover)

    async def _process(self, batch: list[Work]) -> None:
        """Decide `batch`, sending what is decided whenever the back-end asks to (see the
        module docstring). A command that raised in the kernel gets its error at once
        (nothing of it is written), and the state is reloaded from what is committed, once
        everything decided before it is."""
        if self.lost is not None:
            release([(work, None, self.commits.refusal(self.lost)) for work in batch])
            return
        while batch:
            try:
                decided = self._decide(batch)
            except Poison as poison:
                log.error("command %r raised in the kernel", batch[poison.index].command, exc_info=poison.error)
                release([(batch[poison.index], None, poison.error)])
                del batch[poison.index]
                await self._settle_all()
                if self.lost is None:
                    self._reload()  # the state may hold part of the failed command
                if self.lost is not None:
                    release([(work, None, self.commits.refusal(self.lost)) for work in batch])
                    return
                continue
            self._decided.append(decided)
            batch = batch[len(decided.batch) :]
            if batch:  # stopped early: the commit on its way is answered, or about to be
                if self._inflight is not None:
                    await asyncio.wait([self._inflight[0]])
                self._send_decided()
                await asyncio.sleep(0)  # the next commit goes out before the rest is decided

    def _decide(self, batch: list[Work]) -> Decided[W]:
        """Decide `batch`, or as much of it as was decided when the back-end asked to send."""
        state = self.state
        decided = Decided(self.commits.writes())
        state.open_journal()
        try:
            self._run_batch(batch, decided)
        finally:
            journal = state.close_journal()
        if decided.written:
            decided.writes.records(journal, state)
            decided.writes.clock(self.last_time, self.manual_now if self.manual else None)
            # Built whether or not anyone listens now: one who starts before the commit hears it.
            decided.change = Change.of(journal, state)
        decided.next_expiry = state.next_deadline()
        return decided

    def _run_batch(self, batch: list[Work], decided: Decided[W]) -> None:
        """Each command through the kernel, its events numbered, linked and handed over."""
        tasks, replies, taken = self.state.tasks, decided.replies, decided.batch
        send_early, add, shown = self.commits.send_early, decided.writes.event, HISTORY_TYPES
        first_seq = seq = self.next_seq
        stamper = Stamper(self.clock.now, self.manual, self.last_time, self.manual_now)
        for index, reply, events in stamper.run(self.state, batch):
            try:
                for event in events:
                    # no history shows a host event
                    if type(event) in shown and not isinstance(event, HostRegistered):
                        add(seq, event, tasks[event.task_id])
                    else:
                        add(seq, event, None)
                    seq += 1
            except Exception as exc:
                raise Poison(index, exc) from None
            replies.append(reply)
            taken.append(batch[index])
            if index % READY_EVERY == READY_EVERY - 1 and send_early():
                break
        decided.advanced = stamper.advanced
        decided.written = seq != first_seq or stamper.advanced != 0
        if decided.written:
            self.next_seq = seq
            self.last_time = stamper.last_time
            self.manual_now = stamper.manual_now

    # --- committing ----------------------------------------------------------------------------

    def _send_decided(self) -> None:
        """When no commit is on its way, send every batch decided meanwhile as one commit."""
        if self._inflight is not None or not self._decided:
            return
        group, self._decided = self._decided, []
        if self.lost is not None:
            release([(work, None, self.commits.refusal(self.lost)) for decided in group for work in decided.batch])
            return
        started = time.perf_counter()
        written = [decided.writes for decided in group if decided.written]
        try:
            answer = self.commits.commit(written) if written else None
        except BaseException as exc:
            self._settle(group, started, exc)
            return
        if answer is None:
            self._settle(group, started, None)
        else:
            self._inflight = (answer, group, started)
            answer.add_done_callback(self._answered)

    def _answered(self, answer: asyncio.Future[None]) -> None:
        """The commit on its way is answered: release what it holds (on the writer's loop)."""
        assert self._inflight is not None and self._wake is not None
        _, group, started = self._inflight
        self._inflight = None
        error = asyncio.CancelledError() if answer.cancelled() else answer.exception()
        self._settle(group, started, error)
        self._wake.set()

    async def _settle_all(self) -> None:
        """Commit (or fail) everything decided so far, and wait for it."""
        while self._inflight is not None or self._decided:
            if self._inflight is not None:
                await asyncio.wait([self._inflight[0]])
            self._send_decided()

    def _settle(self, group: list[Decided[W]], started: float, error: BaseException | None) -> None:
        """Answer the callers of a commit, in order, once it is durable (or failed). Replies
        wait for the commit even when their batch wrote nothing: a refusal may rest on an
        earlier batch's uncommitted decision."""
        if error is not None:
            self._commit_failed(group, error)
            return
        advanced = sum(decided.advanced for decided in group)
        if advanced:
            assert isinstance(self.clock, ManualClock)  # only a manual clock is advanced
            self.clock.advance(advanced)
        self.next_expiry = group[-1].next_expiry  # the state each batch left is committed now
        release([outcome for decided in group for outcome in zip(decided.batch, decided.replies, _no_errors)])
        # After the replies are on their way: an edge that records something of the moment
        # with a reply (a renewal's progress) has done so before a watcher renders the change.
        for decided in group:
            if decided.change is not None:
                self.changes.publish(decided.change)
        if self.on_commit is not None and any(decided.written for decided in group):
            try:
                self.on_commit(sum(len(decided.batch) for decided in group), time.perf_counter() - started)
            except Exception:
                log.exception("on_commit failed")

    def _commit_failed(self, group: list[Decided[W]], error: BaseException) -> None:
        """Fail the commit's callers, and those decided after it (their decisions rest on it),
        and carry on from what is committed, or end when the back-end says so."""
        failed = group + self._decided
        self._decided = []
        try:
            failure = self.commits.failed(error)
        except BaseException as end:
            self._end(end)
            failure = self.commits.refusal(self.lost)
        else:
            self._reload()  # before the callers hear: the state no longer holds their commands
        release([(work, None, failure) for decided in failed for work in decided.batch])

    def _end(self, why: BaseException) -> None:
        self.lose(why)
        if self.on_lost is not None:
            self.on_lost()


_no_errors = itertools.repeat(None)
