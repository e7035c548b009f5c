"""The artifact byte store on real files: the port's contract, then what only files do
(temporaries, the content address on disk, memory use, SIGKILL mid-upload)."""

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
from pathlib import Path

import pytest

from amc.adapters.lmdb import LmdbService, verify
from amc.adapters.lmdb.blobs import FileBlobStore
from amc.service import BlobTooLarge, read_chunks, store_chunks
from tests.support.blob_contract import MIB, BlobStoreContract, put, read_all

ROOT = Path(__file__).resolve().parents[3]
SEED = int(os.environ.get("AMC_CRASH_SEED", "20261201"))


class TestFileBlobStore(BlobStoreContract):
    @pytest.fixture
    def blobs(self, tmp_path):
        return FileBlobStore.in_data_dir(tmp_path / "data")

    def damage(self, blobs, sha256):
        path = blobs.path_of(sha256)
        raw = bytearray(path.read_bytes())
        raw[len(raw) // 2] ^= 0x01  # one bit, same size
        path.write_bytes(bytes(raw))


@pytest.fixture
def store(tmp_path):
    return FileBlobStore.in_data_dir(tmp_path / "data")


def files_under(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.name != "lock")


def test_a_blob_is_one_file_named_by_its_sha256_and_nothing_else_stays(store):
    data = os.urandom(100_000)
    blob = put(store, data, chunk=777)
    assert store.path_of(blob.sha256) == store.root / blob.sha256[:2] / blob.sha256
    assert files_under(store.root) == [store.path_of(blob.sha256)]
    assert store.path_of(blob.sha256).read_bytes() == data


def test_a_refused_or_abandoned_upload_leaves_no_file(store):
    writer = store.begin(limit=100)
    writer.write(b"y" * 60)
    assert len(store.temporaries()) == 1
    with pytest.raises(BlobTooLarge):
        writer.write(b"y" * 41)
    with store.begin() as given_up:
        given_up.write(b"z" * 1_000)
        assert len(store.temporaries()) == 1

    async def body():
        for _ in range(10):
            yield b"a" * 100_000

    with pytest.raises(BlobTooLarge):
        asyncio.run(store_chunks(store, body(), limit=250_000))
    assert files_under(store.root) == []


def test_the_blobs_live_beside_the_lmdb_store_in_its_data_directory(tmp_path):
    data = tmp_path / "data"
    with LmdbService.open(data):  # the store first: it refuses a new directory that holds anything
        blob = put(FileBlobStore.in_data_dir(data), b"evidence")
    with LmdbService.open(data):
        assert read_all(FileBlobStore.in_data_dir(data), blob.sha256) == b"evidence"
    assert verify(data) == []


def test_a_repeated_blob_gets_a_fresh_mtime_so_gc_spares_it(store):
    data = os.urandom(200_000)
    first = put(store, data)
    path = store.path_of(first.sha256)
    os.utime(path, (time.time() - 3_600, time.time() - 3_600))
    assert put(store, data) == first
    assert time.time() - path.stat().st_mtime < 60
    assert store.gc(referenced=[], grace_s=600).blobs == 0
    assert read_all(store, first.sha256) == data


def test_a_damaged_blob_of_another_size_is_replaced_by_the_next_upload(store):
    data = os.urandom(10_000)
    blob = put(store, data)
    store.path_of(blob.sha256).write_bytes(data[:5_000])  # torn by something outside amc
    assert put(store, data) == blob
    assert read_all(store, blob.sha256) == data


def test_gc_removes_old_temporaries_and_spares_an_upload_in_progress(store):
    kept = put(store, b"referenced")
    old = store.begin()
    old.write(b"t" * 777)
    old._file.flush()
    [old_path] = store.temporaries()
    os.utime(old_path, (time.time() - 3_600, time.time() - 3_600))
    young = store.begin()
    young.write(b"u" * 10)
    young._file.flush()

    dry = store.gc([kept.sha256], dry_run=True, grace_s=0)
    assert (dry.temporaries, dry.temporary_bytes) == (2, 787)
    assert len(store.temporaries()) == 2

    report = store.gc([kept.sha256], grace_s=60)
    assert (report.blobs, report.temporaries, report.temporary_bytes) == (0, 1, 777)
    assert store.temporaries() == [young._temp]
    young.write(b"v" * 10)
    finished = young.finish()  # the upload gc spared still completes
    assert finished.sha256 == hashlib.sha256(b"u" * 10 + b"v" * 10).hexdigest()
    assert store.gc([kept.sha256, finished.sha256], grace_s=0).temporaries == 0
    assert files_under(store.root) == sorted([store.path_of(kept.sha256), store.path_of(finished.sha256)])


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
        if line == "ready":
            continue
        _, sha256, size = line.split()
        finished.append((sha256, int(size)))
    return finished


@pytest.mark.slow
def test_sigkill_mid_upload_loses_no_finished_blob_and_leaves_no_partial_one(tmp_path):
    """SIGKILL tests atomicity (a content address never holds a torn blob) and that what a
    caller was told is stored stays stored; a power cut, which the fsyncs are for, is not
    something a test can cause."""
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


@pytest.mark.req("STORAGE-FULL/s1")
@pytest.mark.parametrize("chunk", [100, 256 * 1024])  # buffered in the writer, or written at once
def test_a_full_file_system_is_storage_unavailable_and_the_partial_upload_is_removed(tmp_path, chunk):
    from amc.service import StorageUnavailable
    from tests.support.tmpfs import mounted_tmpfs

    with mounted_tmpfs(tmp_path / "fs", 1 << 20) as fs:
        blobs = FileBlobStore.in_data_dir(fs / "data")
        writer = blobs.begin()
        with pytest.raises(StorageUnavailable, match="no space left"):
            for _ in range((2 << 20) // chunk):
                writer.write(b"x" * chunk)
            writer.finish()
        writer.abort()  # what `store_chunks` does on any error
        assert blobs.temporaries() == [] and list(blobs.digests()) == []
        assert put(blobs, b"fits now") is not None  # the space came back with the partial upload gone
