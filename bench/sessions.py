"""Session action round trip (specs/protocol.md Part D): what amc adds to an action.

    python bench/sessions.py [--concurrency 1 50] [--actions 40] [--think-seconds S] [--json]

Three real processes and a simulator: `amc serve` (in memory), `amc host run` and, in this
process, the simulated devices (one per session). For each concurrency C, C sessions run at
once, each on its own device; each session's caller sends `--actions` taps one at a time,
each with `?wait_seconds=10`, so the answer is the action's outcome. Per action:

    round trip = from sending POST /v1/tasks/{id}/actions to receiving its answer
    device     = the time the simulator spent on the action's device commands (its log)
    overhead   = round trip - device

The overhead is what the control plane and the Host Agent add: the post, the wake-up of the
agent's waiting poll, delivery, the executor's adb round trips outside the device command,
the outcome report, and the wake-up of the caller's wait. Target (issue 19): p50 < 20 ms,
p99 < 50 ms.

By default each caller sends its next action as soon as the last one ended (a saturating
load: C actions always in flight). An AI agent looks at the answer and decides before it
acts again; `--think-seconds S` makes each caller wait S seconds between actions (the first
one after a random part of S, so the sessions do not act in lockstep), which is the load a
fleet of such agents puts on the control plane.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's directory comes first on sys.path, and bench/http.py would
# then shadow the standard library's `http` package (which httpx imports).
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)

import argparse
import json
import os
import random
import statistics
import tempfile
import threading
import time

import httpx

from amc.cli.launch import Agent
from amc.core.times import from_rfc3339
from amc.sim import Simulator

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cancel_latency import TOKENS, start_server, wait_until


def start_agent(url: str, adb_port: int) -> Agent:
    return Agent(url, "h1", TOKENS["host"], adb_port=adb_port, lease_seconds=30, log_level="warning")


def cpu_seconds(pid: int) -> float:
    """The user + system CPU time a process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered) + 0.5) - 1))]


def one_session(
    url: str, sim: Simulator, serial: str, actions: int, think: float, out: list[dict], barrier: threading.Barrier
):
    headers = {"Authorization": f"Bearer {TOKENS['client']}"}
    with httpx.Client(base_url=url, headers=headers, timeout=30) as api:
        body = {"session": {"idle_timeout_seconds": 600}, "requirements": {"serial": serial}}
        task_id = api.post("/v1/tasks", json=body).json()["id"]
        wait_until(lambda: api.get(f"/v1/tasks/{task_id}").json()["status"] == "dispatched", 60, f"{serial} dispatched")
        barrier.wait()
        time.sleep(random.uniform(0, think))
        for n in range(actions):
            if n:
                time.sleep(think)
            seen = len(sim.log(serial))
            action = {"id": f"tap{n}", "action": "tap", "args": {"x": 100 + n, "y": 200}}
            sent = time.perf_counter()
            answer = api.post(f"/v1/tasks/{task_id}/actions", json=action, params={"wait_seconds": "10"})
            received = time.perf_counter()
            done = answer.json()
            assert answer.status_code == 201 and done["status"] == "completed", answer.text
            records = sim.log(serial)[seen:]
            device = sum((r.ended_at or r.started_at) - r.started_at for r in records)
            at = {k: from_rfc3339(done[k]) / 1000 for k in ("posted_at", "delivered_at", "started_at", "ended_at")}
            out.append(
                {
                    "round_trip": received - sent,
                    "device": device,
                    "overhead": received - sent - device,
                    # Where the time went, on the server's clock (the agent's times are its estimate of it):
                    "to_host": at["delivered_at"] - at["posted_at"],  # the post, then the waiting poll's answer
                    "host_start": at["started_at"] - at["delivered_at"],  # the poll's answer reaching the agent
                    "executor": at["ended_at"] - at["started_at"],  # the executor, adb round trips included
                    "commands": len(records),
                }
            )
        api.post(f"/v1/tasks/{task_id}/end")


def measure(url: str, sim: Simulator, concurrency: int, actions: int, think: float, pids: dict[str, int]) -> dict:
    cpu_before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    wall_before = time.perf_counter()
    serials = sorted(sim.devices)[:concurrency]
    results: list[dict] = []
    barrier = threading.Barrier(concurrency)
    threads = [
        threading.Thread(target=one_session, args=(url, sim, serial, actions, think, results, barrier))
        for serial in serials
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - wall_before
    figures: dict = {"concurrency": concurrency, "actions": len(results), "seconds": wall}
    # CPU per action of each process (set-up and end of the sessions included): with the
    # machine's cores shared, a process that needs more CPU than it gets makes actions queue.
    figures["cpu_ms_per_action"] = {
        name: (cpu_seconds(pid) - cpu_before[name]) * 1000 / len(results) for name, pid in pids.items()
    }
    for key in ("round_trip", "device", "overhead", "to_host", "host_start", "executor", "commands"):
        values = [r[key] * 1000 for r in results]
        figures[key] = {"p50": statistics.median(values), "p99": percentile(values, 99), "max": max(values)}
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 50])
    parser.add_argument("--actions", type=int, default=40, help="actions per session")
    parser.add_argument("--think-seconds", type=float, default=0.0, help="each caller's pause between actions")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp, Simulator(max(args.concurrency)) as sim:
        server = start_server(Path(tmp))
        url = server.url
        agent = start_agent(url, sim.server_port)
        try:
            admin = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKENS['admin']}"})
            wait_until(
                lambda: len((admin.get("/v1/hosts/h1").json() or {}).get("devices", [])) == len(sim.devices),
                60,
                "the agent's registration of every device",
            )
            for concurrency in args.concurrency:
                pids = {"server": server.pid, "agent": agent.pid, "bench+simulator": os.getpid()}
                results.append(measure(url, sim, concurrency, args.actions, args.think_seconds, pids))
        finally:
            agent.stop(60)
            server.stop(30)
    pace = f"{args.think_seconds:g} s between a caller's actions" if args.think_seconds else "no pause between actions"
    print(f"session action round trip (tap, wait_seconds in the post; {pace}), ms: p50 / p99 / max")
    print(f"{'sessions':>8} {'actions':>7} | {'round trip':>22} | {'device':>22} | {'overhead':>22}")
    for r in results:

        def cell(key: str, r: dict = r) -> str:
            return f"{r[key]['p50']:6.1f} / {r[key]['p99']:6.1f} / {r[key]['max']:6.1f}"

        print(f"{r['concurrency']:>8} {r['actions']:>7} | {cell('round_trip')} | {cell('device')} | {cell('overhead')}")
    print("where the time went (server clock), ms: p50 / p99 / max; device commands per action")
    print(f"{'sessions':>8} | {'post -> delivered':>22} | {'delivered -> started':>22} | {'executor':>22} | cmds")
    for r in results:

        def part(key: str, r: dict = r) -> str:
            return f"{r[key]['p50']:6.1f} / {r[key]['p99']:6.1f} / {r[key]['max']:6.1f}"

        print(
            f"{r['concurrency']:>8} | {part('to_host')} | {part('host_start')} | {part('executor')} | "
            f"{r['commands']['p50'] / 1000:g}"
        )
    print("throughput and CPU per action, ms (server / agent / this process with the simulator):")
    for r in results:
        cpu = r["cpu_ms_per_action"]
        print(
            f"{r['concurrency']:>8} sessions: {r['actions'] / r['seconds']:7.1f} actions/s; "
            f"cpu {cpu['server']:.2f} / {cpu['agent']:.2f} / {cpu['bench+simulator']:.2f}"
        )
    print(f"load average after the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if args.json:
        print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
