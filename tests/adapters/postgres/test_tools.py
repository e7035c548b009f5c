"""`amc store migrate` (LMDB into PostgreSQL), and `amc store verify|info --store URL`."""

from __future__ import annotations

import hashlib
import os

import psycopg
from click.testing import CliRunner

from amc.adapters.lmdb import LmdbService
from amc.adapters.lmdb.blobs import FileBlobStore
from amc.adapters.postgres import PostgresService
from amc.adapters.postgres.blobs import PostgresBlobStore
from amc.cli.store import store
from amc.core.commands import SubmitTask
from tests.adapters.lmdb.test_service import STATUSES, all_pages
from tests.adapters.lmdb.workload import HOSTS, TENANTS, Workload
from tests.adapters.postgres.helpers import writer_state
from tests.support.blob_contract import put, read_all
from tests.support.plans import PLAN_RECORD as PLAN


def fill_lmdb(data_dir) -> list[bytes]:
    from tests.adapters.lmdb.helpers import advance_clock

    workload = Workload(3)
    with LmdbService.open(data_dir, clock="manual") as service:
        for step in range(400):
            if step % 40 == 0:
                advance_clock(service, 3000)
            service.execute_sync(workload.next_command(service._writer.state))
    blobs = FileBlobStore.in_data_dir(data_dir)
    payloads = [os.urandom(n) for n in (0, 10, 300_000, 1_000_000)]
    for data in payloads:
        put(blobs, data)
    return payloads


def test_a_migrated_store_serves_the_same_reads_and_verifies(tmp_path, pg_url):
    data_dir = tmp_path / "lmdb"
    payloads = fill_lmdb(data_dir)
    runner = CliRunner()
    result = runner.invoke(store, ["migrate", "--from", str(data_dir), "--to", pg_url])
    assert result.exit_code == 0, result.output
    assert "4 artifact blobs" in result.output

    with LmdbService.open(data_dir, clock="manual") as lmdb, PostgresService.open(pg_url, clock="manual") as pg:
        assert writer_state(pg) == lmdb._writer.state
        assert pg.clock.now() == lmdb.clock.now()
        for task_id in lmdb._writer.state.tasks:
            assert pg.task(task_id) == lmdb.task(task_id)
            assert pg.history(task_id) == lmdb.history(task_id)
        assert pg.hosts() == lmdb.hosts()
        assert [pg.host(h) for h in HOSTS] == [lmdb.host(h) for h in HOSTS]
        assert pg.next_expiry() == lmdb.next_expiry()
        for tenant in (None, *TENANTS):
            for status in STATUSES:
                assert all_pages(pg, tenant, status, 5) == all_pages(lmdb, tenant, status, 5), (tenant, status)
        # The migrated store goes on: the next command follows the log without a gap.
        pg.execute_sync(SubmitTask(now=0, task_id="after-migration", tenant="acme", plan=PLAN))
    blobs = PostgresBlobStore(pg_url)
    try:
        for data in payloads:
            assert read_all(blobs, hashlib.sha256(data).hexdigest()) == data
    finally:
        blobs.close()

    # The workload's artifacts name made-up digests (aaaa..., bbbb...) whose bytes no store has:
    # verify finds those, and nothing else.
    verified = runner.invoke(store, ["verify", "--store", pg_url])
    lines = verified.output.splitlines()
    assert verified.exit_code == 1 and len(lines) == 3, verified.output
    assert all(
        line.startswith("artifact blob ") and line.endswith("missing (no row in amc_blobs)") for line in lines[:2]
    )
    info = runner.invoke(store, ["info", "--store", pg_url])
    assert info.exit_code == 0, info.output
    assert "schema version: 1 (records 4)" in info.output and "artifacts:      4 blobs" in info.output

    again = runner.invoke(store, ["migrate", "--from", str(data_dir), "--to", pg_url])
    assert again.exit_code == 2 and "already holds an amc store" in again.output


def test_verify_names_a_difference_and_info_refuses_a_database_without_a_store(pg_cluster, pg_url):
    with PostgresService.open(pg_url) as service:
        service.execute_sync(SubmitTask(now=0, task_id="t1", tenant="acme", plan=PLAN))
        service.execute_sync(SubmitTask(now=0, task_id="t2", tenant="acme", plan=PLAN))
    healthy = CliRunner().invoke(store, ["verify", "--store", pg_url])
    assert healthy.exit_code == 0 and healthy.output.startswith("OK") and "2 events, 2 tasks" in healthy.output
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE amc_tasks SET status = 'done' WHERE id = 't2'")
        conn.execute("DELETE FROM amc_events WHERE seq = 1")
    result = CliRunner().invoke(store, ["verify", "--store", pg_url])
    assert result.exit_code == 1
    assert "entries 1..1 are missing" in result.output
    assert "task t2: its columns are" in result.output
    empty = pg_cluster.new_database()
    refused = CliRunner().invoke(store, ["info", "--store", empty])
    assert refused.exit_code == 2 and "no amc store" in refused.output
