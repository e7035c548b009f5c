"""How far behind the commits the event stream (`GET /v1/events`) delivers, under load.

    python bench/events.py [--rate 1000] [--seconds 10] [--hosts 100] [--readers 1]
                           [--store lmdb|memory] [--pythonpath DIR] [--json]

A real `amc serve` process; `--hosts` simulated hosts each run one task and renew its lease
on a fixed schedule, `--rate` renewals/s in all. Every renewal changes its task (the lease's
expiry), so the server commits `--rate` task changes/s and publishes as many events.
`--readers` subscribers (clients of the tasks' tenant) read the stream over raw sockets.

The delay of an event is the time it was parsed by a reader minus the task's `updated_at`
in it: the server's clock when the writer applied the renewal, which is before the batch's
fsync, so the delay counts the commit itself too (an upper bound of commit-to-receipt; one
clock, one machine, whole milliseconds). "Keeps up" means that every reader received one
event per change the server accepted during the load (its metrics count them), no reader
got a `reset`, and the events stopped arriving within half a second of the load stopping
(no backlog).

The load generator and the readers share one client process; bench/http.py's server
start-up and renewal loop are reused.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's directory comes first on sys.path: bench/http.py would then
# shadow the standard library's `http` package (which httpx imports).
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)

import argparse
import asyncio
import importlib.util
import json
import os
import signal
import tempfile
import time

import orjson

from amc.core.times import from_rfc3339


def _bench_http():
    """bench/http.py as a module (its name would shadow `http` if imported plainly)."""
    spec = importlib.util.spec_from_file_location("bench_http", Path(__file__).with_name("http.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench_http = _bench_http()


class Reader:
    """One subscriber: the task events it received while counting, the delays of those that
    arrived while recording (the measured window), and its resets."""

    def __init__(self) -> None:
        self.delays_ms: list[float] = []
        self.events = 0  # task events received while counting (from the load's start to its end)
        self.resets = 0
        self.last_event_at = 0.0  # time.monotonic() of the latest task event
        self.counting = False
        self.recording = False


async def read_stream(host: str, port: int, token: str, reader_stats: Reader, stop: asyncio.Event) -> None:
    """Read `GET /v1/events` over a raw socket: HTTP/1.1 chunked framing, then SSE events.

    The server writes whole events per chunk, but nothing here relies on it: the chunks'
    payload is joined and split at the blank lines that end events.
    """
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(f"GET /v1/events HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {token}\r\n\r\n".encode())
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    pending = b""
    stopping = asyncio.ensure_future(stop.wait())
    try:
        while True:
            size_line = asyncio.ensure_future(reader.readuntil(b"\r\n"))
            done, _ = await asyncio.wait({size_line, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if stopping in done:
                size_line.cancel()
                return
            size = int(size_line.result().strip(), 16)
            if size == 0:
                return
            chunk = await reader.readexactly(size + 2)
            pending += chunk[:-2]
            *complete, pending = pending.split(b"\n\n")
            now_ms = time.time() * 1000
            for event in complete:
                _note(event, now_ms, reader_stats)
    finally:
        stopping.cancel()
        writer.close()


def _note(event: bytes, now_ms: float, stats: Reader) -> None:
    if b"\nevent: reset\n" in event:
        stats.resets += 1
        return
    marker = event.find(b"\nevent: task\ndata: ")
    if marker < 0:
        return  # a host event or a keep-alive comment
    stats.last_event_at = time.monotonic()
    stats.events += stats.counting
    if stats.recording:
        view = orjson.loads(event[marker + len(b"\nevent: task\ndata: ") :])
        stats.delays_ms.append(now_ms - from_rfc3339(view["updated_at"]))


def accepted_commands(url: str) -> int:
    """Every command the server accepted so far, from its metrics."""
    import httpx

    text = httpx.get(f"{url}/metrics", timeout=30).text
    return round(
        sum(
            float(line.rpartition(" ")[2])
            for line in text.splitlines()
            if line.startswith("amc_commands_total{") and 'outcome="accepted"' in line
        )
    )


async def run(host: str, port: int, targets, readers: int, warmup: float, seconds: float, server_pid: int, rate: float):
    stop_reading = asyncio.Event()
    subscribers = [Reader() for _ in range(readers)]
    reading = [
        asyncio.create_task(read_stream(host, port, "bench-client", subscriber, stop_reading))
        for subscriber in subscribers
    ]
    await asyncio.sleep(0.5)  # subscribed before the load starts
    # Only renewals from here on: each accepted command changes one task, and is one event.
    before = await asyncio.to_thread(accepted_commands, f"http://{host}:{port}")
    for subscriber in subscribers:
        subscriber.counting = True
    stats, stop_load = bench_http.Stats(), asyncio.Event()
    interval = len(targets) / rate
    loops = [
        asyncio.create_task(bench_http.renew_loop(host, port, *target, stats, stop_load, interval))
        for target in targets
    ]
    await asyncio.sleep(warmup)
    stats.recording = True
    for subscriber in subscribers:
        subscriber.recording = True
    started, server_cpu, client_cpu = time.perf_counter(), bench_http.cpu_seconds(server_pid), time.process_time()
    await asyncio.sleep(seconds)
    stats.recording = False
    elapsed = time.perf_counter() - started
    server_cpu = bench_http.cpu_seconds(server_pid) - server_cpu
    client_cpu = time.process_time() - client_cpu
    stop_load.set()
    await asyncio.gather(*loops, return_exceptions=True)
    load_stopped = time.monotonic()
    # Until no event came for 0.5 s: the last one's arrival tells the backlog left behind.
    while subscribers and time.monotonic() - max(s.last_event_at for s in subscribers) < 0.5:
        await asyncio.sleep(0.05)
    for subscriber in subscribers:
        subscriber.recording = subscriber.counting = False
    changes = await asyncio.to_thread(accepted_commands, f"http://{host}:{port}") - before
    stop_reading.set()
    await asyncio.gather(*reading, return_exceptions=True)
    drained = max(0.0, max((s.last_event_at for s in subscribers), default=0.0) - load_stopped)
    return stats, subscribers, elapsed, server_cpu, client_cpu, drained, changes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=1000.0, help="task changes (lease renewals) per second")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--hosts", type=int, default=100)
    parser.add_argument("--readers", type=int, default=1, help="subscribers (0: what the load costs without any)")
    parser.add_argument("--store", choices=["lmdb", "memory"], default="lmdb")
    parser.add_argument("--pythonpath", help="put this directory first on the server's PYTHONPATH")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    args = parser.parse_args()
    env = bench_http.server_env(args.pythonpath)
    load_before = os.getloadavg()[0]

    with tempfile.TemporaryDirectory(prefix="amc-bench-events-") as tmp:
        tokens = Path(tmp) / "tokens.json"
        entries = [
            {"token": "bench-admin", "role": "admin"},
            {"token": "bench-client", "role": "client", "tenant": "bench"},
        ]
        entries += [{"token": f"bench-host-{i}", "role": "host", "host_id": f"h{i}"} for i in range(args.hosts)]
        tokens.write_text(json.dumps(entries))
        tokens.chmod(0o600)
        process, host, port = bench_http.start_server(Path(tmp) / "data", tokens, args.store, env)
        try:
            targets = bench_http.prepare(f"http://{host}:{port}", args.hosts)
            try:
                import uvloop

                runner = uvloop.run
            except ImportError:
                runner = asyncio.run
            stats, readers, elapsed, server_cpu, client_cpu, drained, changes = runner(
                run(host, port, targets, args.readers, args.warmup, args.seconds, process.pid, args.rate)
            )
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(30)

    answered = len(stats.latencies)
    delays = sorted(d for reader in readers for d in reader.delays_ms)
    percentile = bench_http.percentile
    result = {
        "store": args.store,
        "offered_changes_per_second": args.rate,
        "hosts": args.hosts,
        "readers": args.readers,
        "seconds": round(elapsed, 2),
        "changes_committed": answered,
        "changes_per_second": round(answered / elapsed),
        "renewal_errors": stats.errors,
        "changes_during_the_load": changes,
        "events_received_per_reader": [reader.events for reader in readers],
        "resets": sum(reader.resets for reader in readers),
        "delay_p50_ms": round(percentile(delays, 0.50), 1) if delays else None,
        "delay_p99_ms": round(percentile(delays, 0.99), 1) if delays else None,
        "delay_max_ms": round(delays[-1], 1) if delays else None,
        "renewal_p50_ms": round(percentile(stats.latencies, 0.50) * 1000, 2) if answered else None,
        "renewal_p99_ms": round(percentile(stats.latencies, 0.99) * 1000, 2) if answered else None,
        "backlog_after_load_s": round(drained, 3),
        "server_cpu_share": round(server_cpu / elapsed, 2),
        "server_cpu_us_per_change": round(server_cpu / max(answered, 1) * 1e6, 1),
        "client_cpu_share": round(client_cpu / elapsed, 2),
        "load_average_before": round(load_before, 2),
        "cores": os.cpu_count(),
    }
    # Every change of the load (warm-up included) arrived at every reader, none was reset,
    # and the last event came right after the load stopped: no backlog.
    result["keeps_up"] = result["resets"] == 0 and all(r.events == changes for r in readers) and drained < 0.5
    if args.json:
        print(json.dumps(result))
        return
    print(
        f"event stream: {result['changes_per_second']} task changes/s committed ({args.rate:g}/s offered, "
        f"{args.hosts} hosts renewing), {args.readers} reader(s), {args.store} store, {result['seconds']} s measured"
    )
    print(
        f"  events received per reader {result['events_received_per_reader']} of {changes} changes; "
        f"resets {result['resets']}; backlog after the load {result['backlog_after_load_s']} s"
    )
    print(
        f"  delay from the change to its receipt: p50 {result['delay_p50_ms']} ms, p99 {result['delay_p99_ms']} ms, "
        f"max {result['delay_max_ms']} ms"
    )
    print(f"  renewal latency p50 {result['renewal_p50_ms']} ms, p99 {result['renewal_p99_ms']} ms")
    print(
        f"  CPU: server {result['server_cpu_share']} cores ({result['server_cpu_us_per_change']} us per change), client {result['client_cpu_share']} cores "
        f"(of {result['cores']}); load average before {result['load_average_before']}"
    )
    print(f"  keeps up: {'yes' if result['keeps_up'] else 'NO'}")


if __name__ == "__main__":
    main()
