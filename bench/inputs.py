"""Inputs (specs/protocol.md Part F): upload MB/s against a raw write+fsync+rename of the same
bytes, in one run; and the Host Agent cache's first and second fetch of a 50 MiB input.

    .venv/bin/python bench/inputs.py [--mib 50] [--rounds 5]

A real `amc serve` (LMDB store, its blob files and input records) started by the launcher;
the client here sends each input with `PUT /v1/inputs/{sha256}` and, in the same round and
on the same file system, writes the same bytes to a temporary file, fsyncs it, renames it and
fsyncs the directory. Rounds alternate which goes first. The cache is `amc.agent.inputs` for
host h1, which holds an attempt of a task naming the input (made in the store before the
server starts: no action takes an input yet). Reported: medians over the rounds.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's directory comes first on sys.path, and bench/http.py would
# then shadow the standard library's http.
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)

import argparse
import asyncio
import hashlib
import json
import os
import statistics
import tempfile
import time

import httpx

from amc.adapters.lmdb import LmdbService
from amc.agent.inputs import InputCache
from amc.cli.launch import LaunchError, Server
from amc.core import inputs
from amc.core.commands import ClaimTask, RegisterHost, SubmitTask
from amc.core.records import DeviceSpec, Plan, Step

CLIENT, HOST = "bench-inputs-client", "bench-inputs-host-h1"


def raw_write(directory: Path, data: bytes) -> float:
    start = time.perf_counter()
    fd, name = tempfile.mkstemp(dir=directory)
    with os.fdopen(fd, "wb") as file:
        for at in range(0, len(data), 256 * 1024):  # as a body arrives, in pieces
            file.write(data[at : at + 256 * 1024])
        file.flush()
        os.fsync(file.fileno())
    os.replace(name, directory / hashlib.sha256(data).hexdigest())
    dir_fd = os.open(directory, os.O_RDONLY)
    os.fsync(dir_fd)
    os.close(dir_fd)
    return time.perf_counter() - start


def upload(http: httpx.Client, data: bytes) -> float:
    digest = hashlib.sha256(data).hexdigest()
    start = time.perf_counter()
    response = http.put(f"/v1/inputs/{digest}", content=data)
    elapsed = time.perf_counter() - start
    assert response.status_code == 201, response.text
    return elapsed


def held_task(data_dir: Path, digest: str) -> None:
    """A task naming `digest`, claimed by h1 for an hour, in the store before the server starts."""
    service = LmdbService.open(data_dir)
    try:
        step = Step(id="s", action="fixture", args={"file": inputs.reference(digest)})
        service.execute_sync(SubmitTask(now=0, task_id="t_bench", tenant="acme", plan=Plan(steps=(step,))))
        service.execute_sync(RegisterHost(now=0, host_id="h1", devices=(DeviceSpec(serial="d1"),)))
        decision = service.execute_sync(ClaimTask(now=0, host_id="h1", lease_id="l_bench", lease_ms=3_600_000))
        assert decision.rejection is None
    finally:
        service.close()


async def fetch_twice(directory: Path, url: str, digest: str) -> tuple[float, int, float, int]:
    cache = InputCache(directory, url, HOST)
    try:
        start = time.perf_counter()
        await cache.path_for("sha256:" + digest)
        first, first_bytes = time.perf_counter() - start, cache.fetched_bytes
        start = time.perf_counter()
        await cache.path_for("sha256:" + digest)
        return first, first_bytes, time.perf_counter() - start, cache.fetched_bytes - first_bytes
    finally:
        await cache.aclose()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    size = options.mib * 1024 * 1024
    root = Path(tempfile.mkdtemp(prefix="amc-bench-inputs-"))
    data_dir, raw_dir, tokens = root / "data", root / "raw", root / "tokens.json"
    raw_dir.mkdir()
    tokens.write_text(
        json.dumps(
            [{"token": CLIENT, "role": "client", "tenant": "acme"}, {"token": HOST, "role": "host", "host_id": "h1"}]
        )
    )
    cached = os.urandom(size)
    held_task(data_dir, hashlib.sha256(cached).hexdigest())
    try:
        server = Server(data_dir, tokens=tokens)
    except LaunchError as error:
        raise SystemExit(error.report()) from None
    uploads, raws = [], []
    try:
        headers = {"Authorization": f"Bearer {CLIENT}"}
        with httpx.Client(base_url=server.url, headers=headers, timeout=600) as http:
            for round_number in range(options.rounds):
                data = os.urandom(size)
                if round_number % 2:
                    raws.append(raw_write(raw_dir, data))
                    uploads.append(upload(http, data))
                else:
                    uploads.append(upload(http, data))
                    raws.append(raw_write(raw_dir, data))
            upload(http, cached)
        digest = hashlib.sha256(cached).hexdigest()
        first, first_bytes, second, second_bytes = asyncio.run(fetch_twice(root / "cache", server.url, digest))
    finally:
        server.stop(10)
    mb = size / 1e6
    up, raw = statistics.median(uploads), statistics.median(raws)
    print(f"load average {os.getloadavg()[0]:.2f}; {options.mib} MiB x {options.rounds} rounds, medians")
    print(f"upload, PUT /v1/inputs (streamed, sha256, fsync, rename, record): {mb / up:6.0f} MB/s")
    print(f"raw write + fsync + rename of the same bytes:                      {mb / raw:6.0f} MB/s")
    print(f"upload / raw: {raw / up:.2f}")
    print(f"cache, first fetch:  {first * 1000:6.0f} ms, {first_bytes} bytes from the server")
    print(f"cache, second fetch: {second * 1000:6.0f} ms, {second_bytes} bytes from the server (its sha256 checked)")


if __name__ == "__main__":
    main()
