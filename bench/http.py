"""Lease renewals from many concurrent simulated hosts against a real `amc serve` process.

    python bench/http.py [--hosts 200] [--seconds 10] [--store lmdb|memory] [--rate 3000]
                         [--pythonpath DIR] [--json]

Each simulated host registers one device, claims a task and starts it, then renews its
lease over its own keep-alive connection, one request at a time, as a Host Agent does.
By default each host renews again as soon as it has its answer (closed loop: the most
the server can do; with 200 hosts always waiting, Little's law puts the mean latency at
200 / throughput). With ``--rate R`` the hosts together offer R renewals/s, each on a
fixed schedule, and latency is measured from when a renewal was due. The load generator
is a lean asyncio HTTP/1.1 client on raw sockets (httpx would saturate the client core
long before the server), running in this process, on the same machine as the server.

Prints requests/s, latency percentiles, errors, and the CPU the server and the client
used, which tells what limits the rate.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's directory comes first on sys.path, and this file's name
# would then shadow the standard library's `http` package (which httpx imports).
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)

import argparse
import asyncio
import json
import os
import random
import re
import statistics
import subprocess
import tempfile
import time
from urllib.parse import urlsplit

import httpx

from amc.cli.launch import LaunchError, Server

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (all its threads), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def server_env(extra_path: str | None) -> dict[str, str]:
    env = dict(os.environ)
    if extra_path:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (extra_path, env.get("PYTHONPATH")) if p)
    return env


def fast_path_available(env: dict[str, str]) -> dict[str, bool]:
    """Which of uvicorn's optional accelerators the server process can import."""
    found = {}
    for module in ("httptools", "uvloop"):
        probe = subprocess.run([sys.executable, "-c", f"import {module}"], env=env, capture_output=True)
        found[module] = probe.returncode == 0
    return found


def start_server(data: Path, tokens: Path, store: str, env: dict[str, str]) -> Server:
    options = ["--lease-seconds", "600", "--store", store]
    try:
        return Server(data, *options, tokens=tokens, env=env)
    except LaunchError as error:
        raise SystemExit(error.report()) from None


def prepare(url: str, hosts: int) -> list[tuple[str, str, str]]:
    """Register `hosts` hosts, submit one task each, claim and start: [(token, path, body)]."""
    admin = {"Authorization": "Bearer bench-admin"}
    plan = {"steps": [{"id": "w", "action": "wait", "args": {"seconds": 60}}]}
    targets = []
    with httpx.Client(base_url=url, timeout=30) as http:
        for _ in range(hosts):
            http.post("/v1/tasks", headers=admin, json={"plan": plan, "tenant": "bench"}).raise_for_status()
        for i in range(hosts):
            headers = {"Authorization": f"Bearer bench-host-{i}"}
            http.put(
                f"/v1/hosts/h{i}", headers=headers, json={"devices": [{"serial": f"dev-{i}", "attributes": {}}]}
            ).raise_for_status()
            claim = http.post(f"/v1/hosts/h{i}/claim", headers=headers, json={})
            claim.raise_for_status()
            lease = claim.json()
            path = f"/v1/tasks/{lease['task_id']}/attempts/{lease['attempt']}"
            body = json.dumps({"lease_id": lease["lease_id"]})
            http.post(path + "/start", headers=headers, content=body).raise_for_status()
            targets.append((f"bench-host-{i}", path + "/renew", body))
    return targets


class Stats:
    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.errors = 0
        self.recording = False
        self.server_cpu = self.client_cpu = 0.0


async def renew_loop(
    host: str, port: int, token: str, path: str, body: str, stats: Stats, stop: asyncio.Event, interval: float | None
):
    """Renew over one connection: back to back (`interval` None), or one renewal every
    `interval` seconds from a random phase, timed from when it was due, so a server that
    falls behind shows it in the latency (no coordinated omission)."""
    request = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n{body}"
    ).encode()
    reader, writer = await asyncio.open_connection(host, port)
    clock = time.perf_counter
    due = clock() + (random.random() * interval if interval else 0)
    try:
        while not stop.is_set():
            if interval:
                delay = due - clock()
                if delay > 0:
                    await asyncio.sleep(delay)
                started, due = due, due + interval
            else:
                started = clock()
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
            await reader.readexactly(length)
            if stats.recording:
                stats.latencies.append(clock() - started)
                if not head.startswith(b"HTTP/1.1 200"):
                    stats.errors += 1
    finally:
        writer.close()


async def load(
    host: str, port: int, targets, warmup: float, seconds: float, server_pid: int, rate: float | None
) -> tuple[Stats, float]:
    stats, stop = Stats(), asyncio.Event()
    interval = len(targets) / rate if rate else None
    tasks = [asyncio.create_task(renew_loop(host, port, *target, stats, stop, interval)) for target in targets]
    await asyncio.sleep(warmup)
    stats.recording = True
    started, server_cpu, client_cpu = time.perf_counter(), cpu_seconds(server_pid), time.process_time()
    await asyncio.sleep(seconds)
    stats.recording = False
    elapsed = time.perf_counter() - started
    stats.server_cpu = cpu_seconds(server_pid) - server_cpu
    stats.client_cpu = time.process_time() - client_cpu
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    return stats, elapsed


def percentile(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--store", choices=["lmdb", "memory"], default="lmdb")
    parser.add_argument(
        "--rate",
        type=float,
        help="offered load in renewals/s, spread evenly over the hosts "
        "(default: closed loop, each host renews again as soon as it has its answer)",
    )
    parser.add_argument(
        "--pythonpath",
        help="put this directory first on the server's PYTHONPATH (e.g. a "
        "`pip install --target DIR httptools uvloop`, which uvicorn then uses)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    args = parser.parse_args()
    env = server_env(args.pythonpath)
    accelerators = fast_path_available(env)
    load_before = os.getloadavg()[0]

    with tempfile.TemporaryDirectory(prefix="amc-bench-") as tmp:
        tokens = Path(tmp) / "tokens.json"
        entries = [{"token": "bench-admin", "role": "admin"}]
        entries += [{"token": f"bench-host-{i}", "role": "host", "host_id": f"h{i}"} for i in range(args.hosts)]
        tokens.write_text(json.dumps(entries))
        server = start_server(Path(tmp) / "data", tokens, args.store, env)
        where = urlsplit(server.url)
        host, port = where.hostname or "", where.port or 0
        try:
            targets = prepare(server.url, args.hosts)
            if args.pythonpath:
                sys.path.insert(0, args.pythonpath)
            try:
                import uvloop  # the client's own loop; the server picks its loop itself

                runner, client_loop = uvloop.run, "uvloop"
            except ImportError:
                runner, client_loop = asyncio.run, "asyncio"
            stats, elapsed = runner(load(host, port, targets, args.warmup, args.seconds, server.pid, args.rate))
        finally:
            server.stop(30)

    requests = len(stats.latencies)
    result = {
        "store": args.store,
        "offered_rate": args.rate or "closed loop",
        "hosts": args.hosts,
        "seconds": round(elapsed, 2),
        "requests": len(stats.latencies),
        "errors": stats.errors,
        "requests_per_second": round(len(stats.latencies) / elapsed),
        "p50_ms": round(percentile(stats.latencies, 0.50) * 1000, 2),
        "p99_ms": round(percentile(stats.latencies, 0.99) * 1000, 2),
        "max_ms": round(max(stats.latencies) * 1000, 2),
        "mean_ms": round(statistics.fmean(stats.latencies) * 1000, 2),
        "server_cpu_share": round(stats.server_cpu / elapsed, 2),  # 1.0 = one core busy all the time
        "client_cpu_share": round(stats.client_cpu / elapsed, 2),
        # What a renewal costs the server in CPU (all its threads): the rate one dedicated
        # core could sustain is about 1e6 / this, whatever else the machine was doing.
        "server_cpu_us_per_request": round(stats.server_cpu / max(requests, 1) * 1e6, 1),
        "client_loop": client_loop,
        "server_http": "httptools" if accelerators["httptools"] else "h11",
        "server_loop": "uvloop" if accelerators["uvloop"] else "asyncio",
        "load_average_before": round(load_before, 2),
        "cores": os.cpu_count(),
    }
    if args.json:
        print(json.dumps(result))
        return
    mode = f"offered {args.rate:g}/s" if args.rate else "closed loop"
    print(f"lease renewals, {args.hosts} concurrent hosts, {mode}, {args.store} store, {result['seconds']} s measured")
    print(f"  {result['requests_per_second']} requests/s ({result['requests']} requests, {result['errors']} errors)")
    print(f"  latency p50 {result['p50_ms']} ms, p99 {result['p99_ms']} ms, max {result['max_ms']} ms")
    print(
        f"  CPU: server {result['server_cpu_share']} cores, client {result['client_cpu_share']} cores "
        f"(of {result['cores']}); load average before the run {result['load_average_before']}"
    )
    print(
        f"  server CPU per renewal {result['server_cpu_us_per_request']} us "
        f"(~{round(1e6 / max(result['server_cpu_us_per_request'], 1))}/s per fully used core)"
    )
    print(f"  server: uvicorn with {result['server_http']} on {result['server_loop']}; client loop {client_loop}")


if __name__ == "__main__":
    main()
