"""Cancel-to-stop latency of a real Host Agent, against its lease renewal interval.

    python bench/cancel_latency.py [--leases 1.5 3 6] [--runs 9] [--seed 1] [--json]

Three real processes and a simulator: `amc serve` (in memory), `amc host run
--lease-seconds L` (renewing every L / 3) and, in this process, one simulated device.
For each lease length and each run, the bench submits a task, waits until its step is
running on the device, waits a random fraction of the renewal interval (so the cancel
lands at a uniformly random phase of the renewal cycle), then cancels it and measures:

- long step (`shell sleep 600`): from the cancel request to the end of the agent's last
  device command (the interrupted `sleep`, then the `pkill` that stops it on the device),
  read from the simulator's command log;
- short steps (many `shell sleep 0.05`): from the cancel request to the start of the last
  step the agent sent (after it, no step starts);
- delivery: the server's `cancellation.delivered_at - requested_at` (when the renewal that
  carried it was answered), and the agent's share of the long-step latency after that.

A renewal carries the cancellation, so the expectation is a latency spread over
0..interval (median about interval / 2) plus the time to stop a step. specs/design.md's target:
"A cancellation reaches a running Host Agent within one renewal interval, and the agent
stops before its next step starts."
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
import random
import statistics
import tempfile
import time

import httpx

from amc.cli.launch import Agent, LaunchError, Server
from amc.core.lifecycle import TERMINAL_STATUSES, TaskStatus
from amc.core.times import from_rfc3339
from amc.sim import Simulator

TOKENS = {"client": "bench-client-token-0000000", "host": "bench-host-token-00000000", "admin": "bench-admin-0000"}
SERIAL = "amc-sim-01"


def start_server(tmp: Path) -> Server:
    tokens = tmp / "tokens.json"
    tokens.write_text(
        json.dumps(
            [
                {"token": TOKENS["client"], "role": "client", "tenant": "bench"},
                {"token": TOKENS["host"], "role": "host", "host_id": "h1"},
                {"token": TOKENS["admin"], "role": "admin"},
            ]
        )
    )
    try:
        return Server(tmp / "data", "--store", "memory", "--min-lease-seconds", "1", tokens=tokens)
    except LaunchError as error:
        raise SystemExit(error.report()) from None


def start_agent(url: str, adb_port: int, lease: float) -> Agent:
    return Agent(url, "h1", TOKENS["host"], adb_port=adb_port, lease_seconds=lease, log_level="warning")


def wait_until(probe, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.005)


def one_run(
    api: httpx.Client, sim: Simulator, plan: dict, interval: float, rng: random.Random, measure: str
) -> dict[str, float]:
    seen = len(sim.log(SERIAL))
    response = api.post("/v1/tasks", json={"plan": plan})
    task_id = response.json()["id"]
    wait_until(lambda: len(sim.log(SERIAL)) > seen, 30, "the first step on the device")
    time.sleep(rng.uniform(0, interval))
    cancelled_at = time.time()
    api.post(f"/v1/tasks/{task_id}/cancel", json={})
    task = wait_until(
        lambda: (t := api.get(f"/v1/tasks/{task_id}").json())["status"] in TERMINAL_STATUSES and t, 60, "the report"
    )
    assert task["status"] == TaskStatus.cancelled, task["status"]
    records = sim.log(SERIAL)[seen:]
    if measure == "end":  # the end of the last device activity  # noqa: SIM108 (each branch says what it measures)
        last = max((r.ended_at or r.started_at) for r in records)
    else:  # the start of the last step sent
        last = max(r.started_at for r in records)
    cancellation = task["cancellation"]
    delivery = from_rfc3339(cancellation["delivered_at"]) - from_rfc3339(cancellation["requested_at"])
    return {"stop": last - cancelled_at, "delivery": delivery / 1000}


def measure_lease(url: str, sim: Simulator, lease: float, runs: int, rng: random.Random) -> dict:
    interval = lease / 3
    agent = start_agent(url, sim.server_port, lease)
    api = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKENS['client']}"}, timeout=30)
    try:
        admin = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKENS['admin']}"})
        wait_until(
            lambda: admin.get("/v1/hosts/h1").status_code == 200 and admin.get("/v1/hosts/h1").json()["devices"],
            30,
            "the agent's registration",
        )
        long_plan = {"steps": [{"id": "long", "action": "shell", "args": {"command": "sleep 600"}}]}
        short_plan = {
            "steps": [{"id": f"s{i}", "action": "shell", "args": {"command": "sleep 0.05"}} for i in range(1000)]
        }
        long = [one_run(api, sim, long_plan, interval, rng, "end") for _ in range(runs)]
        short = [one_run(api, sim, short_plan, interval, rng, "start") for _ in range(runs)]
    finally:
        agent.stop(30)
        api.close()
    return {
        "lease_seconds": lease,
        "interval": interval,
        "delivery": [r["delivery"] for r in long + short],
        "long_step_stop": [r["stop"] for r in long],
        # The agent's own share: from the server answering the renewal that carried the
        # cancellation to the end of the last device command (the pkill).
        "long_step_after_delivery": [r["stop"] - r["delivery"] for r in long],
        "short_steps_stop": [r["stop"] for r in short],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--leases", type=float, nargs="+", default=[1.5, 3.0, 6.0])
    parser.add_argument("--runs", type=int, default=9, help="runs per lease length and scenario")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print the raw figures as JSON too")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    results = []
    with tempfile.TemporaryDirectory() as tmp, Simulator(1) as sim:
        server = start_server(Path(tmp))
        try:
            for lease in args.leases:
                results.append(measure_lease(server.url, sim, lease, args.runs, rng))
        finally:
            server.stop(30)

    print(
        f"cancel-to-stop latency, {args.runs} runs per cell, seconds: median / max; ratio = median / renewal interval"
    )
    print(
        f"{'lease':>5} {'interval':>8} | {'delivery':>13} | {'long step stop':>13} {'ratio':>5} | "
        f"{'agent share':>13} | {'short steps stop':>13} {'ratio':>5}"
    )
    for r in results:

        def cell(key: str, r: dict = r) -> str:
            return f"{statistics.median(r[key]):.3f} / {max(r[key]):.3f}"

        print(
            f"{r['lease_seconds']:>5g} {r['interval']:>8.3f} | {cell('delivery')} | {cell('long_step_stop')} "
            f"{statistics.median(r['long_step_stop']) / r['interval']:>5.2f} | {cell('long_step_after_delivery')} | "
            f"{cell('short_steps_stop')} {statistics.median(r['short_steps_stop']) / r['interval']:>5.2f}"
        )
    if args.json:
        print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
