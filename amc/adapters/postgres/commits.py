"""The writer's connection for commits: one prepared statement, sent through libpq itself.

The writer sends one statement, a few thousand times a second, with parameters it has
already encoded (arrays.py). psycopg's async `execute` would wrap each in a cursor, a
prepared-statement cache lookup, parameter adaptation and a wait that registers and
unregisters the socket with the event loop: a quarter of the writer's time per command.
So the statement is prepared once per term, and each commit is `PQsendQueryPrepared`
through psycopg's libpq wrapper (`psycopg.pq`), answered by one reader that watches the
socket for the whole term. The connection is an ordinary psycopg connection (made and
closed as every other); only its commits take this path, one at a time.
"""

from __future__ import annotations

import asyncio
import select
from collections.abc import Sequence

import psycopg
from psycopg import pq

STATEMENT = b"amc_commit"
_FINE = (pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK)


class CommitConnection:
    """`conn`, with `sql` (taking parameters of `types`, every one sent in binary) prepared."""

    def __init__(self, conn: psycopg.Connection, sql: str, types: Sequence[str]):
        conn.execute(f"PREPARE {STATEMENT.decode()} ({', '.join(types)}) AS {sql}")
        self.conn = conn
        self._pg = conn.pgconn
        self._fd = self._pg.socket  # kept: libpq forgets it when the connection drops
        self._poller = select.poll()  # not select.select: a busy server's descriptors pass 1024
        self._poller.register(self._fd, select.POLLIN)
        self._formats = [pq.Format.BINARY] * len(types)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._answer: asyncio.Future[None] | None = None  # of the commit in flight
        self._error: Exception | None = None  # the in-flight commit's error, once it arrives

    def execute_sync(self, params: Sequence[bytes]) -> None:
        """Commit, blocking (before the term's event loop runs)."""
        _raise_for(self._pg.exec_prepared(STATEMENT, params, self._formats))

    async def execute(self, params: Sequence[bytes]) -> None:
        """Commit: send, and wait for PostgreSQL's answer. Raises the psycopg error of a refusal
        (`psycopg.errors.DivisionByZero` for a failed fence) or of a lost connection."""
        if self._answer is not None:
            raise RuntimeError("a commit is already in flight")
        loop = self._listen()
        answer = self._answer = loop.create_future()  # before sending: the reader may run while it flushes
        self._error = None
        try:
            self._pg.send_query_prepared(STATEMENT, params, self._formats)
            while self._pg.flush():  # a large batch may not fit the socket's buffer at once
                await _writable(loop, self._fd)
            await answer
        finally:
            self._answer = None

    def answered(self) -> bool:
        """Whether the answer to the commit in flight has arrived (and waits to be read): a
        poll of the socket, for a writer that is busy deciding and has not yielded."""
        return bool(self._poller.poll(0))

    def close(self) -> None:
        """Close the connection (on the event loop it was used on, if any)."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(self._fd)
        self.conn.close()

    def _listen(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._pg.nonblocking = 1
            loop.add_reader(self._fd, self._readable)
            self._loop = loop
        return loop

    def _readable(self) -> None:
        answer = self._answer
        try:
            self._pg.consume_input()
        except psycopg.Error as exc:  # the connection is gone
            if answer is not None and not answer.done():
                answer.set_exception(exc)
            self._loop.remove_reader(self._fd)  # type: ignore[union-attr]
            return
        if answer is None:
            return  # nothing in flight: a notice, say; consumed above
        while not self._pg.is_busy():
            result = self._pg.get_result()
            if result is None:  # the statement's results are all in
                if not answer.done():
                    if self._error is None:
                        answer.set_result(None)
                    else:
                        answer.set_exception(self._error)
                return
            if result.status not in _FINE and self._error is None:
                self._error = _error_of(result)


def _raise_for(result: pq.abc.PGresult) -> None:
    if result.status not in _FINE:
        raise _error_of(result)


def _error_of(result: pq.abc.PGresult) -> Exception:
    sqlstate = result.error_field(pq.DiagnosticField.SQLSTATE)
    message = (result.error_message or b"the commit failed").decode(errors="replace").strip()
    if sqlstate is None:
        return psycopg.OperationalError(message)
    return psycopg.errors.lookup(sqlstate.decode())(message)


async def _writable(loop: asyncio.AbstractEventLoop, fd: int) -> None:
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_writer(fd, wake)
    try:
        await ready
    finally:
        loop.remove_writer(fd)
