"""`amc store verify` and `amc store info` on real stores, healthy and damaged."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import attrs
import lmdb
from click.testing import CliRunner

from amc.adapters.lmdb import LmdbService, layout
from amc.cli.store import store
from amc.core.commands import RegisterHost, SubmitTask
from amc.core.lifecycle import TaskStatus
from amc.core.records import DeviceSpec
from tests.support.plans import PLAN_RECORD as PLAN


def make_store(path: Path) -> None:
    with LmdbService.open(path) as service:
        service.execute_sync(RegisterHost(now=0, host_id="h1", devices=(DeviceSpec(serial="s1"),)))
        for i in range(3):
            service.execute_sync(SubmitTask(now=0, task_id=f"t{i}", tenant="acme", plan=PLAN))


def test_verify_says_ok_for_a_consistent_store(data_dir):
    make_store(data_dir)
    result = CliRunner().invoke(store, ["verify", "--data", str(data_dir)])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("OK") and "4 events, 3 tasks, 1 hosts" in result.output


def test_verify_names_each_difference(data_dir):
    make_store(data_dir)
    with lmdb.open(str(data_dir), max_dbs=16) as env:
        tasks, task_ids, listing = (
            env.open_db(name) for name in (layout.DB_TASKS, layout.DB_TASK_IDS, layout.DB_LISTING)
        )
        with env.begin(write=True) as txn:
            key = txn.get(b"t1", db=task_ids)
            task = layout.decode_task(txn.get(key, db=tasks))
            txn.put(
                key, layout.encode(attrs.evolve(task, status=TaskStatus.done)), db=tasks
            )  # a record the log never made
            txn.delete(layout.listing_keys(task)[0], db=listing)
    result = CliRunner().invoke(store, ["verify", "--data", str(data_dir)])
    assert result.exit_code == 1
    assert "task t1: status is 'done' in the records, 'queued' in the replayed log" in result.output
    assert "index listing: missing entry" in result.output
    assert "invariant (records): I3: task t1 is done with result None" in result.output


def test_verify_refuses_a_directory_without_a_store(tmp_path):
    result = CliRunner().invoke(store, ["verify", "--data", str(tmp_path / "nothing")])
    assert result.exit_code == 2 and "holds no amc store" in result.output


def test_verify_finds_the_store_of_a_server_data_directory(tmp_path):
    make_store(tmp_path / "store")  # `amc serve --data DIR` keeps its store in DIR/store
    result = CliRunner().invoke(store, ["verify", "--data", str(tmp_path)])
    assert result.exit_code == 0 and "OK" in result.output


def test_info_prints_counts(data_dir):
    make_store(data_dir)
    result = CliRunner().invoke(store, ["info", "--data", str(data_dir)])
    assert result.exit_code == 0, result.output
    assert "tasks:          3 (3 queued, 0 leased)" in result.output and "hosts:          1" in result.output


def test_amc_store_verify_runs_from_the_command_line(data_dir):
    make_store(data_dir)
    done = subprocess.run(
        [sys.executable, "-c", "from amc.cli import main; main()", "store", "verify", "--data", str(data_dir)],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[3])),
        timeout=60,
    )
    assert done.returncode == 0 and done.stdout.startswith("OK"), done.stderr
