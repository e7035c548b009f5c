"""`verify` notices every kind of damage it claims to check."""

from __future__ import annotations

import lmdb
import pytest

from amc.adapters.lmdb import LmdbService, layout, verify
from amc.core.commands import ClaimTask, RegisterHost, SubmitTask
from amc.core.records import DeviceSpec
from tests.support.plans import PLAN_RECORD as PLAN


@pytest.fixture
def store_dir(data_dir):
    with LmdbService.open(data_dir, clock="manual") as service:
        service.execute_sync(RegisterHost(now=0, host_id="h1", devices=(DeviceSpec(serial="s1"),)))
        service.execute_sync(SubmitTask(now=0, task_id="t1", tenant="acme", plan=PLAN))
        service.execute_sync(SubmitTask(now=0, task_id="t2", tenant="acme", plan=PLAN))
        service.execute_sync(ClaimTask(now=0, host_id="h1", lease_id="L1", lease_ms=10_000))
    assert verify(data_dir) == []
    return data_dir


def damage(path, change) -> list[str]:
    with lmdb.open(str(path), max_dbs=16) as env:
        dbs = {name: env.open_db(name, **flags) for name, flags in layout.DATABASES.items()}
        with env.begin(write=True) as txn:
            change(txn, dbs)
    return verify(path)


def test_a_missing_log_entry(store_dir):
    found = damage(store_dir, lambda txn, dbs: txn.delete(layout.u64(2), db=dbs[layout.DB_LOG]))
    assert any("entries 2..2 are missing" in f for f in found), found
    assert any("task t1: in the records but not in the replayed log" in f for f in found), found


def test_a_lost_lease_entry(store_dir):
    def change(txn, dbs):
        cursor = txn.cursor(db=dbs[layout.DB_LEASES])
        assert cursor.first()
        cursor.delete()

    found = damage(store_dir, change)
    assert any(f.startswith("index leases: missing entry") for f in found), found


def test_a_stray_queue_entry(store_dir):
    found = damage(store_dir, lambda txn, dbs: txn.put(b"\x00" * 16, b"t9", db=dbs[layout.DB_QUEUE]))
    assert any(f.startswith("index queue: stray entry") for f in found), found


def test_a_lost_history_entry(store_dir):
    def change(txn, dbs):
        seq_key = txn.get(b"t1", db=dbs[layout.DB_TASK_IDS])
        assert txn.delete(seq_key, layout.u64(4), db=dbs[layout.DB_HISTORY])

    found = damage(store_dir, change)
    assert any(f.startswith("index history: entry 't1'") for f in found), found


def test_a_lost_task_id_entry(store_dir):
    found = damage(store_dir, lambda txn, dbs: txn.delete(b"t2", db=dbs[layout.DB_TASK_IDS]))
    assert any(f.startswith("index task_ids: missing entry b't2'") for f in found), found


def test_a_task_record_under_the_wrong_seq(store_dir):
    def change(txn, dbs):
        tasks = dbs[layout.DB_TASKS]
        raw = txn.pop(txn.get(b"t2", db=dbs[layout.DB_TASK_IDS]), db=tasks)
        txn.put(layout.u64(99), raw, db=tasks)

    found = damage(store_dir, change)
    assert any(f.startswith("task t2: the record is stored under the wrong key") for f in found), found


def test_a_record_that_does_not_decode(store_dir):
    found = damage(store_dir, lambda txn, dbs: txn.put(b"h1", b'{"type": "host"}', db=dbs[layout.DB_HOSTS]))
    assert any(f.startswith("host h1: the record cannot be decoded") for f in found), found
    assert any("host h1: in the replayed log but missing from the records" in f for f in found), found


def test_a_clock_that_went_back(store_dir):
    found = damage(store_dir, lambda txn, dbs: txn.put(layout.META_LAST_TIME, layout.u64(0), db=dbs[layout.DB_META]))
    assert any(f.startswith("clock: the latest recorded time 0 is earlier") for f in found), found
