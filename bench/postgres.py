"""The PostgreSQL store: durable commands/s beside the LMDB store and a job-queue peer.

Measured in one run, on one machine, one cluster (fsync on, the Debian defaults otherwise):

amc on PostgreSQL
    `PostgresService.execute` from 1, 8 and 64 concurrent callers (coroutines on one event
    loop, as the HTTP server runs them), each its own host with one device, looping over a
    task lifecycle: submit, claim, start, renew, renew, report done (six commands, each
    acknowledged after its batch committed): bench/store.py's loop.
amc on LMDB
    the same callers on `LmdbService` in a temporary directory, in the same run.
peer
    a minimal PostgreSQL job queue of the same lifecycle, the way River, Oban or
    procrastinate work: one transaction per command, claims by `FOR UPDATE SKIP LOCKED`,
    each caller its own psycopg connection. It keeps no event log and no history, so it
    writes less per command than amc does.

Run: PYTHONPATH=. python -P bench/postgres.py [--seconds 5] [--callers 1,8,64]
(the cluster comes from tests/support/postgres.py: initdb into a temporary directory).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import psycopg

from amc.adapters.lmdb import LmdbService
from amc.adapters.postgres import PostgresService
from bench.store import lifecycle_loop  # the same lifecycle as the LMDB store's bench
from tests.support.postgres import Cluster


def amc_run(service, callers: int, seconds: float) -> dict:
    latencies: list[float] = []

    async def main():
        await asyncio.gather(*(lifecycle_loop(service, -c - 1, time.perf_counter() + 0.3, []) for c in range(callers)))
        started = time.perf_counter()
        counts = await asyncio.gather(
            *(lifecycle_loop(service, c, started + seconds, latencies) for c in range(callers))
        )
        return sum(counts) / (time.perf_counter() - started)

    rate = asyncio.run(main())
    return {"rate": rate, "p50": statistics.median(latencies) * 1e3, "p99": _p99(latencies) * 1e3}


# --- the peer ------------------------------------------------------------------------------

PEER_SCHEMA = """
CREATE TABLE jobs (
    id bigserial PRIMARY KEY,
    task_id text UNIQUE NOT NULL,
    tenant text NOT NULL,
    plan jsonb NOT NULL,
    priority int NOT NULL DEFAULT 0,
    status text NOT NULL DEFAULT 'queued',
    host_id text,
    lease_id text,
    lease_expires_at timestamptz,
    attempts int NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX jobs_queue ON jobs (priority DESC, id) WHERE status = 'queued';
"""
PEER_PLAN = '{"steps": [{"id": "open", "action": "launch", "args": {"package": "com.example"}}, {"id": "shot", "action": "screenshot"}]}'
CLAIM = """
UPDATE jobs SET status = 'assigned', host_id = %s, lease_id = %s, attempts = attempts + 1,
       lease_expires_at = now() + interval '30 seconds', updated_at = now()
WHERE id = (SELECT id FROM jobs WHERE status = 'queued' ORDER BY priority DESC, id FOR UPDATE SKIP LOCKED LIMIT 1)
RETURNING id
"""
START = (
    "UPDATE jobs SET status = 'dispatched', updated_at = now() WHERE id = %s AND lease_id = %s AND status = 'assigned'"
)
RENEW = (
    "UPDATE jobs SET lease_expires_at = now() + interval '30 seconds', updated_at = now() "
    "WHERE id = %s AND lease_id = %s AND status = 'dispatched'"
)
DONE = "UPDATE jobs SET status = 'done', lease_id = NULL, updated_at = now() WHERE id = %s AND lease_id = %s"


async def peer_loop(url: str, caller: int, stop_at: float, latencies: list[float]) -> int:
    conn = await psycopg.AsyncConnection.connect(url, autocommit=True)  # one transaction per statement
    count, n = 0, 0
    clock = time.perf_counter

    async def run(sql: str, params: tuple):
        nonlocal count
        started = clock()
        cursor = await conn.execute(sql, params)
        latencies.append(clock() - started)
        count += 1
        return cursor

    try:
        while clock() < stop_at:
            n += 1
            await run(
                "INSERT INTO jobs (task_id, tenant, plan) VALUES (%s, %s, %s)",
                (f"t{caller}-{n}-{stop_at}", f"tenant{caller % 4}", PEER_PLAN),
            )
            lease = f"L{caller}-{n}"
            row = await (await run(CLAIM, (f"h{caller}", lease))).fetchone()
            if row is None:
                continue
            await run(START, (row[0], lease))
            await run(RENEW, (row[0], lease))
            await run(RENEW, (row[0], lease))
            await run(DONE, (row[0], lease))
    finally:
        await conn.close()
    return count


def peer_run(url: str, callers: int, seconds: float) -> dict:
    latencies: list[float] = []

    async def main():
        await asyncio.gather(*(peer_loop(url, -c - 1, time.perf_counter() + 0.3, []) for c in range(callers)))
        started = time.perf_counter()
        counts = await asyncio.gather(*(peer_loop(url, c, started + seconds, latencies) for c in range(callers)))
        return sum(counts) / (time.perf_counter() - started)

    rate = asyncio.run(main())
    return {"rate": rate, "p50": statistics.median(latencies) * 1e3, "p99": _p99(latencies) * 1e3}


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--callers", default="1,8,64")
    args = parser.parse_args()
    callers = [int(c) for c in args.callers.split(",")]
    scratch = Path(tempfile.mkdtemp(prefix="amc-bench-pg-"))
    rows = []
    with Cluster(fsync=True) as cluster:
        for n in callers:
            url = cluster.new_database("bench")
            with PostgresService.open(url) as service:
                pg = amc_run(service, n, args.seconds)
            with LmdbService.open(scratch / f"lmdb{n}") as service:
                lm = amc_run(service, n, args.seconds)
            peer_url = cluster.new_database("peer")
            with psycopg.connect(peer_url, autocommit=True) as conn:
                conn.execute(PEER_SCHEMA)
            peer = peer_run(peer_url, n, args.seconds)
            rows.append((n, pg, lm, peer))
            print(
                f"{n:>3} callers: amc/PostgreSQL {pg['rate']:8.0f}/s (p50 {pg['p50']:.1f} ms, p99 {pg['p99']:.1f} ms)"
                f" | amc/LMDB {lm['rate']:8.0f}/s (p50 {lm['p50']:.1f} ms)"
                f" | peer {peer['rate']:8.0f}/s (p50 {peer['p50']:.1f} ms, p99 {peer['p99']:.1f} ms)"
                f" | amc/PostgreSQL ÷ peer {pg['rate'] / peer['rate']:.1f}×",
                flush=True,
            )
    shutil.rmtree(scratch, ignore_errors=True)
    print()
    print("| callers | amc on PostgreSQL | amc on LMDB | job-queue peer | amc/PG ÷ peer |")
    print("|---:|---:|---:|---:|---:|")
    for n, pg, lm, peer in rows:
        print(
            f"| {n} | {pg['rate']:,.0f}/s (p99 {pg['p99']:.1f} ms) | {lm['rate']:,.0f}/s | "
            f"{peer['rate']:,.0f}/s (p99 {peer['p99']:.1f} ms) | {pg['rate'] / peer['rate']:.1f}× |"
        )


if __name__ == "__main__":
    main()
