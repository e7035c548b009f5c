"""How one leadership term makes decided batches durable: the commit back-end of its writer.

The writer (amc/adapters/writer.py; read its theory of operation first) decides the
batches; this module makes each group of them durable in ONE PostgreSQL transaction.

What differs from LMDB first is overlap. A PostgreSQL commit is a round trip to another
process, which works on the other core while this one waits; "decide, commit, decide the
next batch" would leave each side idle half the time. So a commit goes out on the writer's
event loop (commits.py) and the writer decides the next commands while it is on its way;
when its answer is in, everything decided meanwhile goes as the next commit (one
transaction, one WAL flush for all of it). Callers answered together come back together; to
keep them from forming one batch that alternates with its own commit, the writer, deciding
a batch, asks every few commands whether the connection is free (`send_early`) and if so
sends what it has decided so far, so two groups of callers settle in, one committing while
the other is decided.

The writer's state therefore runs ahead of what is committed, which is safe because nothing
of it is seen before its commit (the writer releases replies, the change feed and the next
lease expiry only after the commit that holds them), and reads go to the database. If a
commit fails the term ends (below), so no batch decided on top of the failed one is ever sent.

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
import logging
from collections.abc import Callable, Sequence
from typing import Any

import psycopg

from amc.adapters import codec
from amc.adapters.errors import Deposed
from amc.adapters.postgres import arrays, store
from amc.adapters.postgres.commits import CommitConnection
from amc.adapters.writer import Loaded
from amc.core.events import Event
from amc.core.records import Task
from amc.core.state import Journal, State
from amc.service import NotLeader

log = logging.getLogger("amc.store")

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


EventRow = tuple[int, int | None, bytes]  # seq, the seq of the task whose history shows it, body
TaskRow = tuple[int, str, str, str, int | None, bytes]  # seq, id, tenant, status, lease expiry, body
HostRow = tuple[str, bytes]
MetaRow = tuple[str, str]


class Rows:
    """What one batch (or several, merged) writes: each table's rows."""

    __slots__ = ("events", "tasks", "hosts", "meta")

    def __init__(self) -> None:
        self.events: list[EventRow] = []
        self.tasks: list[TaskRow] = []
        self.hosts: list[HostRow] = []
        self.meta: list[MetaRow] = []

    def event(self, seq: int, event: Event, shown_by: Task | None) -> None:
        self.events.append((seq, None if shown_by is None else shown_by.seq, codec.encode(event)))

    def records(self, journal: Journal, state: State) -> None:
        """Each record the journal names, encoded once, with the columns the reads filter on."""
        tasks, hosts = state.tasks, state.hosts
        self.tasks = [task_row(tasks[task_id]) for task_id in journal.tasks]
        self.hosts = [(host_id, codec.encode_host(hosts[host_id])) for host_id in journal.hosts]

    def clock(self, last_time: int, manual_now: int | None) -> None:
        self.meta.append(("last_time", str(last_time)))
        if manual_now is not None:
            self.meta.append(("manual_now", str(manual_now)))


def _merged(group: list[Rows]) -> Rows:
    """The writes of several batches decided one after another, as one transaction: every
    event, and each record as the last of them left it."""
    if len(group) == 1:
        return group[0]
    merged = Rows()
    tasks: dict[int, TaskRow] = {}
    hosts: dict[str, HostRow] = {}
    meta: dict[str, MetaRow] = {}
    for rows in group:
        merged.events.extend(rows.events)
        tasks.update((row[0], row) for row in rows.tasks)
        hosts.update((row[0], row) for row in rows.hosts)
        meta.update((row[0], row) for row in rows.meta)
    merged.tasks, merged.hosts, merged.meta = list(tasks.values()), list(hosts.values()), list(meta.values())
    return merged


class TermCommits:
    """The `CommitBackEnd` of the term of `epoch`: `conn` is its connection for loading,
    `commits` the one its commits travel on; it closes both when the writer ends."""

    def __init__(self, conn: psycopg.Connection, commits: psycopg.Connection, epoch: int):
        self.conn = conn
        self.epoch = epoch
        self._commits = CommitConnection(commits, COMMIT_BATCH, COMMIT_TYPES)
        self._inflight: asyncio.Task[None] | None = None  # the commit on the connection now

    def writes(self) -> Rows:
        return Rows()

    def load(self) -> Loaded:
        """The state, the next log sequence number and the clock floor, from one snapshot."""
        with self.conn.transaction():
            self.conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            state = store.load_state(self.conn)
            next_seq = store.last_seq(self.conn) + 1
            last_time = store.meta_int(self.conn, "last_time") or 0
        return Loaded(state, next_seq, last_time)

    def write_meta(self, items: list[MetaRow]) -> None:
        """Store metadata (where a manual clock starts) under the epoch check (before the writer starts)."""
        rows = Rows()
        rows.meta = items
        try:
            self._commits.execute_sync(self._params(rows))
        except psycopg.errors.DivisionByZero:
            raise self._deposed() from None

    def send_early(self) -> bool:
        """Whether a commit could be sent now: none is in flight, or its answer is here (a
        poll of the socket, for a writer that is busy deciding and has not yielded)."""
        inflight = self._inflight
        if inflight is None or inflight.done():
            return True
        return self._commits.answered()

    def commit(self, group: list[Rows]) -> asyncio.Future[None] | None:
        params = self._params(_merged(group))
        self._inflight = asyncio.get_running_loop().create_task(self._commits.execute(params))
        return self._inflight

    def failed(self, error: BaseException) -> BaseException:
        """Any failure ends the term: the epoch moved (the fence's division by zero), the
        connection died (the commit may even have happened), or PostgreSQL refused it."""
        if isinstance(error, psycopg.errors.DivisionByZero):
            deposed = self._deposed()
            log.warning("deposed: %s", deposed)
            raise deposed
        log.error("ending the term of epoch %d: %r", self.epoch, error)
        raise error

    def refusal(self, ended: BaseException | None) -> BaseException:
        if ended is None:
            return NotLeader("this server is stopping")
        return NotLeader(f"this server stopped leading (epoch {self.epoch}): {ended}")

    def close(self) -> None:
        self._commits.close()  # its transactions are over: this term commits nothing more
        try:
            self.conn.close()
        except psycopg.Error:
            pass

    def _params(self, rows: Rows) -> list[bytes]:
        return [
            arrays.int8(self.epoch),
            *_columns(rows.events, EVENT_COLUMNS),
            *_columns(rows.tasks, TASK_COLUMNS),
            *_columns(rows.hosts, HOST_COLUMNS),
            *_columns(rows.meta, META_COLUMNS),
        ]

    def _deposed(self) -> Deposed:
        return Deposed(f"the leadership epoch is no longer {self.epoch}: another server leads")


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


def _columns(rows: Sequence[tuple[Any, ...]], encoders: tuple[Callable[[Any], bytes], ...]) -> list[bytes]:
    """Rows as columns, each encoded as the array that COMMIT_BATCH unnests."""
    columns: list[tuple[Any, ...]] = list(zip(*rows)) if rows else [()] * len(encoders)
    return [encode(column) for encode, column in zip(encoders, columns)]


def task_row(task: Task) -> TaskRow:
    """The row of `amc_tasks` that holds `task` (shared with `amc store migrate`)."""
    attempt = task.active_attempt
    expires = None if attempt is None else attempt.lease_expires_at
    return (task.seq, task.id, task.tenant, str(task.status), expires, codec.encode_task(task))
