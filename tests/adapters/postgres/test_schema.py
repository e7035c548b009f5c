"""Opening a database: an empty one gets the tables, a newer or foreign one is refused."""

from __future__ import annotations

import threading

import psycopg
import pytest

from amc.adapters.postgres import NotAStore, PostgresService, SchemaMismatch
from amc.adapters.postgres import schema as schema_module
from amc.adapters.postgres.store import connect


def test_servers_starting_together_create_the_tables_once(pg_url):
    errors: list[BaseException] = []

    def open_schema() -> None:
        try:
            with connect(pg_url) as conn:
                schema_module.open_schema(conn)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_schema) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with psycopg.connect(pg_url) as conn:
        meta = dict(conn.execute("SELECT key, value FROM amc_meta").fetchall())
    assert (meta["format"], meta["schema"], meta["record_schema"]) == (
        "amc-store",
        str(schema_module.SCHEMA_VERSION),
        str(schema_module.RECORD_SCHEMA),
    )


def test_a_newer_store_and_a_foreign_table_are_refused(pg_cluster, pg_url):
    PostgresService.open(pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE amc_meta SET value = '3' WHERE key = 'schema'")
    with pytest.raises(SchemaMismatch, match="schema 3"):
        PostgresService.open(pg_url)

    foreign = pg_cluster.new_database()
    with psycopg.connect(foreign, autocommit=True) as conn:
        conn.execute("CREATE TABLE amc_meta (key text PRIMARY KEY, value text)")
        conn.execute("INSERT INTO amc_meta VALUES ('format', 'something else')")
    with pytest.raises(NotAStore, match="not an amc store"):
        PostgresService.open(foreign)


def test_an_older_store_is_brought_forward_by_its_upgrade_steps(pg_url, monkeypatch):
    PostgresService.open(pg_url).close()
    # A later amc with schema 3, whose step adds a column: the store of schema 2 is upgraded.
    monkeypatch.setattr(schema_module, "SCHEMA_VERSION", 3)
    monkeypatch.setitem(schema_module.UPGRADES, 2, ("ALTER TABLE amc_hosts ADD COLUMN note text",))
    with connect(pg_url) as conn:
        with pytest.raises(SchemaMismatch, match="upgrades it"):
            schema_module.open_schema(conn, readonly=True)
        schema_module.open_schema(conn)
        assert conn.execute("SELECT value FROM amc_meta WHERE key = 'schema'").fetchone() == ("3",)
        assert conn.execute("SELECT count(note) FROM amc_hosts").fetchone() == (0,)


def test_an_unreachable_database_is_named_without_its_password():
    with pytest.raises(NotAStore) as caught:
        PostgresService.open("postgresql://amc:secret@127.0.0.1:1/amc")
    assert "secret" not in str(caught.value) and "port=1" in str(caught.value)


def test_a_store_of_schema_1_gains_the_inputs_table(pg_url):
    """Schema 2 (specs/protocol.md Part F) adds `amc_inputs`; a store of schema 1 is brought forward."""
    PostgresService.open(pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DROP TABLE amc_inputs")
        conn.execute("UPDATE amc_meta SET value = '1' WHERE key = 'schema'")
    PostgresService.open(pg_url).close()
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM amc_inputs").fetchone() == (0,)
        assert conn.execute("SELECT value FROM amc_meta WHERE key = 'schema'").fetchone() == ("2",)


def test_the_record_schema_is_the_codecs_as_the_lmdb_store_numbers_it():
    """Both stores keep the same codec's records: a field added to them bumps both numbers."""
    from amc.adapters.lmdb import layout

    assert schema_module.RECORD_SCHEMA == layout.SCHEMA_VERSION
