"""The artifact byte store on real files: round trips, limits, dedup, verify, gc, memory, crashes."""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import signal
import subprocess
import sys
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from amc.adapters.lmdb.blobs import FileBlobStore
from amc.service import BlobNotFound, BlobTooLarge, read_chunks, store_chunks

ROOT = Path(__file__).resolve().parents[3]
MIB = 1024 * 1024
SEED = int(os.environ.get("AMC_CRASH_SEED", "20261201"))


@pytest.fixture
def store(tmp_path):
    return FileBlobStore.in_data_dir(tmp_path / "data")


def put(store: FileBlobStore, data: bytes, chunk: int = 65_536, limit: int | None = None):
    with store.begin(limit) as writer:
        for at in range(0, len(data), chunk):
            writer.write(data[at : at + chunk])
        return writer.finish()


def read_all(store: FileBlobStore, sha256: str, chunk: int = 100_003) -> bytes:
    with store.open(sha256) as reader:
        parts = []
        while part := reader.read(chunk):
            parts.append(part)
    return b"".join(parts)


def files_under(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.name != "lock")


@pytest.mark.parametrize(
    "size, chunk",
    [(0, 1), (1, 1), (1_000, 7), (65_536, 4_093), (3 * MIB + 7, 65_537), (5 * MIB, 1_000_003)],
)
def test_a_blob_reads_back_byte_for_byte_under_its_sha256(store, size, chunk):
    data = random.Random(size).randbytes(size)
    blob = put(store, data, chunk)
    assert (blob.sha256, blob.size) == (hashlib.sha256(data).hexdigest(), size)
    assert store.size_of(blob.sha256) == size
    with store.open(blob.sha256) as reader:
        assert (reader.sha256, reader.size) == (blob.sha256, size)
    assert read_all(store, blob.sha256) == data
    assert store.path_of(blob.sha256) == store.root / blob.sha256[:2] / blob.sha256
    assert list(store.digests()) == [blob.sha256]
    assert store.temporaries() == []
    assert store.check(blob.sha256) is None


def test_the_limit_refuses_the_first_byte_over_it_and_leaves_nothing(store):
    assert put(store, b"x" * 100, chunk=30, limit=100).size == 100  # exactly the limit is fine
    store.delete(hashlib.sha256(b"x" * 100).hexdigest())
    writer = store.begin(limit=100)
    writer.write(b"y" * 60)
    assert len(store.temporaries()) == 1
    with pytest.raises(BlobTooLarge) as refused:
        writer.write(b"y" * 41)
    assert refused.value.limit == 100 and "100 bytes" in str(refused.value)
    assert store.temporaries() == [] and list(store.digests()) == []
    with pytest.raises(ValueError):
        writer.write(b"y")
    with pytest.raises(ValueError):
        writer.finish()
    assert files_under(store.root) == []


def test_store_chunks_stops_reading_at_the_limit_and_keeps_nothing(store):
    consumed = 0

    async def body():
        nonlocal consumed
        for _ in range(1_000):
            consumed += 1
            yield b"z" * 10_000

    with pytest.raises(BlobTooLarge):
        asyncio.run(store_chunks(store, body(), limit=25_000))
    assert consumed == 3  # refused on the chunk that passed the limit, not at the end
    assert files_under(store.root) == []


def test_store_chunks_aborts_when_the_body_fails(store):
    async def body():
        yield b"a" * 300_000
        raise ConnectionResetError("client went away")

    with pytest.raises(ConnectionResetError):
        asyncio.run(store_chunks(store, body(), limit=None))
    assert files_under(store.root) == []


def test_a_writer_given_up_leaves_nothing(store):
    with store.begin() as writer:
        writer.write(b"half an upload")
    writer.abort()  # idempotent
    assert files_under(store.root) == []
    finished = store.begin()
    finished.write(b"done")
    blob = finished.finish()
    finished.abort()  # a no-op after finish
    assert read_all(store, blob.sha256) == b"done"


def test_identical_bytes_are_one_file_and_a_repeat_restarts_its_grace(store):
    data = os.urandom(200_000)
    first = put(store, data, chunk=3_000)
    path = store.path_of(first.sha256)
    os.utime(path, (time.time() - 3_600, time.time() - 3_600))
    again = put(store, data, chunk=70_001)
    assert again == first
    assert files_under(store.root) == [path]
    assert time.time() - path.stat().st_mtime < 60  # gc's grace starts again
    assert store.gc(referenced=[], grace_s=600).blobs == 0
    assert read_all(store, first.sha256) == data


def test_threads_storing_the_same_and_different_bytes_at_once(store):
    shared = os.urandom(300_000)
    own = [os.urandom(100_000 + n) for n in range(8)]
    with ThreadPoolExecutor(8) as pool:
        same = list(pool.map(lambda n: put(store, shared, chunk=1_000 + n), range(8)))
        different = list(pool.map(lambda data: put(store, data, chunk=9_999), own))
    assert len(set(same)) == 1
    assert sorted(store.digests()) == sorted({same[0].sha256, *(b.sha256 for b in different)})
    assert store.temporaries() == []
    assert store.verify(list(store.digests())) == []


def test_a_damaged_blob_of_another_size_is_replaced_by_the_next_upload(store):
    data = os.urandom(10_000)
    blob = put(store, data)
    store.path_of(blob.sha256).write_bytes(data[:5_000])  # torn by something outside amc
    assert put(store, data) == blob
    assert read_all(store, blob.sha256) == data


def test_open_of_an_unknown_blob_is_not_found_and_a_bad_digest_is_refused(store):
    missing = hashlib.sha256(b"never stored").hexdigest()
    with pytest.raises(BlobNotFound) as error:
        store.open(missing)
    assert error.value.sha256 == missing
    assert store.size_of(missing) is None
    assert store.delete(missing) is False
    for bad in ("../../etc/passwd", missing.upper(), missing[:-1], missing + "0"):
        with pytest.raises(ValueError):
            store.open(bad)


def test_verify_finds_a_missing_and_a_corrupt_blob(store):
    good, damaged, deleted = (put(store, os.urandom(50_000 + n)) for n in range(3))
    path = store.path_of(damaged.sha256)
    raw = bytearray(path.read_bytes())
    raw[12_345] ^= 0x01  # one bit, same size
    path.write_bytes(bytes(raw))
    assert store.delete(deleted.sha256) is True
    problems = store.verify([good.sha256, damaged.sha256, deleted.sha256])
    assert [(p.sha256, p.kind) for p in problems] == [(damaged.sha256, "corrupt"), (deleted.sha256, "missing")]
    assert hashlib.sha256(raw).hexdigest() in problems[0].detail
    assert store.verify([good.sha256]) == []


def test_gc_removes_exactly_the_unreferenced_blobs_and_old_temporaries(store):
    blobs = [put(store, os.urandom(1_000 * (n + 1))) for n in range(6)]
    referenced = [b.sha256 for b in blobs[::2]]
    orphans = blobs[1::2]
    old_temp = store.begin()
    old_temp.write(b"t" * 777)
    old_temp._file.flush()
    [temp_path] = store.temporaries()
    os.utime(temp_path, (time.time() - 3_600, time.time() - 3_600))
    young_temp = store.begin()  # an upload in progress
    young_temp.write(b"u" * 10)
    young_temp._file.flush()

    before = files_under(store.root)
    dry = store.gc(referenced, dry_run=True, grace_s=0)
    assert files_under(store.root) == before  # a dry run removes nothing
    assert (dry.dry_run, dry.blobs, dry.blob_bytes) == (True, 3, sum(b.size for b in orphans))
    assert (dry.temporaries, dry.temporary_bytes) == (2, 787)

    report = store.gc(referenced, grace_s=60)  # blobs are young: only the old temporary goes
    assert (report.blobs, report.temporaries, report.temporary_bytes) == (0, 1, 777)
    assert store.temporaries() == [young_temp._temp]

    report = store.gc(referenced, grace_s=0)
    assert (report.dry_run, report.blobs, report.blob_bytes) == (False, 3, sum(b.size for b in orphans))
    assert report.bytes_freed == report.blob_bytes + report.temporary_bytes
    assert sorted(store.digests()) == sorted(referenced)
    assert store.verify(referenced) == []
    young_temp.abort()
    assert store.gc(referenced, grace_s=0).bytes_freed == 0


def test_a_64_mib_upload_and_download_stay_small_in_memory(store):
    block = os.urandom(MIB)
    total = 64 * MIB
    expected = hashlib.sha256()

    async def body():
        rng = random.Random(7)
        sent = 0
        while sent < total:
            size = min(rng.randint(1_000, 65_536), total - sent)
            at = sent % MIB
            chunk = (block + block)[at : at + size] if at + size > MIB else block[at : at + size]
            expected.update(chunk)
            sent += size
            yield chunk

    async def download(sha256: str) -> tuple[str, int]:
        reader = await asyncio.to_thread(store.open, sha256)
        digest, size = hashlib.sha256(), 0
        async for chunk in read_chunks(reader):
            digest.update(chunk)
            size += len(chunk)
        return digest.hexdigest(), size

    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        blob = asyncio.run(store_chunks(store, body(), limit=total))
        upload_peak = tracemalloc.get_traced_memory()[1] - baseline
        tracemalloc.reset_peak()
        read_back = asyncio.run(download(blob.sha256))
        download_peak = tracemalloc.get_traced_memory()[1] - baseline
    finally:
        tracemalloc.stop()
    assert (blob.sha256, blob.size) == (expected.hexdigest(), total)
    assert read_back == (blob.sha256, total)
    assert upload_peak < 6 * MIB, upload_peak  # the 2 MiB `block + block` plus a coalesced chunk or two
    assert download_peak < 2 * MIB, download_peak


# --- crashes ---------------------------------------------------------------------------------

CRASH_ROUNDS = 8


def run_child_until_killed(root: Path, seed: int, rng: random.Random) -> list[tuple[str, int]]:
    """Start the uploading child, let it report a few blobs, SIGKILL it, return its reports."""
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.adapters.lmdb.blob_crash_child", str(root), str(seed)],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert child.stdout.readline() == b"ready\n", child.stderr.read()
        for _ in range(rng.randint(1, 6)):
            line = child.stdout.readline()
            assert line.startswith(b"finished "), line + child.stderr.read()
        time.sleep(rng.uniform(0, 0.25))  # then a random moment: mid-write, mid-fsync, mid-rename
    finally:
        child.send_signal(signal.SIGKILL)
        out, err = child.communicate(timeout=30)
    assert child.returncode == -signal.SIGKILL, err
    finished = []
    for line in out.decode().splitlines():
        _, sha256, size = line.split()
        finished.append((sha256, int(size)))
    return finished


@pytest.mark.slow
def test_sigkill_mid_upload_loses_no_finished_blob_and_leaves_no_partial_one(tmp_path):
    root = tmp_path / "artifacts"
    rng = random.Random(SEED)
    reported: dict[str, int] = {}
    seen_temporaries = 0
    for round_ in range(CRASH_ROUNDS):
        reported.update(run_child_until_killed(root, SEED + round_, rng))
        store = FileBlobStore(root)
        seen_temporaries += len(store.temporaries())
        for sha256, size in reported.items():  # every blob any caller was told of
            assert store.size_of(sha256) == size, sha256
            assert store.check(sha256) is None, sha256
        for sha256 in store.digests():  # and nothing torn at any content address
            assert store.check(sha256) is None, f"round {round_}: a partial blob at {sha256}"
    assert seen_temporaries > 0, "no kill landed mid-upload: the test did not test the crash"
    report = store.gc(reported, grace_s=0)
    assert store.temporaries() == []
    assert report.temporaries >= 1
    assert set(store.digests()) == set(reported)
    assert store.verify(reported) == []
