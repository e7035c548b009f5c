"""Artifact uploads over HTTP against a real `amc serve`, beside the raw cost of durable
files, and what the uploads do to lease renewals, all in one run.

    python bench/artifacts_upload.py [--reps 3] [--renewers 16] [--json]     # about 1-2 minutes

One `amc serve` (LMDB store, artifact files in its data directory) runs for the whole run.
A separate process makes `--renewers` hosts renew their leases back to back (closed loop,
over keep-alive connections) while told to, and counts the renewals answered in every 50 ms.

Each repetition runs, for each cell (200 KiB and 2 MiB artifacts, from 1 and from 8
concurrent hosts), in this order:

- **uploads alone**: a fixed number of uploads; every host PUTs distinct bytes under new
  names for its running task's step, one after another over its own connection (`httpx`, one
  thread per host), each timed from the request to its 201: MB/s, p50/p99;
- **renewals alone** (1.5 s): renewals/s quiet;
- **uploads with renewals**: the same uploads again while the renewals run: renewals/s
  during uploads (and the uploads' MB/s under that load);
- **raw**: the same number of files of the same sizes, written by the same number of
  threads into a directory on the same file system: write, fsync, rename to the final name,
  fsync the directory. The least durability can cost; uploads alone over this is the ratio.

Figures are medians over the repetitions (MB/s = 10^6 bytes per second); p50/p99 latencies
pool every upload of every repetition. The bytes of each cell are deleted after it (the
records stay; nothing reads them), so the run needs well under 1 GB of disk.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's directory comes first on sys.path; keep it from shadowing
# the standard library's `http` with bench/http.py.
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)

import argparse
import asyncio
import json
import multiprocessing
import os
import re
import shutil
import statistics
import tempfile
import threading
import time

import httpx

from amc.cli.launch import LaunchError, Server

KIB = 1024
CELLS = [  # (artifact bytes, concurrent hosts, uploads per host): each about 1-3 s here
    (200 * KIB, 1, 100),
    (200 * KIB, 8, 30),
    (2048 * KIB, 1, 40),
    (2048 * KIB, 8, 12),
]
BUCKET_S = 0.05
QUIET_S = 1.5  # renewals alone, just before each cell's uploads with renewals


# -- the server and its tasks ---------------------------------------------------------------


def start_server(data: Path, tokens: Path) -> Server:
    options = ["--lease-seconds", "600"]
    options += [
        "--max-task-artifact-bytes",
        str(1 << 40),
    ]  # the bench stores far more than one task's default allowance
    try:
        return Server(data, *options, tokens=tokens)
    except LaunchError as error:
        raise SystemExit(error.report()) from None


def running_tasks(url: str, hosts: list[str]) -> list[dict]:
    """One running task per host: [{host, token, path, lease_id}]."""
    admin = {"Authorization": "Bearer bench-admin"}
    plan = {"steps": [{"id": "s", "action": "wait", "args": {"seconds": 60}}]}
    found = []
    with httpx.Client(base_url=url, timeout=30) as http:
        for host in hosts:
            headers = {"Authorization": f"Bearer bench-{host}"}
            http.post("/v1/tasks", headers=admin, json={"plan": plan, "tenant": "bench"}).raise_for_status()
            http.put(
                f"/v1/hosts/{host}", headers=headers, json={"devices": [{"serial": f"{host}-d"}]}
            ).raise_for_status()
            claim = http.post(f"/v1/hosts/{host}/claim", headers=headers, json={})
            claim.raise_for_status()
            lease = claim.json()
            path = f"/v1/tasks/{lease['task_id']}/attempts/{lease['attempt']}"
            http.post(path + "/start", headers=headers, json={"lease_id": lease["lease_id"]}).raise_for_status()
            found.append({"host": host, "token": f"bench-{host}", "path": path, "lease_id": lease["lease_id"]})
    return found


# -- renewals, in their own process ---------------------------------------------------------


async def _renew(address: tuple[str, int], target: dict, counts: list[int], origin: float, stop: asyncio.Event, go):
    body = json.dumps({"lease_id": target["lease_id"]})
    request = (
        f"POST {target['path']}/renew HTTP/1.1\r\nHost: {address[0]}:{address[1]}\r\n"
        f"Authorization: Bearer {target['token']}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n{body}"
    ).encode()
    reader, writer = await asyncio.open_connection(*address)
    try:
        while not stop.is_set():
            if not go.is_set():
                await asyncio.sleep(0.01)
                continue
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            found = re.search(rb"(?i)content-length: *(\d+)", head)
            await reader.readexactly(int(found.group(1)) if found else 0)
            if head.startswith(b"HTTP/1.1 200"):
                bucket = int((time.monotonic() - origin) / BUCKET_S)
                if bucket < len(counts):
                    counts[bucket] += 1
    finally:
        writer.close()


def renewer(url: str, targets: list[dict], origin: float, limit_s: float, ready, go, results) -> None:
    """Renew back to back while `go` is set, until told to stop; send the counts per bucket
    (CLOCK_MONOTONIC is one clock for every process of the machine, so the buckets line up
    with the phases)."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    counts = [0] * int(limit_s / BUCKET_S)

    async def run() -> None:
        stop = asyncio.Event()
        loops = [asyncio.create_task(_renew((host, int(port)), t, counts, origin, stop, go)) for t in targets]
        ready.set()
        while time.monotonic() - origin < limit_s and not results.poll():
            await asyncio.sleep(0.1)
        stop.set()
        await asyncio.gather(*loops, return_exceptions=True)

    asyncio.run(run())
    results.send(counts)


def rate(counts: list[int], origin: float, start: float, end: float) -> float:
    """Renewals/s over [start, end): the whole buckets inside it."""
    first = int((start - origin) / BUCKET_S) + 1
    last = int((end - origin) / BUCKET_S)
    if last <= first:
        return float("nan")
    return sum(counts[first:last]) / ((last - first) * BUCKET_S)


# -- uploads and their raw counterpart -------------------------------------------------------


def payloads(size: int, seed: int):
    """Distinct bytes per call, cheaply: a counter in front of one random buffer."""
    base = os.urandom(size)
    counter = seed * 1_000_000
    while True:
        counter += 1
        yield counter.to_bytes(16, "big") + base[16:]


def upload_cell(url: str, targets: list[dict], size: int, uploads: int, rep: str) -> tuple[float, list[float]]:
    """Every target host uploads `uploads` artifacts of `size` bytes, concurrently; (seconds, latencies)."""
    latencies: list[float] = []
    failures: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(len(targets) + 1)

    def one_host(index: int, target: dict) -> None:
        source = payloads(size, hash((rep, index)) % 1_000_000)
        headers = {
            "Authorization": f"Bearer {target['token']}",
            "Amc-Lease-Id": target["lease_id"],
            "Content-Type": "application/octet-stream",
        }
        with httpx.Client(base_url=url, timeout=60) as http:
            http.get("/v1/health")  # the connection, before the clock starts
            data = [next(source) for _ in range(uploads)]
            barrier.wait()
            mine = []
            for n, body in enumerate(data):
                name = f"r{rep}-{size}-{len(targets)}-{index}-{n}.bin"
                started = time.perf_counter()
                response = http.put(
                    f"{target['path']}/artifacts/{name}", content=body, params={"step": "s"}, headers=headers
                )
                mine.append(time.perf_counter() - started)
                if response.status_code != 201:
                    with lock:
                        failures.append(f"{name}: {response.status_code} {response.text[:200]}")
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=one_host, args=(i, t)) for i, t in enumerate(targets)]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    if failures or len(latencies) != len(targets) * uploads:
        raise SystemExit(f"{len(latencies)} of {len(targets) * uploads} uploads answered; refused: {failures[:3]}")
    return time.perf_counter() - started, latencies


def raw_cell(directory: Path, writers: int, size: int, files: int, rep: int) -> float:
    """`writers` threads each make `files` durable files of `size` bytes; the seconds it took."""
    barrier = threading.Barrier(writers + 1)

    def one_writer(index: int) -> None:
        source = payloads(size, 50 + rep * 100 + index)
        data = [next(source) for _ in range(files)]
        barrier.wait()
        for n, body in enumerate(data):
            temporary = directory / f".w{index}-{n}.part"
            with open(temporary, "wb") as file:
                file.write(body)
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, directory / f"w{index}-{n}")
            fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    threads = [threading.Thread(target=one_writer, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    return time.perf_counter() - started


def forget_blobs(data: Path) -> None:
    """Delete the artifact files of a finished cell (their records stay; nothing reads them)."""
    root = data / "artifacts"
    for shard in root.iterdir():
        if len(shard.name) == 2 and shard.is_dir():
            for blob in shard.iterdir():
                blob.unlink()


def percentile(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))]


# -- the run ---------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3, help="repetitions of every cell (default 3)")
    parser.add_argument("--renewers", type=int, default=16, help="hosts renewing back to back (default 16)")
    parser.add_argument("--dir", help="where the data directory goes (default: a temporary directory)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    root = Path(tempfile.mkdtemp(dir=args.dir, prefix="amc-bench-uploads-"))
    uploaders = [f"u{i}" for i in range(max(w for _, w, _ in CELLS))]
    renewing = [f"r{i}" for i in range(args.renewers)]
    tokens = root / "tokens.json"
    entries = [{"token": "bench-admin", "role": "admin"}]
    entries += [{"token": f"bench-{h}", "role": "host", "host_id": h} for h in uploaders + renewing]
    tokens.write_text(json.dumps(entries))
    tokens.chmod(0o600)
    data, raw_dir = root / "data", root / "raw"
    raw_dir.mkdir()
    server = start_server(data, tokens)
    url = server.url
    ctx = multiprocessing.get_context("spawn")
    renewals = None
    try:
        upload_targets = running_tasks(url, uploaders)
        renew_targets = running_tasks(url, renewing)
        origin = time.monotonic()
        ready, go, (mine, theirs) = ctx.Event(), ctx.Event(), ctx.Pipe()
        renewals = ctx.Process(target=renewer, args=(url, renew_targets, origin, 1800.0, ready, go, theirs))
        renewals.start()
        ready.wait(30)
        go.set()
        time.sleep(1.0)  # connections open, the server warm
        go.clear()
        phases: list[dict] = []
        for rep in range(args.reps):
            for size, writers, uploads in CELLS:
                count = writers * uploads
                cell = {"rep": rep, "kind": "upload", "size": size, "writers": writers}
                # Uploads alone: throughput and latency.
                seconds, latencies = upload_cell(url, upload_targets[:writers], size, uploads, f"{rep}a")
                forget_blobs(data)
                # Renewals alone, then the same uploads while they run: what each does to the other.
                go.set()
                time.sleep(0.2)
                quiet = time.monotonic()
                time.sleep(QUIET_S)
                phases.append({"rep": rep, "kind": "quiet", "size": size, "writers": writers, "start": quiet})
                phases[-1]["end"] = start = time.monotonic()
                busy_seconds, _ = upload_cell(url, upload_targets[:writers], size, uploads, f"{rep}b")
                cell.update(start=start, end=time.monotonic())
                go.clear()
                forget_blobs(data)
                raw_seconds = raw_cell(raw_dir, writers, size, uploads, rep)
                shutil.rmtree(raw_dir)
                raw_dir.mkdir()
                cell.update(
                    mb_s=count * size / seconds / 1e6,
                    busy_mb_s=count * size / busy_seconds / 1e6,
                    raw_mb_s=count * size / raw_seconds / 1e6,
                    latencies=latencies,
                )
                phases.append(cell)
        mine.send("stop")
        counts = mine.recv()
        renewals.join(30)
    finally:
        if renewals is not None and renewals.is_alive():
            renewals.terminate()
        server.stop(30)
        shutil.rmtree(root, ignore_errors=True)

    quiet = [rate(counts, origin, p["start"], p["end"]) for p in phases if p["kind"] == "quiet"]
    cells = []
    for size, writers, _ in CELLS:
        mine = [p for p in phases if p["kind"] == "upload" and p["size"] == size and p["writers"] == writers]
        before = [p for p in phases if p["kind"] == "quiet" and p["size"] == size and p["writers"] == writers]
        latencies = [latency for p in mine for latency in p["latencies"]]
        during = [rate(counts, origin, p["start"], p["end"]) for p in mine]
        alone = [rate(counts, origin, p["start"], p["end"]) for p in before]
        cells.append(
            {
                "size_kib": size // KIB,
                "hosts": writers,
                "uploads": len(latencies),
                "mb_s": round(statistics.median(p["mb_s"] for p in mine), 1),
                "p50_ms": round(percentile(latencies, 0.50) * 1000, 1),
                "p99_ms": round(percentile(latencies, 0.99) * 1000, 1),
                "raw_mb_s": round(statistics.median(p["raw_mb_s"] for p in mine), 1),
                "ratio_vs_raw": round(statistics.median(p["mb_s"] / p["raw_mb_s"] for p in mine), 2),
                "mb_s_with_renewals": round(statistics.median(p["busy_mb_s"] for p in mine), 1),
                "renewals_s_quiet": round(statistics.median(alone)),
                "renewals_s_during": round(statistics.median(during)),
                "renewals_ratio": round(statistics.median(d / q for d, q in zip(during, alone)), 2),
            }
        )
    result = {
        "reps": args.reps,
        "renewing_hosts": args.renewers,
        "renewals_s_quiet": round(statistics.median(quiet)),
        "cells": cells,
        "cores": os.cpu_count(),
        "load_average_before": round(load_before, 2),
        "load_average_after": round(os.getloadavg()[0], 2),
    }
    if args.json:
        print(json.dumps(result))
        return
    print(
        f"artifact uploads through amc serve (LMDB store, files in its data directory), medians of {args.reps} reps; "
        f"{args.renewers} hosts renewing back to back in the renewal windows"
    )
    print(f"  renewals/s quiet (all quiet windows): {result['renewals_s_quiet']}")
    print(
        "  size     hosts  uploads   MB/s  p50 ms  p99 ms  raw MB/s  vs raw"
        "  | with renewals: MB/s  renewals/s quiet -> during (ratio)"
    )
    for c in cells:
        print(
            f"  {c['size_kib']:>4} KiB  {c['hosts']:>5}  {c['uploads']:>7}  {c['mb_s']:>5}  {c['p50_ms']:>6}  "
            f"{c['p99_ms']:>6}  {c['raw_mb_s']:>8}  {c['ratio_vs_raw']:>6}  | {c['mb_s_with_renewals']:>19}  "
            f"{c['renewals_s_quiet']:>16} -> {c['renewals_s_during']} ({c['renewals_ratio']})"
        )
    print(
        f"  {result['cores']} cores; load average {result['load_average_before']} before, "
        f"{result['load_average_after']} after"
    )


if __name__ == "__main__":
    main()
