"""`PostgresInputCatalogue`: inputs' records in the table `amc_inputs` (an `amc.service.InputCatalogue`).

The records live in the database beside the tasks and the blobs, so whichever server leads
reads every input stored through any of them: failover keeps inputs as it keeps artifacts.
A record is one row, inserted after its bytes committed in `amc_blobs`; the insert commits
before `record` returns (durable: the WAL is flushed at commit).

The per-tenant limit is checked in the inserting transaction under an advisory lock on the
tenant, so two servers, or two uploads, never take a tenant past it together. A record is a
fact about bytes that are already stored (this tenant uploaded them); it is not fenced by
the leadership, since a deposed leader that records one records something true.
"""

from __future__ import annotations

import psycopg

from amc.adapters.postgres import store
from amc.service import StoredInput, TenantInputsFull, checked_sha256

POOL_SIZE = 4
TENANT_LOCK = 0x616D_0002  # with the tenant's hash: an advisory lock per tenant (two int4 keys)

_COLUMNS = "tenant, sha256, size, created_at"


class PostgresInputCatalogue:
    def __init__(self, url: str, pool_size: int = POOL_SIZE):
        self._pool = store.autocommit_pool(url, pool_size, "amc-inputs")

    def close(self) -> None:
        self._pool.close()

    def record(self, tenant: str, sha256: str, size: int, now: int, max_tenant_bytes: int) -> tuple[StoredInput, bool]:
        checked_sha256(sha256)
        with self._pool.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (TENANT_LOCK, tenant))
            existing = _one(conn, "WHERE tenant = %s AND sha256 = %s", (tenant, sha256))
            if existing is not None:
                return existing, False
            row = conn.execute("SELECT coalesce(sum(size), 0) FROM amc_inputs WHERE tenant = %s", (tenant,)).fetchone()
            stored = int(row[0]) if row else 0
            if stored + size > max_tenant_bytes:
                raise TenantInputsFull(max_tenant_bytes, stored)
            conn.execute(f"INSERT INTO amc_inputs ({_COLUMNS}) VALUES (%s, %s, %s, %s)", (tenant, sha256, size, now))
        return StoredInput(tenant, sha256, size, now), True

    def get(self, tenant: str, sha256: str) -> StoredInput | None:
        with self._pool.connection() as conn:
            return _one(conn, "WHERE tenant = %s AND sha256 = %s", (tenant, checked_sha256(sha256)))

    def holders(self, sha256: str) -> list[str]:
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT tenant FROM amc_inputs WHERE sha256 = %s ORDER BY tenant", (checked_sha256(sha256),)
            ).fetchall()
        return [tenant for (tenant,) in rows]

    def listing(self, tenant: str | None) -> list[StoredInput]:
        where, params = ("WHERE tenant = %s", (tenant,)) if tenant is not None else ("", ())
        with self._pool.connection() as conn:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM amc_inputs {where} ORDER BY created_at, tenant, sha256", params
            ).fetchall()
        return [_input(row) for row in rows]

    def total_bytes(self, tenant: str) -> int:
        with self._pool.connection() as conn:
            row = conn.execute("SELECT coalesce(sum(size), 0) FROM amc_inputs WHERE tenant = %s", (tenant,)).fetchone()
        return int(row[0]) if row else 0

    def remove(self, tenant: str, sha256: str) -> bool:
        with self._pool.connection() as conn:
            cursor = conn.execute(
                "DELETE FROM amc_inputs WHERE tenant = %s AND sha256 = %s", (tenant, checked_sha256(sha256))
            )
            return cursor.rowcount > 0

    def digests(self) -> set[str]:
        with self._pool.connection() as conn:
            return {sha256 for (sha256,) in conn.execute("SELECT DISTINCT sha256 FROM amc_inputs")}


def _one(conn: psycopg.Connection, where: str, params: tuple[object, ...]) -> StoredInput | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM amc_inputs {where}", params).fetchone()
    return None if row is None else _input(row)


def _input(row: tuple[object, ...]) -> StoredInput:
    tenant, sha256, size, created_at = row
    return StoredInput(str(tenant), str(sha256), int(str(size)), int(str(created_at)))
