"""The soak: a whole stack under a steady mixed load for an hour, watched for slow leaks.

    PYTHONPATH=. python -P bench/soak.py [--minutes 60] [--store lmdb|postgresql]
        [--devices 500] [--agents 10] [--sample-seconds 60] [--json soak.json]

`amc serve` (on LMDB, or on a throwaway PostgreSQL cluster), `--agents` Host Agents (`amc host
run`, each recording its history for `amc check-history`) and `--devices` simulated devices
(`amc sim`, one process per agent) run for `--minutes`. This process drives a steady mix:
plans (a wait and a screenshot, so every attempt renews its lease and uploads an artifact),
steers, pauses and resumes, cancels, sessions with actions, event-stream readers connecting
and leaving, and console-like polling of task lists, hosts and single tasks.

Every `--sample-seconds` it records the server's RSS, open descriptors, event-loop tasks and
event-stream readers (from /metrics), the agents' RSS, the store's size on disk against the
tasks it holds, and the p50/p99 of renewals (from the agents' recorded histories: the time
from sending a renewal to its answer) and of session actions (posted with a wait, until the
answer). At the end it prints a table, writes the figures as JSON, checks every recorded
history with the history checker against the final state, and judges:

- flat: the fitted slopes (least squares over the samples after the first, the warm-up) of
  the server's descriptors and event-loop tasks (their fitted growth over the run at most
  10 plus a quarter of their median: both go up and down with the requests in flight), of
  each agent's RSS (<= 0.15 MiB per minute), and of the server's RSS beyond what the data it
  holds explains (<= 1 MiB per minute plus 32 KiB per task added per minute: the kernel
  keeps every task in memory, so a growing store grows the server honestly). And the
  server's RSS at the end is at most 1.25 times (plus 16 MiB) that of a server started
  afresh on the same store once the run is over: the same data, and nothing a leak left;
- no drift: the renewals' p99 over the last third of the samples is at most twice that of
  the first third (or 50 ms more, whichever is larger);
- no error: no 5xx and no refusal the load does not expect, no ERROR line in any log, and no
  violation of the history checker.

Exits 1 when any of these fails. `make soak` runs it with SOAK_MINUTES (60) on LMDB;
`make soak SOAK_STORE=postgresql SOAK_MINUTES=30` on PostgreSQL.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from amc.check.final import read_final_state
from amc.check.operations import read as read_history
from amc.check.recorder import HistoryFile, RecordingTransport
from amc.check.rules import check, message_tasks
from amc.cli.launch import Server, Stack

ADMIN = "soak-admin-" + "0" * 16
CLIENT = "soak-client-" + "0" * 16
LEASE_SECONDS = 10.0  # short, so that every attempt renews a few times
PLAN = {
    "steps": [
        {"id": "wait", "action": "wait", "args": {"seconds": 3}},
        {"id": "look", "action": "screenshot", "args": {}},
        {"id": "rest", "action": "wait", "args": {"seconds": 2}},
    ]
}
EXPECTED_REFUSALS = {409}  # a cancel, steer or pause that came after the task ended
# An agent holds nothing that grows with the tasks it ran; a 10-minute run at 10 devices per
# agent measured 0.06-0.08 MiB/min (the first minutes' growth included) once its finished
# attempts were bounded, and 0.25 when it kept every one.
AGENT_RSS_MIB_PER_MIN = 0.15


def host_token(host_id: str) -> str:
    return f"soak-host-{host_id}-" + "0" * 12


# --- processes ----------------------------------------------------------------------------


def start_sim(devices: int) -> tuple[subprocess.Popen[str], int]:
    """`amc sim --devices N` as a child; its adb server port once it is ready."""
    child = subprocess.Popen(
        [sys.executable, "-m", "amc", "sim", "--devices", str(devices)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    assert child.stdout is not None
    port = 0
    for line in child.stdout:
        if found := re.match(r"server [\d.]+:(\d+)", line):
            port = int(found.group(1))
        if line.strip() == "ready":
            return child, port
    raise RuntimeError(f"amc sim exited: {child.wait()}")


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def disk_bytes(path: Path) -> int:
    """Bytes allocated on disk under `path` (a sparse file counts what it uses)."""
    total = 0
    for root, _, names in os.walk(path):
        for name in names:
            try:
                total += (Path(root) / name).stat().st_blocks * 512
            except FileNotFoundError:  # a temporary that went away meanwhile
                pass
    return total


def metric(text: str, name: str) -> float:
    return sum(
        float(line.split()[-1]) for line in text.splitlines() if line.startswith(name) and not line.startswith("#")
    )


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# --- the load -----------------------------------------------------------------------------


class Load:
    """The steady mix, driven from one event loop; counts what it did and what went wrong."""

    def __init__(self, url: str, devices: int, history: HistoryFile, rng: random.Random):
        self.url = url
        self.devices = devices
        self.rng = rng
        transport = RecordingTransport(
            httpx.AsyncHTTPTransport(limits=httpx.Limits(max_connections=400)), history, "soak-load"
        )
        self.http = httpx.AsyncClient(base_url=url, timeout=60, transport=transport)
        self.client = {"Authorization": f"Bearer {CLIENT}"}
        self.admin = {"Authorization": f"Bearer {ADMIN}"}
        self.counts: dict[str, int] = {}
        self.errors: list[str] = []
        self.action_seconds: list[float] = []  # since the last sample
        self.stop = asyncio.Event()

    def count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    def answered(self, what: str, response: httpx.Response, ok: tuple[int, ...]) -> bool:
        if response.status_code in ok:
            self.count(what)
            return True
        if response.status_code not in EXPECTED_REFUSALS:
            self.errors.append(f"{what}: {response.status_code} {response.text[:200]}")
        return False

    async def pause(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self.stop.wait(), seconds)
        except TimeoutError:
            pass

    async def guarded(self, name: str, body: Any) -> None:
        while not self.stop.is_set():
            try:
                await body()
            except (httpx.TransportError, KeyError, ValueError) as error:
                if not self.stop.is_set():
                    self.errors.append(f"{name}: {type(error).__name__}: {error}")
                await self.pause(1.0)

    async def plan_worker(self) -> None:
        """Submit a plan, maybe steer, pause or cancel it, and poll it like a console until it ends."""
        response = await self.http.post("/v1/tasks", json={"plan": PLAN, "max_attempts": 2}, headers=self.client)
        if not self.answered("submit", response, (201,)):
            return await self.pause(1.0)
        task_id = response.json()["id"]
        roll = self.rng.random()
        await self.pause(self.rng.uniform(0.5, 3.0))
        if roll < 0.10:
            body = {"intent": "steer", "text": "soak: look again"}
            self.answered(
                "steer", await self.http.post(f"/v1/tasks/{task_id}/messages", json=body, headers=self.client), (201,)
            )
        elif roll < 0.15:
            for intent in ("pause", "resume"):
                posted = await self.http.post(
                    f"/v1/tasks/{task_id}/messages", json={"intent": intent}, headers=self.client
                )
                self.answered(intent, posted, (201,))
                await self.pause(1.0)
        elif roll < 0.25:
            cancelled = await self.http.post(
                f"/v1/tasks/{task_id}/cancel", json={"reason": "soak"}, headers=self.client
            )
            self.answered("cancel", cancelled, (200, 202))
        while not self.stop.is_set():
            polled = await self.http.get(f"/v1/tasks/{task_id}", headers=self.client)
            if not self.answered("task poll", polled, (200,)) or polled.json()["status"] in (
                "done",
                "failed",
                "cancelled",
            ):
                return
            await self.pause(2.0)

    async def session_worker(self) -> None:
        """A session: wait until a device runs it, a few actions with a wait, then end it."""
        body = {"session": {"idle_timeout_seconds": 120}}
        response = await self.http.post("/v1/tasks", json=body, headers=self.client)
        if not self.answered("session", response, (201,)):
            return await self.pause(1.0)
        task_id = response.json()["id"]
        while not self.stop.is_set():
            polled = await self.http.get(f"/v1/tasks/{task_id}", headers=self.client)
            if not self.answered("task poll", polled, (200,)) or polled.json()["status"] != "queued":
                break
            await self.pause(1.0)
        for n in range(self.rng.randint(2, 6)):
            if self.stop.is_set():
                break
            action = {"id": f"tap{n}", "action": "tap", "args": {"x": 100 + n, "y": 200}}
            sent = time.monotonic()
            acted = await self.http.post(
                f"/v1/tasks/{task_id}/actions", json=action, params={"wait_seconds": "20"}, headers=self.client
            )
            if not self.answered("action", acted, (201,)):
                break
            self.action_seconds.append(time.monotonic() - sent)
            await self.pause(self.rng.uniform(0.5, 2.0))
        self.answered("session end", await self.http.post(f"/v1/tasks/{task_id}/end", headers=self.client), (200,))

    async def event_reader(self) -> None:
        """Connect to the event stream, read for a while, leave."""
        stay = self.rng.uniform(5.0, 30.0)
        try:
            async with asyncio.timeout(stay):
                async with self.http.stream("GET", "/v1/events", headers=self.admin, timeout=None) as stream:
                    if stream.status_code != 200:
                        self.errors.append(f"events: {stream.status_code}")
                        return await self.pause(1.0)
                    self.count("event stream")
                    async for _ in stream.aiter_bytes():
                        if self.stop.is_set():
                            return
        except TimeoutError:
            pass
        await self.pause(self.rng.uniform(0.5, 2.0))

    async def console(self) -> None:
        """What a console page polls: the latest tasks, the hosts."""
        self.answered(
            "console tasks", await self.http.get("/v1/tasks", params={"limit": "50"}, headers=self.admin), (200,)
        )
        self.answered("console hosts", await self.http.get("/v1/hosts", headers=self.admin), (200,))
        await self.pause(2.0)

    def run(self, readers: int, consoles: int) -> list[asyncio.Task[None]]:
        plans = max(1, int(self.devices * 0.8))
        sessions = max(1, self.devices // 10)
        work = [("plan", self.plan_worker)] * plans + [("session", self.session_worker)] * sessions
        work += [("events", self.event_reader)] * readers + [("console", self.console)] * consoles
        return [asyncio.create_task(self.guarded(name, body)) for name, body in work]


# --- sampling -----------------------------------------------------------------------------


class Renewals:
    """Renewal round trips read from the agents' history files as they grow."""

    def __init__(self, paths: list[Path]):
        self.offsets = {path: 0 for path in paths}

    def since_last(self) -> list[float]:
        found = []
        for path, offset in self.offsets.items():
            if not path.exists():
                continue
            with open(path, "rb") as file:
                file.seek(offset)
                data = file.read()
            complete = data.rfind(b"\n") + 1
            self.offsets[path] = offset + complete
            for raw in data[:complete].splitlines():
                record = json.loads(raw)
                if record.get("kind") == "renew" and record.get("status") == 200:
                    found.append(record["t1"] - record["t0"])
        return found


def slope(samples: list[dict], key: str) -> float:
    """Least-squares slope of `key` per minute over the samples after the first (the warm-up)."""
    points = [(s["minute"], s[key]) for s in samples[1:] if s.get(key) is not None]
    if len(points) < 2:
        return 0.0
    return statistics.linear_regression([p[0] for p in points], [p[1] for p in points]).slope


def judge(samples: list[dict], agents: list[str]) -> tuple[dict[str, float], list[str]]:
    figures = {
        "server_rss_mib_per_min": slope(samples, "server_rss_mib"),
        "server_fds_per_min": slope(samples, "server_fds"),
        "asyncio_tasks_per_min": slope(samples, "asyncio_tasks"),
        "tasks_per_min": slope(samples, "tasks"),
        "store_mib_per_min": slope(samples, "store_mib"),
    }
    for host in agents:
        figures[f"agent_{host}_rss_mib_per_min"] = slope(samples, f"agent_{host}_rss_mib")
    failed = []
    rss_bound = 1.0 + 32 / 1024 * max(0.0, figures["tasks_per_min"])
    if figures["server_rss_mib_per_min"] > rss_bound:
        failed.append(f"server RSS grows {figures['server_rss_mib_per_min']:.2f} MiB/min > {rss_bound:.2f}")
    # Descriptors and event-loop tasks go up and down with the requests in flight (every long
    # poll is a task and a socket), so a count is judged by its fitted growth over the run.
    span = samples[-1]["minute"] - samples[1]["minute"] if len(samples) > 2 else 0.0
    for key, name in (("server_fds", "server descriptors"), ("asyncio_tasks", "event-loop tasks")):
        grown = figures[f"{key}_per_min"] * span
        typical = statistics.median(s[key] for s in samples)
        figures[f"{key}_fitted_growth"] = grown
        if grown > 10 + 0.25 * typical:
            failed.append(f"{name} grew {grown:.1f} over the run (fitted) > 10 + 25 % of their median {typical:.0f}")
    for host in agents:
        if figures[f"agent_{host}_rss_mib_per_min"] > AGENT_RSS_MIB_PER_MIN:
            failed.append(
                f"agent {host} RSS grows {figures[f'agent_{host}_rss_mib_per_min']:.2f} MiB/min > {AGENT_RSS_MIB_PER_MIN}"
            )
    later = samples[1:]
    third = max(1, len(later) // 3)
    first = [s["renew_p99_ms"] for s in later[:third] if s["renew_p99_ms"] is not None]
    last = [s["renew_p99_ms"] for s in later[-third:] if s["renew_p99_ms"] is not None]
    if first and last:
        before, after = statistics.median(first), statistics.median(last)
        figures["renew_p99_first_third_ms"], figures["renew_p99_last_third_ms"] = before, after
        if after > max(2 * before, before + 50):
            failed.append(f"renewal p99 drifted from {before:.1f} ms to {after:.1f} ms")
    return figures, failed


# --- the run ------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=float(os.environ.get("SOAK_MINUTES", "60")))
    parser.add_argument("--store", choices=("lmdb", "postgresql"), default="lmdb")
    parser.add_argument("--devices", type=int, default=500)
    parser.add_argument("--agents", type=int, default=10)
    parser.add_argument("--sample-seconds", type=float, default=60.0)
    parser.add_argument("--readers", type=int, default=10, help="event-stream readers connecting and leaving")
    parser.add_argument("--consoles", type=int, default=5, help="console-like pollers")
    parser.add_argument("--json", type=Path, default=Path("soak.json"), help="where to write the figures")
    parser.add_argument("--keep", type=Path, default=None, help="keep the data, logs and histories here")
    parser.add_argument("--judge", type=Path, default=None, help="only judge the samples of an earlier run's JSON")
    args = parser.parse_args()
    if args.judge is not None:
        earlier = json.loads(args.judge.read_text())
        figures, failed = judge(earlier["samples"], [f"h{i + 1}" for i in range(earlier["agents"])])
        print(json.dumps(figures, indent=2))
        print(failed or "PASS (these criteria; the run's errors and history check are in its JSON)")
        return
    scratch = args.keep or Path(tempfile.mkdtemp(prefix="amc-soak-"))
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        result = asyncio.run(soak(args, scratch))
    finally:
        if args.keep is None:
            shutil.rmtree(scratch, ignore_errors=True)
    args.json.write_text(json.dumps(result, indent=2))
    print(f"figures written to {args.json}")
    if result["failed"]:
        raise SystemExit(1)


async def soak(args: argparse.Namespace, scratch: Path) -> dict[str, Any]:
    hosts = [f"h{i + 1}" for i in range(args.agents)]
    tokens = scratch / "tokens.json"
    entries = [{"token": ADMIN, "role": "admin"}, {"token": CLIENT, "role": "client", "tenant": "default"}]
    entries += [{"token": host_token(h), "role": "host", "host_id": h} for h in hosts]
    tokens.write_text(json.dumps(entries))
    logs = scratch / "logs"
    logs.mkdir(exist_ok=True)
    errors_logged: list[str] = []

    def sink(name: str, line: str) -> None:
        with open(logs / f"{name}.log", "a") as log:
            log.write(line + "\n")
        if " ERROR " in line or "Traceback" in line:
            errors_logged.append(f"{name}: {line[:300]}")

    cluster = None
    options: list[str] = []
    if args.store == "postgresql":
        from tests.support.postgres import Cluster

        cluster = Cluster(fsync=True).__enter__()
        options += ["--store", cluster.new_database("soak")]
    sims: list[subprocess.Popen[str]] = []
    stack = Stack(sink=sink)
    per_agent = [args.devices // args.agents + (1 if i < args.devices % args.agents else 0) for i in range(args.agents)]
    histories = [scratch / f"history-{h}.jsonl" for h in hosts]
    load_history = HistoryFile(scratch / "history-load.jsonl")
    samples: list[dict[str, Any]] = []
    try:
        url = stack.start_server(scratch / "data", *options, tokens=tokens, log_level="warning", timeout=120)
        assert stack.server is not None
        for host, count, history in zip(hosts, per_agent, histories):
            sim, port = start_sim(count)
            sims.append(sim)
            stack.start_agent(
                host,
                host_token(host),
                adb_port=port,
                lease_seconds=LEASE_SECONDS,
                record_history=history,
                log_level="warning",
            )
        load = Load(url, args.devices, load_history, random.Random(1))
        workers = load.run(args.readers, args.consoles)
        renewals = Renewals(histories)
        started = time.monotonic()
        print(f"soak: {args.devices} devices on {args.agents} agents, {args.store}, {args.minutes:g} min", flush=True)
        header = "min  srv MiB  fds  tasks(loop) readers  agents MiB(max)  store MiB  tasks  renew p50/p99 ms  action p50/p99 ms  errors"
        print(header, flush=True)
        while time.monotonic() - started < args.minutes * 60:
            await asyncio.sleep(min(args.sample_seconds, args.minutes * 60 - (time.monotonic() - started)))
            stack.check()
            text = (await load.http.get("/metrics")).text
            renewed, actions = renewals.since_last(), load.action_seconds
            load.action_seconds = []
            sample: dict[str, Any] = {
                "minute": round((time.monotonic() - started) / 60, 2),
                "server_rss_mib": rss_mib(stack.server.pid),
                "server_fds": descriptors(stack.server.pid),
                "asyncio_tasks": metric(text, "amc_asyncio_tasks"),
                "event_readers": metric(text, "amc_event_stream_readers"),
                "tasks": metric(text, "amc_tasks{"),
                "store_mib": (
                    disk_bytes(scratch / "data") / 2**20 if cluster is None else cluster_bytes(options[-1]) / 2**20
                ),
                "renewals": len(renewed),
                "renew_p50_ms": _ms(percentile(renewed, 0.5)),
                "renew_p99_ms": _ms(percentile(renewed, 0.99)),
                "actions": len(actions),
                "action_p50_ms": _ms(percentile(actions, 0.5)),
                "action_p99_ms": _ms(percentile(actions, 0.99)),
                "errors": len(load.errors) + len(errors_logged),
            }
            for host, agent in stack.agents.items():
                sample[f"agent_{host}_rss_mib"] = rss_mib(agent.pid)
            samples.append(sample)
            agents_max = max(sample[f"agent_{h}_rss_mib"] for h in hosts)
            print(
                f"{sample['minute']:>4.1f} {sample['server_rss_mib']:>8.1f} {sample['server_fds']:>4} "
                f"{sample['asyncio_tasks']:>11.0f} {sample['event_readers']:>7.0f} {agents_max:>15.1f} "
                f"{sample['store_mib']:>10.1f} {sample['tasks']:>6.0f} "
                f"{_pair(sample['renew_p50_ms'], sample['renew_p99_ms']):>17} "
                f"{_pair(sample['action_p50_ms'], sample['action_p99_ms']):>18} {sample['errors']:>7}",
                flush=True,
            )
        load.stop.set()
        await asyncio.gather(*workers)
        await load.http.aclose()
        await asyncio.sleep(2.0)  # the agents' last reports land
        all_histories = [p for p in histories if p.exists()] + [load_history.path]
        history = read_history(all_histories)
        final = await asyncio.to_thread(read_final_state, url, ADMIN, message_tasks(history.operations))
        report = check(history, final)
        stack.stop(force=True)
        fresh = fresh_rss(scratch / "data", options, tokens)
    finally:
        stack.stop(force=True)
        for sim in sims:
            sim.terminate()
            sim.wait(10)
        load_history.close()
        if cluster is not None:
            cluster.__exit__(None, None, None)
    figures, failed = judge(samples, hosts)
    # The kernel keeps every task in memory, so the running server's RSS grows with the data;
    # a server started afresh on the same store holds the same data and nothing a leak left.
    ended = samples[-1]["server_rss_mib"] if samples else 0.0
    figures["server_rss_at_end_mib"], figures["fresh_server_rss_mib"] = ended, fresh
    if ended > fresh * 1.25 + 16:
        failed.append(f"the server ended with {ended:.0f} MiB; a fresh one on the same store holds {fresh:.0f} MiB")
    failed += [f"load: {e}" for e in load.errors[:20]] + [f"log: {e}" for e in errors_logged[:20]]
    failed += [f"history checker: [{v.rule}] {v.detail}" for v in report.violations[:20]]
    print()
    for name, value in figures.items():
        print(f"  {name}: {value:.3f}")
    print(f"  load: {dict(sorted(load.counts.items()))}")
    print(f"  history checker ({history.clock} clock): {report.summary()}")
    print("PASS" if not failed else "FAIL:\n  " + "\n  ".join(failed))
    return {
        "store": args.store,
        "devices": args.devices,
        "agents": args.agents,
        "minutes": args.minutes,
        "samples": samples,
        "slopes": figures,
        "load": load.counts,
        "history_check": report.summary(),
        "failed": failed,
    }


def fresh_rss(data: Path, options: list[str], tokens: Path) -> float:
    """The RSS of a server started afresh on the store, once it has loaded it and served a read."""
    server = Server(data, *options, tokens=tokens, timeout=300)
    try:
        httpx.get(server.url + "/v1/tasks", params={"limit": "1"}, headers={"Authorization": f"Bearer {ADMIN}"})
        time.sleep(2.0)
        return rss_mib(server.pid)
    finally:
        server.stop(15)


def cluster_bytes(url: str) -> int:
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
    return int(row[0]) if row else 0


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


def _pair(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None else f"{a:.0f}/{b:.0f}"


if __name__ == "__main__":
    main()
