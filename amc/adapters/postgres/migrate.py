"""Copying a store into an empty PostgreSQL database (`amc store migrate`).

The source hands over what it keeps as it keeps it: the log's encoded events by sequence
number, the encoded task and host records, the clock's metadata, the artifact and input blobs, and the input records.
The values are the bytes of the one codec both stores use (`amc.adapters.codec`), so they
are copied unchanged; the columns beside them (a task's id, tenant, status, lease expiry,
an event's history link) are derived here, exactly as the writer derives them.

All of it is one transaction (COPY for the log and the records), taken while holding the
leader lock: no server can lead the database while it is being filled, a failure leaves
the database as it was, and a database that already holds a store is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

import attrs

from amc.adapters import codec
from amc.adapters.errors import NotAStore
from amc.adapters.postgres import schema, store
from amc.adapters.postgres.blobs import CHUNK_BYTES, RECORD_BLOB
from amc.adapters.postgres.leadership import LEADER_LOCK
from amc.adapters.postgres.writer import task_row
from amc.core.events import HostRegistered
from amc.core.history import HISTORY_TYPES
from amc.service import BlobReader, StoredInput


class Source(Protocol):
    def events(self) -> Iterable[tuple[int, bytes]]: ...

    def tasks(self) -> Iterable[bytes]: ...

    def hosts(self) -> Iterable[bytes]: ...

    def meta(self) -> dict[str, int]:
        """`last_time` and, when a manual clock ran, `manual_now`."""

    def blobs(self) -> Iterable[str]:
        """The sha256 of every stored blob."""

    def open_blob(self, sha256: str) -> BlobReader: ...

    def inputs(self) -> Iterable[StoredInput]:
        """The records of inputs (their bytes are among `blobs`)."""


@attrs.define
class Copied:
    events: int = 0
    tasks: int = 0
    hosts: int = 0
    blobs: int = 0
    blob_bytes: int = 0
    inputs: int = 0


def copy_in(url: str, source: Source, progress: Callable[[str], None] = lambda line: None) -> Copied:
    copied = Copied()
    with store.connect(url) as conn:
        schema.open_schema(conn)
        row = conn.execute("SELECT pg_try_advisory_lock(%s)", (LEADER_LOCK,)).fetchone()
        if not (row and row[0]):
            raise NotAStore("a server leads this database: stop every server on it before migrating into it")
        with conn.transaction():
            counts = conn.execute(
                "SELECT (SELECT count(*) FROM amc_events) + (SELECT count(*) FROM amc_tasks) "
                "+ (SELECT count(*) FROM amc_hosts) + (SELECT count(*) FROM amc_blobs)"
            ).fetchone()
            if counts and counts[0]:
                raise NotAStore("the database already holds an amc store; migrate into an empty database")
            task_seq: dict[str, int] = {}
            with conn.cursor().copy(
                "COPY amc_tasks (seq, id, tenant, status, lease_expires_at, body) FROM STDIN"
            ) as copy:
                for body in source.tasks():
                    task = codec.decode_task(body)
                    row_values = task_row(task)
                    copy.write_row((*row_values[:5], body))  # the source's bytes, unchanged
                    task_seq[task.id] = task.seq
                    copied.tasks += 1
            progress(f"{copied.tasks} tasks")
            with conn.cursor().copy("COPY amc_hosts (id, body) FROM STDIN") as copy:
                for body in source.hosts():
                    copy.write_row((codec.decode_host(body).id, body))
                    copied.hosts += 1
            with conn.cursor().copy("COPY amc_events (seq, task_seq, body) FROM STDIN") as copy:
                for seq, body in source.events():
                    event = codec.decode_event(body)
                    linked = None
                    if type(event) in HISTORY_TYPES and not isinstance(event, HostRegistered):
                        linked = task_seq.get(event.task_id)
                    copy.write_row((seq, linked, body))
                    copied.events += 1
            progress(f"{copied.events} events")
            for key, value in source.meta().items():
                conn.execute(
                    "INSERT INTO amc_meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (key, str(value)),
                )
            for sha256 in source.blobs():
                with source.open_blob(sha256) as reader:
                    conn.execute(RECORD_BLOB, (sha256, reader.size))
                    n = 0
                    while True:
                        chunk = _read_exactly(reader, CHUNK_BYTES)
                        if not chunk and n > 0:
                            break
                        conn.execute(
                            "INSERT INTO amc_blob_chunks (blob, n, data) VALUES (%s, %s, %s)", (sha256, n, chunk)
                        )
                        n += 1
                        if len(chunk) < CHUNK_BYTES:
                            break
                    copied.blobs += 1
                    copied.blob_bytes += reader.size
            progress(f"{copied.blobs} artifact and input blobs")
            for found in source.inputs():
                conn.execute(
                    "INSERT INTO amc_inputs (tenant, sha256, size, created_at) VALUES (%s, %s, %s, %s)",
                    (found.tenant, found.sha256, found.size, found.created_at),
                )
                copied.inputs += 1
            progress(f"{copied.inputs} input records")
        conn.execute("SELECT pg_advisory_unlock(%s)", (LEADER_LOCK,))
    return copied


def _read_exactly(reader: BlobReader, size: int) -> bytes:
    parts, got = [], 0
    while got < size:
        part = reader.read(size - got)
        if not part:
            break
        parts.append(part)
        got += len(part)
    return b"".join(parts)
