"""The tables of an amc store in PostgreSQL, and bringing an older schema forward.

Tables (all under the `amc_` prefix, so a store can share a database with others)::

    amc_meta        key -> value              format marker, schema versions, clock state
    amc_leadership  one row: epoch, leader    the fencing token (see leadership.py)
    amc_events      seq -> event              the event log, append-only, seq from 1;
                                              `task_seq` names the task whose history shows it
    amc_tasks       seq -> task               the current task records, with the columns the
                                              reads filter on (id, tenant, status) and the
                                              active lease's expiry (for `amc store info`)
    amc_hosts       id -> host                the current host records
    amc_blobs       sha256 -> size            artifact bytes (blobs.py), in
    amc_blob_chunks blob, n -> bytes          chunks of 256 KiB
    amc_inputs      tenant, sha256 -> size    which tenant has which input (inputs.py); the
                                              bytes are blobs like artifacts' (schema 2)

Values (`body`) are the bytes of `amc.adapters.codec`, exactly as the LMDB store keeps them,
so `amc store migrate` copies them byte for byte and one codec decodes both stores. They
are `bytea`, not `jsonb`: the store never queries inside a record (the columns beside it
carry what the reads filter on), and `jsonb` would re-encode every record on the way in and
out for nothing.

The commonest command, a renewal, changes a task's body and lease expiry and nothing that is
indexed, so PostgreSQL updates the row in place on its page (a HOT update: no index entry
written) when the page has room; `fillfactor = 70` leaves that room. That is why the lease
expiry has no index: the leader knows the next expiry from its own state (service.py).

Two versions live in `amc_meta`. `schema` is this module's table layout (`SCHEMA_VERSION`,
brought forward by `UPGRADES`, one transaction per open, as LMDB's `upgrade.py` does);
`record_schema` is the version of the records' JSON, the codec's `RECORD_SCHEMA` (the two
stores share the codec, so they share its versions): a store
written by an older codec is brought forward by the same rules as an LMDB one (`RECORD_UPGRADES`).
"""

from __future__ import annotations

import time

import psycopg

from amc.adapters import codec
from amc.adapters.errors import NotAStore, SchemaMismatch

FORMAT = "amc-store"
SCHEMA_VERSION = 2  # the table layout below
RECORD_SCHEMA = codec.RECORD_SCHEMA  # the records' JSON: the codec's version
# Only one server creates or upgrades the tables; the others wait for it on this lock.
SETUP_LOCK = 0x616D_6300_0001  # "amc\0" 1: a transaction-level advisory lock

# Version n -> the statements that bring a store of version n to n + 1. Version 0 is an
# empty database: its step creates the tables.
UPGRADES: dict[int, tuple[str, ...]] = {
    0: (
        "CREATE TABLE amc_meta (key text PRIMARY KEY, value text NOT NULL)",
        """CREATE TABLE amc_leadership (
            id int PRIMARY KEY CHECK (id = 1),
            epoch bigint NOT NULL,
            leader text,
            elected_at timestamptz)""",
        "INSERT INTO amc_leadership (id, epoch) VALUES (1, 0)",
        """CREATE TABLE amc_events (
            seq bigint PRIMARY KEY,
            task_seq bigint,
            body bytea NOT NULL)""",
        "CREATE INDEX amc_events_history ON amc_events (task_seq, seq) WHERE task_seq IS NOT NULL",
        """CREATE TABLE amc_tasks (
            seq bigint PRIMARY KEY,
            id text COLLATE "C" NOT NULL UNIQUE,
            tenant text COLLATE "C" NOT NULL,
            status text NOT NULL,
            lease_expires_at bigint,
            body bytea NOT NULL)
            WITH (fillfactor = 70)""",
        "CREATE INDEX amc_tasks_tenant ON amc_tasks (tenant, seq)",
        "CREATE INDEX amc_tasks_status ON amc_tasks (status, seq)",
        "CREATE INDEX amc_tasks_tenant_status ON amc_tasks (tenant, status, seq)",
        'CREATE TABLE amc_hosts (id text COLLATE "C" PRIMARY KEY, body bytea NOT NULL)',
        """CREATE TABLE amc_blobs (
            sha256 text PRIMARY KEY,
            size bigint NOT NULL,
            stored_at timestamptz NOT NULL DEFAULT now())""",
        # `blob` is the sha256 of a finished blob, or the key of an upload in progress, which
        # only its own transaction ever sees (blobs.py).
        """CREATE TABLE amc_blob_chunks (
            blob text NOT NULL,
            n int NOT NULL,
            data bytea NOT NULL,
            PRIMARY KEY (blob, n))""",
        # Chunks are random bytes: compressing them costs CPU and saves nothing.
        "ALTER TABLE amc_blob_chunks ALTER COLUMN data SET STORAGE EXTERNAL",
    ),
    1: (
        """CREATE TABLE amc_inputs (
            tenant text COLLATE "C" NOT NULL,
            sha256 text NOT NULL,
            size bigint NOT NULL,
            created_at bigint NOT NULL,
            PRIMARY KEY (tenant, sha256))""",
        "CREATE INDEX amc_inputs_sha256 ON amc_inputs (sha256)",
    ),
}

# Record schema n -> how to bring the stored records of schema n forward. The PostgreSQL
# store started at record schema 4; schemas 5 (step outcomes' artifacts) and 6 (sessions) need no rewrite,
# since the codec reads a missing member as its default. A record field added later gets
# its step here and in the LMDB store's upgrade.py.
RECORD_UPGRADES: dict[int, tuple[str, ...]] = {}


def open_schema(conn: psycopg.Connection, *, readonly: bool = False) -> None:
    """Create the tables in an empty database, or bring an older schema forward, in one
    transaction; refuse a database that is not an amc store or is newer than this amc."""
    with conn.transaction():
        if not readonly:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (SETUP_LOCK,))
        found = _versions(conn)
        if found is None:
            if readonly:
                raise NotAStore("the database holds no amc store (no amc_meta table)")
            _upgrade_from(conn, 0)
            conn.execute(
                "INSERT INTO amc_meta (key, value) VALUES ('format', %s), ('schema', %s), ('record_schema', %s),"
                " ('created_at', %s)",
                (FORMAT, str(SCHEMA_VERSION), str(RECORD_SCHEMA), str(time.time_ns() // 1_000_000)),
            )
            return
        schema, record_schema = found
        if schema > SCHEMA_VERSION or record_schema > RECORD_SCHEMA:
            raise SchemaMismatch(
                f"the database holds an amc store of schema {schema} (records {record_schema}); this amc "
                f"reads schema {SCHEMA_VERSION} (records {RECORD_SCHEMA}). Run the amc version that wrote it."
            )
        if (schema, record_schema) == (SCHEMA_VERSION, RECORD_SCHEMA):
            return
        if readonly:
            raise SchemaMismatch(
                f"the database holds an amc store of schema {schema} (records {record_schema}); starting "
                f"the server on it upgrades it to schema {SCHEMA_VERSION} (records {RECORD_SCHEMA})."
            )
        _upgrade_from(conn, schema)
        for version in range(record_schema, RECORD_SCHEMA):
            for statement in RECORD_UPGRADES.get(version, ()):
                conn.execute(statement)
        conn.execute("UPDATE amc_meta SET value = %s WHERE key = 'schema'", (str(SCHEMA_VERSION),))
        conn.execute("UPDATE amc_meta SET value = %s WHERE key = 'record_schema'", (str(RECORD_SCHEMA),))


def _upgrade_from(conn: psycopg.Connection, version: int) -> None:
    for step in range(version, SCHEMA_VERSION):
        for statement in UPGRADES[step]:
            conn.execute(statement)


def _versions(conn: psycopg.Connection) -> tuple[int, int] | None:
    if conn.execute("SELECT to_regclass('amc_meta')").fetchone() == (None,):
        return None
    meta: dict[str, str] = dict(conn.execute("SELECT key, value FROM amc_meta").fetchall())
    if meta.get("format") != FORMAT:
        raise NotAStore(f"the table amc_meta is not an amc store's (format {meta.get('format')!r})")
    try:
        return int(meta["schema"]), int(meta["record_schema"])
    except (KeyError, ValueError) as exc:
        raise NotAStore(f"the amc store's metadata is damaged ({exc!r})") from None
