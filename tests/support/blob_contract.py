"""What every `BlobStore` must do, as tests: subclass `BlobStoreContract` to check a store.

    class TestMyBlobs(BlobStoreContract):
        @pytest.fixture
        def blobs(self, tmp_path):
            return MyBlobs(...)

        def damage(self, blobs, sha256):
            ...  # change the stored bytes behind the store's back, keeping the size

Only the port's promises are checked here (`amc.service.BlobStore`); what a store does on
disk (temporary files, crashes, memory use) is for its own tests.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
from concurrent.futures import ThreadPoolExecutor

import pytest

from amc.service import (
    BlobMismatch,
    BlobNotFound,
    BlobStore,
    BlobTooLarge,
    StoredBlob,
    read_chunks,
    store_chunks,
)

MIB = 1024 * 1024


def put(blobs: BlobStore, data: bytes, chunk: int = 65_536, limit: int | None = None) -> StoredBlob:
    with blobs.begin(limit) as writer:
        for at in range(0, len(data), chunk):
            writer.write(data[at : at + chunk])
        return writer.finish()


def read_all(blobs: BlobStore, sha256: str, chunk: int = 100_003) -> bytes:
    with blobs.open(sha256) as reader:
        parts = []
        while part := reader.read(chunk):
            parts.append(part)
    return b"".join(parts)


class BlobStoreContract:
    def damage(self, blobs: BlobStore, sha256: str) -> None:
        raise NotImplementedError

    @pytest.mark.parametrize(
        "size, chunk",
        [(0, 1), (1, 1), (1_000, 7), (65_536, 4_093), (3 * MIB + 7, 65_537), (5 * MIB, 1_000_003)],
    )
    def test_a_blob_reads_back_byte_for_byte_under_its_sha256(self, blobs, size, chunk):
        data = random.Random(size).randbytes(size)
        blob = put(blobs, data, chunk)
        assert (blob.sha256, blob.size) == (hashlib.sha256(data).hexdigest(), size)
        assert blobs.size_of(blob.sha256) == size
        with blobs.open(blob.sha256) as reader:
            assert (reader.sha256, reader.size) == (blob.sha256, size)
        assert read_all(blobs, blob.sha256) == data
        assert list(blobs.digests()) == [blob.sha256]
        assert blobs.check(blob.sha256) is None

    def test_the_limit_refuses_the_first_byte_over_it_and_keeps_nothing(self, blobs):
        assert put(blobs, b"x" * 100, chunk=30, limit=100).size == 100  # exactly the limit is fine
        assert blobs.delete(hashlib.sha256(b"x" * 100).hexdigest())
        writer = blobs.begin(limit=100)
        writer.write(b"y" * 60)
        assert writer.size == 60
        with pytest.raises(BlobTooLarge) as refused:
            writer.write(b"y" * 41)
        assert refused.value.limit == 100 and "100 bytes" in str(refused.value)
        with pytest.raises(ValueError):
            writer.write(b"y")
        with pytest.raises(ValueError):
            writer.finish()
        assert list(blobs.digests()) == []

    def test_store_chunks_stops_reading_at_the_limit_and_keeps_nothing(self, blobs):
        consumed = 0

        async def body():
            nonlocal consumed
            for _ in range(1_000):
                consumed += 1
                yield b"z" * 10_000

        with pytest.raises(BlobTooLarge):
            asyncio.run(store_chunks(blobs, body(), limit=25_000))
        assert consumed == 3  # refused on the chunk that passed the limit, not at the end
        assert list(blobs.digests()) == []

    def test_store_chunks_keeps_nothing_when_the_body_fails(self, blobs):
        async def body():
            yield b"a" * 300_000
            raise ConnectionResetError("client went away")

        with pytest.raises(ConnectionResetError):
            asyncio.run(store_chunks(blobs, body(), limit=None))
        assert list(blobs.digests()) == []

    def test_store_chunks_and_read_chunks_round_trip(self, blobs):
        data = os.urandom(700_001)

        async def body():
            for at in range(0, len(data), 3_001):
                yield data[at : at + 3_001]

        async def download(sha256: str) -> bytes:
            reader = await asyncio.to_thread(blobs.open, sha256)
            return b"".join([chunk async for chunk in read_chunks(reader, 65_536)])

        blob = asyncio.run(store_chunks(blobs, body(), limit=len(data)))
        assert blob == StoredBlob(hashlib.sha256(data).hexdigest(), len(data))
        assert asyncio.run(download(blob.sha256)) == data

    @pytest.mark.req("UPLOAD/s3")
    def test_bytes_that_do_not_hash_to_the_expected_sha256_keep_nothing(self, blobs):
        data = os.urandom(300_000)

        async def body():
            yield data

        with blobs.begin() as writer:
            writer.write(data[:1000])
            assert writer.digest() == hashlib.sha256(data[:1000]).hexdigest()  # so far, not consumed
            writer.write(data[1000:])
            assert writer.digest() == hashlib.sha256(data).hexdigest()
        with pytest.raises(BlobMismatch) as mismatch:
            asyncio.run(store_chunks(blobs, body(), None, expected="0" * 64))
        assert mismatch.value.actual == hashlib.sha256(data).hexdigest()
        assert list(blobs.digests()) == []
        stored = asyncio.run(store_chunks(blobs, body(), None, expected=hashlib.sha256(data).hexdigest()))
        assert stored.size == len(data)

    @pytest.mark.req("INPUT-CACHE/s2")
    @pytest.mark.parametrize("offset", [0, 1, 65_536, 262_144, 262_145, 699_999, 700_000])
    def test_a_reader_reads_on_from_any_offset(self, blobs, offset):
        data = os.urandom(700_000)
        blob = put(blobs, data)
        with blobs.open(blob.sha256) as reader:
            reader.seek(offset)
            got = b""
            while chunk := reader.read(100_003):
                got += chunk
        assert got == data[offset:]

    def test_a_writer_given_up_keeps_nothing_and_a_finished_one_ignores_abort(self, blobs):
        with blobs.begin() as writer:
            writer.write(b"half an upload")
        writer.abort()  # idempotent
        assert list(blobs.digests()) == []
        finished = blobs.begin()
        finished.write(b"done")
        blob = finished.finish()
        finished.abort()  # a no-op after finish
        assert read_all(blobs, blob.sha256) == b"done"

    def test_identical_bytes_are_one_blob(self, blobs):
        data = os.urandom(200_000)
        first = put(blobs, data, chunk=3_000)
        assert put(blobs, data, chunk=70_001) == first
        assert list(blobs.digests()) == [first.sha256]
        assert read_all(blobs, first.sha256) == data

    def test_threads_storing_the_same_and_different_bytes_at_once(self, blobs):
        shared = os.urandom(300_000)
        own = [os.urandom(100_000 + n) for n in range(8)]
        with ThreadPoolExecutor(8) as pool:
            same = list(pool.map(lambda n: put(blobs, shared, chunk=1_000 + n), range(8)))
            different = list(pool.map(lambda data: put(blobs, data, chunk=9_999), own))
        assert len(set(same)) == 1
        assert sorted(blobs.digests()) == sorted({same[0].sha256, *(b.sha256 for b in different)})
        assert blobs.verify(list(blobs.digests())) == []

    def test_an_unknown_blob_is_not_found_and_a_bad_digest_is_refused(self, blobs):
        missing = hashlib.sha256(b"never stored").hexdigest()
        with pytest.raises(BlobNotFound) as error:
            blobs.open(missing)
        assert error.value.sha256 == missing
        assert blobs.size_of(missing) is None
        assert blobs.delete(missing) is False
        for bad in ("../../etc/passwd", missing.upper(), missing[:-1], missing + "0"):
            with pytest.raises(ValueError):
                blobs.open(bad)

    def test_verify_finds_a_missing_and_a_corrupt_blob(self, blobs):
        good, damaged, deleted = (put(blobs, os.urandom(50_000 + n)) for n in range(3))
        self.damage(blobs, damaged.sha256)
        assert blobs.delete(deleted.sha256) is True
        problems = blobs.verify([good.sha256, damaged.sha256, deleted.sha256])
        assert [(p.sha256, p.kind) for p in problems] == [(damaged.sha256, "corrupt"), (deleted.sha256, "missing")]
        assert blobs.verify([good.sha256]) == []

    def test_gc_removes_exactly_the_unreferenced_blobs_and_a_dry_run_nothing(self, blobs):
        stored = [put(blobs, os.urandom(1_000 * (n + 1))) for n in range(6)]
        referenced = [b.sha256 for b in stored[::2]]
        orphans = stored[1::2]
        every = sorted(blobs.digests())

        dry = blobs.gc(referenced, dry_run=True, grace_s=0)
        assert sorted(blobs.digests()) == every
        assert (dry.dry_run, dry.blobs, dry.blob_bytes) == (True, 3, sum(b.size for b in orphans))

        young = blobs.gc(referenced, grace_s=600)  # all were stored a moment ago
        assert (young.blobs, young.blob_bytes) == (0, 0)
        assert sorted(blobs.digests()) == every

        report = blobs.gc(referenced, grace_s=0)
        assert (report.dry_run, report.blobs, report.blob_bytes) == (False, 3, sum(b.size for b in orphans))
        assert report.bytes_freed == report.blob_bytes + report.temporary_bytes
        assert sorted(blobs.digests()) == sorted(referenced)
        assert blobs.verify(referenced) == []
