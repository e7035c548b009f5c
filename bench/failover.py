"""Failover under load: kill the leader again and again; count what callers were told and what stayed.

Two `amc serve --store postgresql://...` processes share one database (a throwaway cluster,
fsync on). Load runs the whole time, through plain HTTP clients that find the leader
themselves (tests/support/failover.py): Host Agents (claim, start, renew every second, report
a result after a few renewals) and clients (submit with an idempotency key, cancel, post a
message). Every few seconds the leader is SIGKILLed and started again (as the new standby).

After each kill: the time until the standby led (its health 200) and until the first renewal
that succeeded on it. At the end, with the load stopped: every command whose 2xx a caller
received is checked against the database (a submitted task exists; a result stands; a
cancel is recorded or the task ended; a message is there), the log replayed equals the
records and the invariants hold (`verify`), and the attempts the hosts held across a kill
renewed with the same lease id; leases that lapsed are counted (`lease_expired` events).

Run: PYTHONPATH=. python -P bench/failover.py [--kills 10] [--interval 4] [--hosts 4]
Prints the figures of the README's failover table; exits 1 if anything acknowledged was lost.
"""

from __future__ import annotations

import argparse
import random
import signal
import statistics
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import psycopg

from amc.adapters import codec
from amc.adapters.postgres.verify import verify
from amc.core.events import LeaseExpired
from tests.support.failover import Follower, Server, health, write_tokens
from tests.support.plans import PLAN
from tests.support.postgres import Cluster


class Ledger:
    """What callers were told (2xx answers), and when renewals succeeded."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.submitted: set[str] = set()
        self.results: dict[str, str] = {}
        self.cancelled: set[str] = set()
        self.messages: dict[str, str] = {}  # message id -> task id
        self.renewals: list[float] = []  # monotonic times of successful renewals
        self.kept_leases = 0  # renewals with a lease id granted before the latest kill
        self.counts: Counter[str] = Counter()


def host_loop(follower: Follower, host_id: str, ledger: Ledger, stop: threading.Event, kills: list[float]) -> None:
    follower.request("PUT", f"/v1/hosts/{host_id}", {"devices": [{"serial": f"{host_id}-s1"}]}).raise_for_status()
    while not stop.is_set():
        try:
            claim = follower.request("POST", f"/v1/hosts/{host_id}/claim", {"wait_seconds": 1})
            if claim.status_code != 200:
                continue
            body = claim.json()
            granted_at = time.monotonic()
            lease = {"lease_id": body["lease_id"]}
            attempt = f"/v1/tasks/{body['task_id']}/attempts/{body['attempt']}"
            if follower.request("POST", attempt + "/start", lease).status_code != 200:
                continue
            cancel = False
            for _ in range(3):
                time.sleep(1.0)
                renewed = follower.request("POST", attempt + "/renew", lease)
                if renewed.status_code != 200:
                    break
                with ledger.lock:
                    ledger.renewals.append(time.monotonic())
                    ledger.counts["renew"] += 1
                    if kills and kills[-1] > granted_at:
                        ledger.kept_leases += 1
                cancel = renewed.json()["cancel_requested"]
                if cancel:
                    break
            status = "cancelled" if cancel else "done"
            result = follower.request("POST", attempt + "/result", {**lease, "status": status})
            if result.status_code == 200:
                with ledger.lock:
                    ledger.results[body["task_id"]] = status
                    ledger.counts["result"] += 1
        except (TimeoutError, KeyError, ValueError):
            continue


def client_loop(follower: Follower, n: int, ledger: Ledger, stop: threading.Event) -> None:
    rng = random.Random(n)
    i = 0
    while not stop.is_set():
        i += 1
        try:
            key = f"c{n}-{i}"
            submitted = follower.request("POST", "/v1/tasks", {"plan": PLAN, "idempotency_key": key})
            if submitted.status_code not in (200, 201):
                continue
            task_id = submitted.json()["id"]
            with ledger.lock:
                ledger.submitted.add(task_id)
                ledger.counts["submit"] += 1
            if rng.random() < 0.2:
                posted = follower.request("POST", f"/v1/tasks/{task_id}/messages", {"intent": "steer", "text": "take your time"})
                if posted.status_code == 201:
                    with ledger.lock:
                        ledger.messages[posted.json()["id"]] = task_id
                        ledger.counts["message"] += 1
            if rng.random() < 0.15:
                cancelled = follower.request("POST", f"/v1/tasks/{task_id}/cancel", {"reason": "bench"})
                if cancelled.status_code in (200, 202):
                    with ledger.lock:
                        ledger.cancelled.add(task_id)
                        ledger.counts["cancel"] += 1
            time.sleep(0.05)
        except (TimeoutError, KeyError, ValueError):
            continue


def leader_of(servers: list[Server]) -> Server | None:
    for server in servers:
        if health(server.url)[0] == 200:
            return server
    return None


def check(url: str, ledger: Ledger) -> tuple[int, list[str]]:
    """(acknowledged commands checked, what was lost or wrong)."""
    lost: list[str] = []
    with psycopg.connect(url) as conn:
        tasks = {t.id: t for t in (codec.decode_task(b) for (b,) in conn.execute("SELECT body FROM amc_tasks"))}
        expired = sum(
            isinstance(codec.decode_event(b), LeaseExpired) for (b,) in conn.execute("SELECT body FROM amc_events")
        )
    for task_id in ledger.submitted:
        if task_id not in tasks:
            lost.append(f"submitted {task_id} is missing")
    for task_id, status in ledger.results.items():
        if task_id not in tasks or tasks[task_id].status != status:
            lost.append(f"result {status} of {task_id} is not what the task shows")
    for task_id in ledger.cancelled:
        task = tasks.get(task_id)
        if task is None or (task.cancellation is None and task.status == "queued"):
            lost.append(f"the cancel of {task_id} is not recorded")
    for message_id, task_id in ledger.messages.items():
        task = tasks.get(task_id)
        if task is None or task.message(message_id) is None:
            lost.append(f"message {message_id} of {task_id} is missing")
    checked = len(ledger.submitted) + len(ledger.results) + len(ledger.cancelled) + len(ledger.messages)
    if expired:
        lost.append(f"{expired} leases expired (lease_expired events)")
    return checked, lost


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--interval", type=float, default=4.0, help="seconds of load between kills")
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--clients", type=int, default=2)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="amc-failover-"))
    host_ids = [f"h{i + 1}" for i in range(args.hosts)]
    with Cluster(fsync=True) as cluster:
        url = cluster.new_database("failover")
        tokens = write_tokens(scratch / "tokens.json", host_ids)
        started = 0

        def launch() -> Server:
            nonlocal started
            started += 1
            return Server(url, scratch / f"s{started}", scratch / "tokens.json")

        servers = [launch()]
        while leader_of(servers) is None:
            time.sleep(0.1)
        servers.append(launch())
        urls_lock = threading.Lock()
        urls = [s.url for s in servers]
        ledger, stop, kills = Ledger(), threading.Event(), []
        followers = [Follower(urls, tokens[h], patience=30) for h in host_ids]
        followers += [Follower(urls, tokens["client"], patience=30) for _ in range(args.clients)]
        threads = [
            threading.Thread(target=host_loop, args=(f, h, ledger, stop, kills), daemon=True)
            for f, h in zip(followers, host_ids)
        ]
        threads += [
            threading.Thread(target=client_loop, args=(f, n, ledger, stop), daemon=True)
            for n, f in enumerate(followers[args.hosts :])
        ]
        for thread in threads:
            thread.start()
        takeovers, first_renewals = [], []
        try:
            for k in range(args.kills):
                time.sleep(args.interval)
                leader = leader_of(servers)
                assert leader is not None, "nobody leads"
                killed = time.monotonic()
                kills.append(killed)
                leader.signal(signal.SIGKILL)
                leader.process.wait()
                standby = next(s for s in servers if s is not leader)
                while health(standby.url)[0] != 200:
                    if time.monotonic() - killed > 30:
                        raise SystemExit("the standby did not take over within 30 s")
                    time.sleep(0.02)
                takeovers.append(time.monotonic() - killed)
                while not any(t > killed for t in ledger.renewals[-50:]):
                    if time.monotonic() - killed > 30:
                        break
                    time.sleep(0.02)
                after = [t for t in ledger.renewals[-50:] if t > killed]
                if after:
                    first_renewals.append(min(after) - killed)
                replacement = launch()  # the killed server comes back, as the next standby
                servers = [standby, replacement]
                with urls_lock:
                    urls[:] = [s.url for s in servers]  # the followers share this list
                print(
                    f"kill {k + 1}: standby led after {takeovers[-1]:.2f} s; first renewal after "
                    f"{first_renewals[-1] if after else float('nan'):.2f} s",
                    flush=True,
                )
        finally:
            stop.set()
            for thread in threads:
                thread.join(40)
            for server in servers:
                server.stop()
        checked, lost = check(url, ledger)
        differences = verify(url)
    print()
    print(f"kills: {len(takeovers)}; acknowledged commands: {sum(ledger.counts.values())} ({dict(ledger.counts)})")
    print(
        f"kill -> standby leads: median {statistics.median(takeovers):.2f} s, max {max(takeovers):.2f} s; "
        f"kill -> first successful renewal: median {statistics.median(first_renewals):.2f} s, "
        f"max {max(first_renewals):.2f} s ({len(first_renewals)} kills)"
    )
    print(f"renewals with a lease granted before a kill that succeeded after it: {ledger.kept_leases}")
    print(f"acknowledged commands checked: {checked}; lost or wrong: {len(lost)}")
    for line in lost[:20]:
        print("  " + line)
    print(f"verify (replayed log = records, invariants): {'OK' if not differences else differences[:5]}")
    if lost or differences:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
