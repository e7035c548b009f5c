"""`PostgresBlobStore`: artifact bytes in the database, as chunks of `bytea`.

With several servers on one database, whichever leads must read every artifact, so the
bytes live where the records live. Chunked `bytea` rows rather than large objects: rows are
ordinary data (in `pg_dump`, streaming replication, row-level access control and `DELETE`
like everything else), while large objects live in a catalog of their own that needs
`lo_unlink` or `vacuumlo` to reclaim, separate privileges, and dump options. Rather than a
directory shared by the servers: one store to back up and replicate, and no network file
system whose fsync semantics the "durable on return" promise would depend on.

An upload is one transaction. Its chunks (`CHUNK_BYTES` each, the last shorter) are written
under a key of its own that no other transaction sees; `finish()` records the blob and moves
the chunks under its sha256, or, when the same bytes are already stored, keeps the stored
ones (and their fresh `stored_at` protects them from `gc` as a repeated file's mtime does),
and commits. `abort()` rolls back. So there are never temporaries to collect: a crash, a
refusal or a dropped connection leaves nothing behind. A reader reads in a REPEATABLE READ
transaction of its own: it sees the blob as it was when opened, even if `gc` deletes it.

Every method blocks; the pool bounds how many uploads and downloads hold a connection at once.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Collection, Iterator

import psycopg
from psycopg_pool import ConnectionPool

from amc.adapters.postgres import store
from amc.service import BlobNotFound, BlobProblem, GcReport, StoredBlob, Upload, checked_sha256

CHUNK_BYTES = 256 * 1024
POOL_SIZE = 16

RECORD_BLOB = (
    "INSERT INTO amc_blobs (sha256, size) VALUES (%s, %s) "
    "ON CONFLICT (sha256) DO UPDATE SET stored_at = now() RETURNING (xmax = 0)"
)


class PostgresBlobStore:
    """The `amc.service.BlobStore` of the PostgreSQL store (see the module docstring)."""

    def __init__(self, url: str, pool_size: int = POOL_SIZE):
        self._pool = store.autocommit_pool(url, pool_size, "amc-blobs")

    def close(self) -> None:
        self._pool.close()

    def begin(self, limit: int | None = None) -> _Upload:
        return _Upload(self._pool, limit)

    def open(self, sha256: str) -> _Reader:
        digest = checked_sha256(sha256)
        conn = self._pool.getconn()
        try:
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            row = conn.execute("SELECT size FROM amc_blobs WHERE sha256 = %s", (digest,)).fetchone()
            if row is None:
                raise BlobNotFound(sha256)
        except BaseException:
            conn.rollback()
            self._pool.putconn(conn)
            raise
        return _Reader(self._pool, conn, digest, int(row[0]))

    def size_of(self, sha256: str) -> int | None:
        digest = checked_sha256(sha256)
        with self._pool.connection() as conn:
            row = conn.execute("SELECT size FROM amc_blobs WHERE sha256 = %s", (digest,)).fetchone()
        return None if row is None else int(row[0])

    def check(self, sha256: str) -> BlobProblem | None:
        try:
            reader = self.open(sha256)
        except BlobNotFound:
            return BlobProblem(sha256, "missing", "no row in amc_blobs")
        hasher, size = hashlib.sha256(), 0
        with reader:
            while chunk := reader.read(CHUNK_BYTES):
                hasher.update(chunk)
                size += len(chunk)
        if size != reader.size:
            return BlobProblem(sha256, "corrupt", f"{size} bytes in its chunks, {reader.size} recorded")
        actual = hasher.hexdigest()
        return None if actual == sha256 else BlobProblem(sha256, "corrupt", f"hashes to {actual}")

    def verify(self, referenced: Collection[str]) -> list[BlobProblem]:
        return [problem for sha256 in referenced if (problem := self.check(sha256)) is not None]

    def digests(self) -> Iterator[str]:
        with self._pool.connection() as conn:
            return iter([sha256 for (sha256,) in conn.execute("SELECT sha256 FROM amc_blobs")])

    def delete(self, sha256: str) -> bool:
        digest = checked_sha256(sha256)
        with self._pool.connection() as conn, conn.transaction():
            conn.execute("DELETE FROM amc_blob_chunks WHERE blob = %s", (digest,))
            return conn.execute("DELETE FROM amc_blobs WHERE sha256 = %s", (digest,)).rowcount > 0

    def gc(self, referenced: Collection[str], dry_run: bool = False, grace_s: float = 600.0) -> GcReport:
        keep = set(referenced)
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT sha256, size FROM amc_blobs WHERE stored_at < now() - make_interval(secs => %s)",
                (float(grace_s),),
            ).fetchall()
        garbage = [(sha256, int(size)) for sha256, size in rows if sha256 not in keep]
        freed = 0
        for sha256, size in garbage:
            if dry_run or self._delete_if_old(sha256, grace_s):
                freed += size
        return GcReport(dry_run, len(garbage), freed, 0, 0)

    def _delete_if_old(self, sha256: str, grace_s: float) -> bool:
        """Delete a blob that is still older than the grace (not stored again meanwhile)."""
        with self._pool.connection() as conn, conn.transaction():
            gone = conn.execute(
                "DELETE FROM amc_blobs WHERE sha256 = %s AND stored_at < now() - make_interval(secs => %s)",
                (sha256, float(grace_s)),
            ).rowcount
            if gone:
                conn.execute("DELETE FROM amc_blob_chunks WHERE blob = %s", (sha256,))
            return gone > 0


class _Upload(Upload):
    def __init__(self, pool: ConnectionPool, limit: int | None):
        super().__init__(limit)
        self._pool = pool
        self._conn: psycopg.Connection | None = pool.getconn()
        self._conn.execute("BEGIN")
        self._key = "upload:" + secrets.token_hex(16)
        self._hasher = hashlib.sha256()
        self._pending = bytearray()
        self._chunks = 0

    def write(self, chunk: bytes) -> None:
        self._admit(chunk)
        self._hasher.update(chunk)
        self._pending += chunk
        self._count(chunk)
        while len(self._pending) >= CHUNK_BYTES:
            self._flush(bytes(self._pending[:CHUNK_BYTES]))
            del self._pending[:CHUNK_BYTES]

    def digest(self) -> str:
        return self._hasher.hexdigest()

    def _flush(self, data: bytes) -> None:
        assert self._conn is not None
        self._conn.execute(
            "INSERT INTO amc_blob_chunks (blob, n, data) VALUES (%s, %s, %s)", (self._key, self._chunks, data)
        )
        self._chunks += 1

    def finish(self) -> StoredBlob:
        self._require_open()
        conn = self._conn
        assert conn is not None
        try:
            if self._pending or self._chunks == 0:
                self._flush(bytes(self._pending))  # an empty blob is one empty chunk
                self._pending.clear()
            blob = StoredBlob(self._hasher.hexdigest(), self._size)
            row = conn.execute(RECORD_BLOB, (blob.sha256, blob.size)).fetchone()
            if row is not None and row[0]:
                conn.execute("UPDATE amc_blob_chunks SET blob = %s WHERE blob = %s", (blob.sha256, self._key))
            else:  # the same bytes are stored already: keep those, with a fresh stored_at
                conn.execute("DELETE FROM amc_blob_chunks WHERE blob = %s", (self._key,))
            conn.execute("COMMIT")  # durable on return: the WAL is flushed at commit
        except BaseException:
            self.abort()
            raise
        self._state = "finished"
        self._release()
        return blob

    def abort(self) -> None:
        if self._state != "open":
            return
        self._state = "aborted"
        if self._conn is not None:
            try:
                self._conn.execute("ROLLBACK")
            except psycopg.Error:
                pass
        self._release()

    def _release(self) -> None:
        if self._conn is not None:
            self._pool.putconn(self._conn)
            self._conn = None


class _Reader:
    def __init__(self, pool: ConnectionPool, conn: psycopg.Connection, sha256: str, size: int):
        self.sha256, self.size = sha256, size
        self._pool = pool
        self._conn: psycopg.Connection | None = conn
        self._next = 0
        self._buffer = b""
        self._at = 0
        self._skip = 0  # where to start in the next chunk fetched (after a `seek`)
        self._done = size == 0

    def read(self, n: int) -> bytes:
        if self._at >= len(self._buffer):
            if self._done or self._conn is None:
                return b""
            row = self._conn.execute(
                "SELECT data FROM amc_blob_chunks WHERE blob = %s AND n = %s", (self.sha256, self._next)
            ).fetchone()
            if row is None:
                self._done = True
                return b""
            self._buffer, self._at, self._skip = bytes(row[0]), self._skip, 0
            self._next += 1
        chunk = self._buffer[self._at : self._at + n]
        self._at += len(chunk)
        return chunk

    def seek(self, offset: int) -> None:
        # Every chunk but the last holds CHUNK_BYTES: the offset names its chunk directly.
        self._next, self._skip = divmod(offset, CHUNK_BYTES)
        self._buffer, self._at = b"", 0
        self._done = offset >= self.size

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.execute("ROLLBACK")
            except psycopg.Error:
                pass
            self._pool.putconn(self._conn)
            self._conn = None

    def __enter__(self) -> _Reader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
