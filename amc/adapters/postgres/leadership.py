"""Leadership: which of the servers on one database may write, and for how long.

A server leads while it holds a session advisory lock (`LEADER_LOCK`) on a connection of its
own, the lock connection. On taking the lock it bumps the epoch in `amc_leadership` and
starts a term: a fresh state loaded from the records and a writer that checks that epoch in
every transaction (writer.py). A standby tries the lock every `poll_s`.

Why an advisory lock and not a lease row that the leader renews: PostgreSQL drops the lock
the moment the session ends, and a killed leader's session ends as soon as its socket closes
(a SIGKILL closes it at once), so a standby takes over within one poll, without waiting out
a lease, and without comparing any clocks. The lock alone cannot see a leader that is alive
but stuck (paused by SIGSTOP, a VM migration, a partition that keeps the socket open): its
session would hold the lock for ever. Two server-side timeouts bound that, and PostgreSQL's
own clock measures both:

- `idle_session_timeout` on the lock connection: the leader sends a heartbeat every `poll_s`
  (which also reads the epoch); a leader silent for `lease_s` has its session ended by the
  server, which frees the lock;
- `idle_in_transaction_session_timeout` on the writer's connection: a transaction left open
  by a stuck leader holds the leadership row's share lock, which the new leader's epoch bump
  waits for; after `lease_s` the server ends that session and rolls the transaction back.

Neither timeout makes the stuck leader safe by itself: the epoch check does. When it wakes,
its heartbeat fails or its next transaction finds the epoch moved, and the term is over.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable

import psycopg

from amc.adapters.postgres import store

log = logging.getLogger("amc.store")

LEADER_LOCK = 0x616D_6300_0002  # "amc\0" 2: the session advisory lock of the leader
DEFAULT_POLL_S = 0.5
DEFAULT_LEASE_S = 5.0

BUMP_EPOCH = "UPDATE amc_leadership SET epoch = epoch + 1, leader = %s, elected_at = now() WHERE id = 1 RETURNING epoch"


def server_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class Leadership:
    """The thread that takes, keeps and gives up the leader lock.

    `elect(epoch)` is called (on this thread) when the lock was taken; it starts a term and
    raises if it cannot, which gives the lock up again. `depose(why)` is called when the
    term is over for a reason seen here (the heartbeat failed or found another epoch).
    """

    def __init__(
        self,
        url: str,
        elect: Callable[[int], None],
        depose: Callable[[BaseException], None],
        *,
        poll_s: float = DEFAULT_POLL_S,
        lease_s: float = DEFAULT_LEASE_S,
        name: str | None = None,
    ):
        self.url = url
        self.poll_s = poll_s
        self.lease_s = lease_s
        self.name = name or server_name()
        self.epoch: int | None = None  # the epoch of the term this server leads, or None
        self._elect = elect
        self._depose = depose
        self._conn: psycopg.Connection | None = None
        self._stop = threading.Event()
        self._mutex = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="amc-pg-leadership", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop trying, and give up the lock (closing the lock connection frees it)."""
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join()
        with self._mutex:
            self._close()

    def resign(self, epoch: int) -> None:
        """The term of `epoch` ended (its writer failed): give the lock up, if this server
        still holds it for that term, so that another server can lead; from the next poll
        on, try again like any standby."""
        with self._mutex:
            if self.epoch == epoch:
                self._close()

    def step(self) -> None:
        """One round: a standby tries the lock; a leader sends its heartbeat."""
        with self._mutex:
            try:
                if self.epoch is None:
                    self._try_lead()
                else:
                    self._heartbeat()
            except psycopg.Error as exc:
                self._lost(exc)

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                self.step()
            except Exception:
                log.exception("leadership: unexpected failure; trying again")

    def _lock_connection(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed:
            self._conn = store.connect(
                self.url, f"amc {self.name} leader lock", idle_session_timeout=f"'{round(self.lease_s * 1000)}ms'"
            )
        return self._conn

    def _try_lead(self) -> None:
        conn = self._lock_connection()
        row = conn.execute("SELECT pg_try_advisory_lock(%s)", (LEADER_LOCK,)).fetchone()
        if not (row and row[0]):
            return
        # The bump waits until every transaction that checked the old epoch has ended.
        bumped = conn.execute(BUMP_EPOCH, (self.name,)).fetchone()
        assert bumped is not None, "amc_leadership holds its one row from the start"
        epoch = int(bumped[0])
        try:
            self._elect(epoch)
        except BaseException:
            log.exception("leadership: elected with epoch %d but could not start; giving the lock up", epoch)
            self._close()
            raise
        self.epoch = epoch
        log.info("leading with epoch %d", epoch)

    def _heartbeat(self) -> None:
        conn = self._lock_connection()
        row = conn.execute("SELECT epoch FROM amc_leadership WHERE id = 1").fetchone()
        if row is None or row[0] != self.epoch:
            self._lost(RuntimeError(f"the epoch moved from {self.epoch} to {row and row[0]}"))

    def _lost(self, why: BaseException) -> None:
        was = self.epoch
        self._close()
        if was is not None:
            log.warning("lost the leadership of epoch %d: %s", was, why)
            self._depose(why)

    def _close(self) -> None:
        self.epoch = None
        if self._conn is not None:
            try:
                self._conn.close()
            except psycopg.Error:
                pass
            self._conn = None
