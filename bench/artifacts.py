"""Artifact bytes: `FileBlobStore` uploads beside raw write + fsync + rename of the same bytes.

Measured in one run, on one file system, alternating the modes round by round so that the
ratios hold on a noisy machine:

raw
    what durability costs at the least: write the bytes to a temporary file in 64 KiB
    pieces, fsync it, rename it into a directory, fsync the directory. No hashing.
store
    `FileBlobStore.begin()`, `write()` in 64 KiB pieces (as a request body arrives),
    `finish()`: the same steps plus sha256 and the content address.
store_chunks
    the same uploads through `amc.service.store_chunks` from coroutines on one event loop,
    as the HTTP server will run them (the file work in the loop's default executor).

Each mode runs for 200 KiB and 2 MiB blobs from 1 and 8 concurrent writers (threads, or
coroutines for store_chunks), every blob distinct. Reported: MB/s (10^6 bytes) and the p50
and p99 latency of one blob from its first byte to `finish()` returning; MB/s is the median
of the rounds, the latencies are over every blob of every round. The ratio is store MB/s
over raw MB/s of the same round, median of the rounds. CPU µs per blob is the process's CPU
time (user and system, the kernel's page copies included) over the blobs of the cell: on a
shared machine, the figure least moved by the neighbours.

Run: python bench/artifacts.py [--rounds 3] [--seconds 0.5] [--dir DIR]   (about 35 s)
     python bench/artifacts.py --long          (--rounds 5 --seconds 4)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from amc.adapters.lmdb.blobs import FileBlobStore
from amc.service import store_chunks

PIECE = 64 * 1024
SIZES = {"200 KiB": 200 * 1024, "2 MiB": 2 * 1024 * 1024}
WRITERS = (1, 8)
MODES = ("raw", "store", "store_chunks")


def payloads(size: int, writer: int) -> Callable[[], bytes]:
    """Distinct bytes on every call (a counter over random bytes), made before the clock runs."""
    base = bytearray(os.urandom(size))
    counter = 0

    def next_payload() -> bytes:
        nonlocal counter
        counter += 1
        base[:16] = f"{writer:04d}{counter:012d}".encode()
        return bytes(base)

    return next_payload


def raw_put(directory: Path, name: str, data: bytes) -> None:
    temp = directory / f"{name}.part"
    with open(temp, "wb") as file:
        for at in range(0, len(data), PIECE):
            file.write(data[at : at + PIECE])
        file.flush()
        os.fsync(file.fileno())
    os.replace(temp, directory / name)
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def store_put(store: FileBlobStore, data: bytes) -> None:
    with store.begin() as writer:
        for at in range(0, len(data), PIECE):
            writer.write(data[at : at + PIECE])
        writer.finish()


def run_threads(
    mode: str, store: FileBlobStore, raw_dirs: list[Path], size: int, writers: int, seconds: float
) -> tuple[int, float, list[float]]:
    """(bytes stored, elapsed seconds, latencies in seconds) of `writers` threads for `seconds`."""
    sources = [payloads(size, n) for n in range(writers)]
    latencies: list[list[float]] = [[] for _ in range(writers)]
    start = threading.Barrier(writers + 1)
    deadline = 0.0

    def work(n: int) -> None:
        start.wait()
        made = 0
        while time.perf_counter() < deadline:
            data = sources[n]()
            began = time.perf_counter()
            if mode == "raw":
                raw_put(raw_dirs[(n * 31 + made) % 256], f"{n}-{made}", data)
            else:
                store_put(store, data)
            latencies[n].append(time.perf_counter() - began)
            made += 1

    threads = [threading.Thread(target=work, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    deadline = time.perf_counter() + seconds
    began = time.perf_counter()
    start.wait()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    flat = [x for per in latencies for x in per]
    return len(flat) * size, elapsed, flat


def run_coroutines(store: FileBlobStore, size: int, writers: int, seconds: float) -> tuple[int, float, list[float]]:
    sources = [payloads(size, n) for n in range(writers)]
    latencies: list[float] = []

    async def body(data: bytes):
        for at in range(0, len(data), PIECE):
            yield data[at : at + PIECE]

    async def main() -> float:
        deadline = time.perf_counter() + seconds

        async def writer(n: int) -> None:
            while time.perf_counter() < deadline:
                data = sources[n]()
                began = time.perf_counter()
                await store_chunks(store, body(data), limit=None)
                latencies.append(time.perf_counter() - began)

        began = time.perf_counter()
        await asyncio.gather(*(writer(n) for n in range(writers)))
        return time.perf_counter() - began

    elapsed = asyncio.run(main())
    return len(latencies) * size, elapsed, latencies


class Target:
    """A store and the raw directories beside it, made once and emptied after every cell."""

    def __init__(self, root: Path):
        self.store = FileBlobStore(root / "artifacts")
        self.raw_dirs = [root / "raw" / f"{n:02x}" for n in range(256)]
        for directory in self.raw_dirs:
            directory.mkdir(parents=True, exist_ok=True)

    def measure(self, mode: str, size: int, writers: int, seconds: float) -> tuple[float, float, list[float]]:
        """MB/s, CPU µs per blob and the latencies of one cell; the files are removed afterwards."""
        cpu = time.process_time()
        try:
            if mode == "store_chunks":
                stored, elapsed, latencies = run_coroutines(self.store, size, writers, seconds)
            else:
                stored, elapsed, latencies = run_threads(mode, self.store, self.raw_dirs, size, writers, seconds)
            cpu = time.process_time() - cpu
        finally:
            self.empty()
        return stored / elapsed / 1e6, cpu / max(1, len(latencies)) * 1e6, latencies

    def empty(self) -> None:
        for sha256 in list(self.store.digests()):
            self.store.delete(sha256)
        for directory in self.raw_dirs:
            for entry in os.scandir(directory):
                os.unlink(entry.path)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=0.5, help="per mode, size and writer count, per round")
    parser.add_argument("--long", action="store_true", help="--rounds 5 --seconds 4")
    parser.add_argument("--dir", help="where to write (default: a temporary directory)")
    args = parser.parse_args()
    if args.long:
        args.rounds, args.seconds = 5, 4.0
    root = Path(tempfile.mkdtemp(dir=args.dir, prefix="amc-bench-artifacts-"))
    load_before = os.getloadavg()
    results: dict[tuple[str, str, int], list[float]] = {}
    cpus: dict[tuple[str, str, int], list[float]] = {}
    latencies: dict[tuple[str, str, int], list[float]] = {}
    target = Target(root)
    try:
        for _ in range(args.rounds):
            for label, size in SIZES.items():
                for writers in WRITERS:
                    for mode in MODES:
                        rate, cpu, lat = target.measure(mode, size, writers, args.seconds)
                        results.setdefault((mode, label, writers), []).append(rate)
                        cpus.setdefault((mode, label, writers), []).append(cpu)
                        latencies.setdefault((mode, label, writers), []).extend(lat)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    load_after = os.getloadavg()

    print(
        f"load average before: {' '.join(f'{x:.2f}' for x in load_before)}, "
        f"after: {' '.join(f'{x:.2f}' for x in load_after)} ({os.cpu_count()} CPUs)"
    )
    print(f"{args.rounds} rounds of {args.seconds:g} s per cell; MB/s: median of rounds; latency: all blobs\n")
    print("| size | writers | mode | MB/s | blobs/s | p50 ms | p99 ms | MB/s vs raw | CPU µs/blob |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|")
    for label, size in SIZES.items():
        for writers in WRITERS:
            raw_rounds = results[("raw", label, writers)]
            for mode in MODES:
                rounds = results[(mode, label, writers)]
                lat = latencies[(mode, label, writers)]
                rate = statistics.median(rounds)
                ratio = statistics.median(r / raw for r, raw in zip(rounds, raw_rounds))
                print(
                    f"| {label} | {writers} | {mode} | {rate:,.1f} | {rate * 1e6 / size:,.0f} | "
                    f"{percentile(lat, 0.5) * 1e3:.2f} | {percentile(lat, 0.99) * 1e3:.2f} | {ratio:.2f} | "
                    f"{statistics.median(cpus[(mode, label, writers)]):,.0f} |"
                )


if __name__ == "__main__":
    main()
