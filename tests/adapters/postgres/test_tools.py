"""`amc store migrate` (LMDB into PostgreSQL), and `amc store verify|info --store URL`."""

from __future__ import annotations

import hashlib
import os

import psycopg
from click.testing import CliRunner

from amc.adapters.lmdb import LmdbService
from amc.adapters.lmdb.blobs import FileBlobStore
from amc.adapters.lmdb.inputs import FileInputCatalogue
from amc.adapters.postgres import PostgresService
from amc.adapters.postgres.blobs import PostgresBlobStore
from amc.adapters.postgres.inputs import PostgresInputCatalogue
from amc.adapters.postgres.schema import RECORD_SCHEMA
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
    input_sha256 = hashlib.sha256(payloads[0]).hexdigest()  # an input whose bytes an artifact shares
    FileInputCatalogue.in_data_dir(data_dir).record("acme", input_sha256, len(payloads[0]), 5, 1 << 30)
    runner = CliRunner()
    result = runner.invoke(store, ["migrate", "--from", str(data_dir), "--to", pg_url])
    assert result.exit_code == 0, result.output
    assert "4 blobs" in result.output and "1 inputs" in result.output
    migrated = PostgresInputCatalogue(pg_url)
    try:
        assert migrated.listing(None) == FileInputCatalogue.in_data_dir(data_dir).listing(None)
    finally:
        migrated.close()

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
    assert f"schema version: 2 (records {RECORD_SCHEMA})" in info.output and "artifacts:      4 blobs" in info.output

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


def test_gc_removes_unreferenced_bytes_once_they_are_old_enough_and_keeps_a_young_one(pg_url):
    with PostgresService.open(pg_url) as service:
        service.execute_sync(SubmitTask(now=0, task_id="t1", tenant="acme", plan=PLAN))
    blobs = PostgresBlobStore(pg_url)
    try:
        old, young = (
            put(blobs, b"left by an upload cut short" * 100).sha256,
            put(blobs, b"an upload about to commit").sha256,
        )
    finally:
        blobs.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE amc_blobs SET stored_at = now() - interval '1 hour' WHERE sha256 = %s", (old,))
    dry = CliRunner().invoke(store, ["gc", "--dry-run", "--store", pg_url])
    assert dry.exit_code == 0 and "Would free 1 unreferenced artifact blobs, 2700 bytes" in dry.output
    done = CliRunner().invoke(store, ["gc", "--store", pg_url])
    assert done.exit_code == 0 and "Freed 1 unreferenced artifact blobs, 2700 bytes" in done.output
    with psycopg.connect(pg_url) as conn:
        assert [row[0] for row in conn.execute("SELECT sha256 FROM amc_blobs")] == [young]
    refused = CliRunner().invoke(store, ["gc", "--older-than", "1d", "--store", pg_url])
    assert refused.exit_code == 2 and "LMDB data directory only" in refused.output
