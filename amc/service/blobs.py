"""Artifact bytes: the `BlobStore` port, streaming into and out of one, and `MemoryBlobStore`.

The kernel keeps an artifact's metadata (task, attempt, step, name, sha256, size); the
bytes live in a `BlobStore`, addressed by their sha256. The two commit separately, in a
fixed order, so that a crash can only ever leave bytes nobody refers to, never a record
pointing at bytes that are not there:

    stored = await store_chunks(blobs, request.stream(), limit)   # durable on return
    decision = await service.execute(<record artifact, stored.sha256, stored.size>)
    reply 201 / 200 / 409 from the decision

A refusal after `store_chunks` (stale lease, name conflict, a crash before the commit)
leaves an unreferenced blob; `BlobStore.gc` removes it later. Identical bytes are stored
once, so two artifacts may share a blob and a blob is garbage only when no record names it.
The limit an upload gets is the smaller of the per-artifact limit and what is left of its
task's; `BlobTooLarge.limit` is that number, so the caller knows which limit it was.
`gc(referenced)` and `verify(referenced)` take the sha256 of every artifact record.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import threading
import time
from collections.abc import AsyncIterable, AsyncIterator, Collection, Iterator
from typing import Protocol, Self

import attrs


@attrs.frozen
class StoredBlob:
    sha256: str  # 64 lowercase hex digits
    size: int


@attrs.frozen
class BlobProblem:
    sha256: str
    kind: str  # "missing" or "corrupt"
    detail: str


@attrs.frozen
class GcReport:
    """What `BlobStore.gc` removed, or with `dry_run` would remove."""

    dry_run: bool
    blobs: int  # unreferenced blobs
    blob_bytes: int
    temporaries: int  # leftovers of uploads that never finished
    temporary_bytes: int

    @property
    def bytes_freed(self) -> int:
        return self.blob_bytes + self.temporary_bytes


class BlobError(Exception):
    """The base of the errors a `BlobStore` raises on purpose."""


class BlobTooLarge(BlobError):
    """An upload passed its byte limit; the writer has already thrown its bytes away."""

    def __init__(self, limit: int):
        super().__init__(f"more than {limit} bytes")
        self.limit = limit


class BlobMismatch(BlobError):
    """The bytes uploaded do not hash to the sha256 the caller named; nothing was kept."""

    def __init__(self, expected: str, actual: str):
        super().__init__(f"the bytes hash to {actual}, not {expected}")
        self.expected = expected
        self.actual = actual


class BlobNotFound(BlobError, LookupError):
    """No blob with this sha256 is stored."""

    def __init__(self, sha256: str):
        super().__init__(f"no blob {sha256}")
        self.sha256 = sha256


class BlobWriter(Protocol):
    """One upload in progress. Every method blocks (file IO, fsync): from async code call it
    in a thread, or use `store_chunks`, which does.

    Use it as a context manager: leaving the block without `finish()` aborts.
    """

    @property
    def size(self) -> int:
        """The bytes written so far."""

    def write(self, chunk: bytes) -> None:
        """Append `chunk` and hash it. When the total would pass the limit, abort (nothing of
        this upload stays behind) and raise `BlobTooLarge`; the chunk is not written.
        Raises `ValueError` once the writer has finished or aborted."""

    def digest(self) -> str:
        """The sha256 of the bytes written so far (64 lowercase hex digits)."""

    def finish(self) -> StoredBlob:
        """Make the bytes durable under their sha256 and return it with the size. When this
        returns, a crash of the process or the machine cannot lose the blob (until `gc`
        removes it for want of a reference). Storing bytes that are already stored is fine
        and yields the same blob."""

    def abort(self) -> None:
        """Throw away what was written. Idempotent; a no-op after `finish()`."""

    def __enter__(self) -> BlobWriter: ...

    def __exit__(self, *exc_info: object) -> None: ...


class BlobReader(Protocol):
    """One stored blob, open for reading; blocking like `BlobWriter` (see `read_chunks`).

    It reads the bytes as they were when opened, even if the blob is deleted meanwhile."""

    sha256: str
    size: int

    def read(self, n: int) -> bytes:
        """Up to `n` bytes; b"" at the end."""

    def seek(self, offset: int) -> None:
        """Read on from `offset` (0 <= offset <= size): a download that resumes."""

    def close(self) -> None: ...

    def __enter__(self) -> BlobReader: ...

    def __exit__(self, *exc_info: object) -> None: ...


class BlobStore(Protocol):
    """Artifact bytes by sha256, streamed in and out, never held whole in memory.

    Every method blocks: call them from a thread when on an event loop (`store_chunks` and
    `read_chunks` do this for the hot paths). A store is safe to use from many threads at
    once; one writer or reader serves one caller at a time. A sha256 argument must be 64
    lowercase hex digits (else `ValueError`).

    Implementations: `FileBlobStore` (`amc.adapters.lmdb.blobs`, files in the data directory)
    and `MemoryBlobStore` (below, the companion of `MemoryService`). A database keeps the same contract
    by holding an upload's chunks in a transaction that `finish()` commits (durable on
    return) and `abort()` rolls back; `tests/support/blob_contract.py` checks any of them.
    """

    def begin(self, limit: int | None = None) -> BlobWriter:
        """Start an upload of at most `limit` bytes (None: no limit)."""

    def open(self, sha256: str) -> BlobReader:
        """Raises `BlobNotFound`."""

    def size_of(self, sha256: str) -> int | None:
        """The blob's size, or None when it is not stored."""

    def check(self, sha256: str) -> BlobProblem | None:
        """Read the blob through and say whether it is missing or does not hash to `sha256`."""

    def verify(self, referenced: Collection[str]) -> list[BlobProblem]:
        """`check` every referenced blob; the problems, in the order of `referenced`."""

    def digests(self) -> Iterator[str]:
        """The sha256 of every stored blob, in no particular order."""

    def delete(self, sha256: str) -> bool:
        """Remove the blob; False when it was not there."""

    def gc(self, referenced: Collection[str], dry_run: bool = False, grace_s: float = 600.0) -> GcReport:
        """Remove every blob not in `referenced`, and the temporaries of unfinished uploads.

        Only what is older than `grace_s` seconds goes: a blob finished a moment ago whose
        metadata is about to commit is not garbage yet, and an upload in progress keeps its
        temporary. So commit an artifact's metadata promptly after `finish()` (well within
        `grace_s`), and compute `referenced` before calling. `dry_run` removes nothing and
        reports what would go."""


# How many bytes `store_chunks` gathers before one trip to a thread: a request body
# arrives in pieces of a few KiB to 64 KiB, and a thread hop per piece would cost more
# than the write. Bounds the memory of one upload in flight.
COALESCE_BYTES = 256 * 1024
READ_CHUNK_BYTES = 256 * 1024


async def store_chunks(
    blobs: BlobStore, chunks: AsyncIterable[bytes], limit: int | None, expected: str | None = None
) -> StoredBlob:
    """Stream `chunks` (e.g. Starlette's `request.stream()`) into `blobs`; durable on return.

    The file work runs in the event loop's default executor (`asyncio.to_thread`), never on
    the loop. Raises `BlobTooLarge` as soon as the bytes received pass `limit`, without
    reading the rest of the body, and `BlobMismatch` when `expected` is given and the bytes
    hash to another sha256; nothing of the upload is kept on any error.
    """
    writer = await asyncio.to_thread(blobs.begin, limit)
    try:
        pending: list[bytes] = []
        pending_bytes = 0
        async for chunk in chunks:
            pending.append(chunk)
            pending_bytes += len(chunk)
            if limit is not None and writer.size + pending_bytes > limit:
                raise BlobTooLarge(limit)
            if pending_bytes >= COALESCE_BYTES:
                await asyncio.to_thread(_write_all, writer, pending)
                pending, pending_bytes = [], 0
        await asyncio.to_thread(_write_all, writer, pending)
        if expected is not None and (actual := writer.digest()) != expected:
            raise BlobMismatch(expected, actual)
        return await asyncio.to_thread(writer.finish)
    except BaseException:
        await asyncio.shield(asyncio.to_thread(writer.abort))
        raise


def _write_all(writer: BlobWriter, chunks: list[bytes]) -> None:
    for chunk in chunks:  # one by one: joining them first would copy every byte once more
        writer.write(chunk)


async def read_chunks(reader: BlobReader, chunk_bytes: int = READ_CHUNK_BYTES) -> AsyncIterator[bytes]:
    """The bytes of `reader` in chunks, read in a thread; closes the reader at the end.

    Open the reader first (`await asyncio.to_thread(blobs.open, sha256)`), so that a missing
    blob is a 404 and `reader.size` gives the `Content-Length` before the body starts.
    """
    try:
        while chunk := await asyncio.to_thread(reader.read, chunk_bytes):
            yield chunk
    finally:
        await asyncio.to_thread(reader.close)


class MemoryBlobStore:
    """A `BlobStore` in a dict, the companion of `MemoryService`: tests and embedders, nothing durable.

    An upload gathers its chunks in memory until `finish()`; "temporaries" never outlive
    the process, so `gc` only ever removes blobs.
    """

    def __init__(self) -> None:
        self._blobs: dict[str, tuple[bytes, float]] = {}  # sha256 -> (bytes, when last stored)
        self._lock = threading.Lock()

    def begin(self, limit: int | None = None) -> _MemoryBlobWriter:
        return _MemoryBlobWriter(self, limit)

    def _put(self, data: bytes) -> StoredBlob:
        blob = StoredBlob(hashlib.sha256(data).hexdigest(), len(data))
        with self._lock:
            self._blobs[blob.sha256] = (data, time.time())
        return blob

    def open(self, sha256: str) -> _MemoryBlobReader:
        return _MemoryBlobReader(sha256, self._get(sha256))

    def size_of(self, sha256: str) -> int | None:
        found = self._blobs.get(checked_sha256(sha256))
        return None if found is None else len(found[0])

    def check(self, sha256: str) -> BlobProblem | None:
        found = self._blobs.get(checked_sha256(sha256))
        if found is None:
            return BlobProblem(sha256, "missing", "not in memory")
        actual = hashlib.sha256(found[0]).hexdigest()
        return None if actual == sha256 else BlobProblem(sha256, "corrupt", f"hashes to {actual}")

    def verify(self, referenced: Collection[str]) -> list[BlobProblem]:
        return [problem for sha256 in referenced if (problem := self.check(sha256)) is not None]

    def digests(self) -> Iterator[str]:
        with self._lock:
            return iter(list(self._blobs))

    def delete(self, sha256: str) -> bool:
        with self._lock:
            return self._blobs.pop(checked_sha256(sha256), None) is not None

    def gc(self, referenced: Collection[str], dry_run: bool = False, grace_s: float = 600.0) -> GcReport:
        keep, cutoff = set(referenced), time.time() - grace_s
        with self._lock:
            garbage = [h for h, (_, stored_at) in self._blobs.items() if h not in keep and stored_at < cutoff]
            freed = sum(len(self._blobs[h][0]) for h in garbage)
            if not dry_run:
                for sha256 in garbage:
                    del self._blobs[sha256]
        return GcReport(dry_run, len(garbage), freed, 0, 0)

    def _get(self, sha256: str) -> bytes:
        found = self._blobs.get(checked_sha256(sha256))
        if found is None:
            raise BlobNotFound(sha256)
        return found[0]


class Upload:
    """What every `BlobWriter` keeps alike: the bytes written so far against the upload's
    limit, and whether it is open, finished or aborted. A store's writer adds where the bytes
    go (`write` calls `_admit` first and `_count` after), and its own `finish` and `abort`."""

    def __init__(self, limit: int | None):
        self._limit = limit
        self._size = 0
        self._state = "open"

    @property
    def size(self) -> int:
        return self._size

    def abort(self) -> None:
        raise NotImplementedError

    def _admit(self, chunk: bytes) -> None:
        """Before `chunk` is written: refuse it once the upload is over; abort the upload and
        raise `BlobTooLarge` when the chunk would take it past its limit."""
        self._require_open()
        if self._limit is not None and self._size + len(chunk) > self._limit:
            self.abort()
            raise BlobTooLarge(self._limit)

    def _count(self, chunk: bytes) -> None:
        self._size += len(chunk)

    def _require_open(self) -> None:
        if self._state != "open":
            raise ValueError(f"this upload has already {self._state}")

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.abort()


class _MemoryBlobWriter(Upload):
    def __init__(self, store: MemoryBlobStore, limit: int | None):
        super().__init__(limit)
        self._store = store
        self._chunks: list[bytes] = []
        self._hash = hashlib.sha256()

    def write(self, chunk: bytes) -> None:
        self._admit(chunk)
        self._chunks.append(bytes(chunk))
        self._hash.update(chunk)
        self._count(chunk)

    def digest(self) -> str:
        return self._hash.hexdigest()

    def finish(self) -> StoredBlob:
        self._require_open()
        self._state = "finished"
        return self._store._put(b"".join(self._chunks))

    def abort(self) -> None:
        if self._state == "open":
            self._state, self._chunks = "aborted", []


class _MemoryBlobReader:
    def __init__(self, sha256: str, data: bytes):
        self.sha256, self.size = sha256, len(data)
        self._data, self._at = data, 0

    def read(self, n: int) -> bytes:
        chunk = self._data[self._at : self._at + n]
        self._at += len(chunk)
        return chunk

    def seek(self, offset: int) -> None:
        self._at = offset

    def close(self) -> None:
        self._data = b""

    def __enter__(self) -> _MemoryBlobReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


SHA256 = re.compile(r"[0-9a-f]{64}")  # how every blob store names a blob


def checked_sha256(sha256: str) -> str:
    """`sha256`, if it names a blob (64 lowercase hex digits); else `ValueError`."""
    if not SHA256.fullmatch(sha256):
        raise ValueError(f"not a sha256 (64 lowercase hex digits): {sha256!r}")
    return sha256
