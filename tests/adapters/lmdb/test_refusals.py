"""What the store refuses to open, and that it says so clearly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import lmdb
import pytest

from amc.adapters.lmdb import LmdbService, NotAStore, SchemaMismatch, StoreLocked, layout, verify
from amc.core.commands import SubmitTask
from tests.support.plans import PLAN_RECORD as PLAN

ROOT = Path(__file__).resolve().parents[3]

HOLDER = textwrap.dedent(
    """
    import sys
    from amc.adapters.lmdb import LmdbService, StoreLocked
    try:
        service = LmdbService.open(sys.argv[1])
    except StoreLocked as error:
        print("refused:", error, flush=True)
        sys.exit(3)
    print("open", flush=True)
    sys.stdin.read()  # hold the store until the test closes our stdin
    service.close()
    """
)


def run_holder(data: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(data)],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_second_writer_process_is_refused(data_dir):
    holder = run_holder(data_dir)
    try:
        assert holder.stdout.readline().strip() == "open", holder.stderr.read()
        with pytest.raises(StoreLocked) as refused:
            LmdbService.open(data_dir)
        message = str(refused.value)
        assert str(data_dir) in message and f"process {holder.pid}" in message and "--data" in message
        assert verify(data_dir) == []  # reading beside a live writer is fine
    finally:
        holder.stdin.close()
        holder.wait(10)
    with LmdbService.open(data_dir):  # the lock went with the process
        other = run_holder(data_dir)
        out, _ = other.communicate(timeout=30)
        assert other.returncode == 3 and "already open for writing" in out


def test_the_lock_dies_with_a_killed_writer(data_dir):
    holder = run_holder(data_dir)
    assert holder.stdout.readline().strip() == "open"
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    with LmdbService.open(data_dir) as service:
        assert service.execute_sync(SubmitTask(now=0, task_id="t1", tenant="a", plan=PLAN)).accepted


def test_a_second_writer_in_the_same_process_is_refused(data_dir):
    with LmdbService.open(data_dir), pytest.raises(StoreLocked):
        LmdbService.open(data_dir)


def test_an_unknown_schema_version_is_refused(data_dir):
    with LmdbService.open(data_dir) as service:
        service.execute_sync(SubmitTask(now=0, task_id="t1", tenant="a", plan=PLAN))
    with lmdb.open(str(data_dir), max_dbs=16) as env:
        meta = env.open_db(layout.DB_META)
        with env.begin(write=True, db=meta) as txn:
            txn.put(layout.META_SCHEMA, b"99")
    for attempt in (lambda: LmdbService.open(data_dir), lambda: verify(data_dir)):
        with pytest.raises(SchemaMismatch) as refused:
            attempt()
        message = str(refused.value)
        assert (
            str(data_dir) in message
            and "schema version 99" in message
            and f"version {layout.SCHEMA_VERSION}" in message
        )


def test_a_directory_that_is_not_a_store_is_refused_and_left_alone(tmp_path):
    data = tmp_path / "project"
    data.mkdir()
    (data / "notes.txt").write_text("mine")
    with pytest.raises(NotAStore) as refused:
        LmdbService.open(data)
    assert str(data) in str(refused.value) and "not empty" in str(refused.value) and "--data" in str(refused.value)
    assert sorted(p.name for p in data.iterdir()) == ["notes.txt"]


def test_a_file_is_not_a_store(tmp_path):
    path = tmp_path / "file"
    path.write_text("x")
    with pytest.raises(NotAStore, match="is a file"):
        LmdbService.open(path)


def test_a_foreign_lmdb_environment_is_refused(tmp_path):
    data = tmp_path / "other"
    with lmdb.open(str(data), max_dbs=4) as env, env.begin(write=True, db=env.open_db(b"theirs")) as txn:
        txn.put(b"k", b"v")
    with pytest.raises(NotAStore, match="not an amc store"):
        LmdbService.open(data)
    with pytest.raises(NotAStore, match="not an amc store"):
        verify(data)


def test_a_data_file_that_is_not_lmdb_is_refused(tmp_path):
    data = tmp_path / "garbage"
    data.mkdir()
    (data / layout.DATA_FILE).write_bytes(os.urandom(64 * 1024))
    with pytest.raises(NotAStore, match=r"not an LMDB file|not an amc store|cannot open"):
        LmdbService.open(data)


def test_an_empty_directory_becomes_a_store_and_verify_needs_one(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(NotAStore, match="holds no amc store"):
        verify(empty)
    with LmdbService.open(empty):
        pass
    assert verify(empty) == []
    with pytest.raises(NotAStore, match="holds no amc store"):
        verify(tmp_path / "missing")
