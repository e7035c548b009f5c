"""Several `amc serve --store postgresql://...` processes on one database, and a plain HTTP
client that finds the leader itself (tests and `make failover`).

The client here is deliberately not the Host Agent's or the CLI's (another piece of work
teaches those to follow the leader): it tries each URL in turn, and takes a 503 or a refused
connection as "not this one, try the next".
"""

from __future__ import annotations

import json
import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import httpx
import psycopg

from amc.adapters import codec
from amc.adapters.http import tokens_file
from amc.adapters.postgres.verify import verify
from amc.check.final import read_final_state
from amc.check.operations import read as read_history
from amc.check.recorder import HistoryFile, SyncRecordingTransport
from amc.check.rules import Report, check, message_tasks
from amc.core.events import LeaseExpired
from tests.support.plans import PLAN
from tests.support.postgres import Cluster
from tests.support.served import serve


class Server:
    """One `amc serve` process on the shared database (its own data directory)."""

    def __init__(self, url: str, data: Path, tokens: Path, *options: str):
        self.output: list[str] = []
        self.child = serve(
            data, "--store", url, *options, sink=lambda name, line: self.output.append(line + "\n"), tokens=tokens
        )
        self.process = self.child.process
        self.url = self.child.url

    @property
    def pid(self) -> int:
        return self.child.pid

    def signal(self, sig: int) -> None:
        self.child.signal(sig)

    def stop(self) -> None:
        self.child.signal(signal.SIGCONT)  # a stopped server hears its SIGTERM only once it runs again
        self.child.stop(15)


def write_tokens(path: Path, host_ids: list[str]) -> dict[str, str]:
    """A tokens file with an admin, a client of tenant 'default' and a host token per host."""
    entries = tokens_file.write_initial(path, host_id=host_ids[0])
    for host_id in host_ids[1:]:
        entries.append({"token": tokens_file.new_token(), "role": "host", "host_id": host_id})
    path.write_text(json.dumps(entries))
    path.chmod(0o600)
    found = {"admin": "", "client": ""}
    for entry in entries:
        found[entry.get("host_id") or entry["role"]] = entry["token"]
    return found


class Follower:
    """A plain HTTP client over several server URLs that sends each request to the leader.

    A 503, a refused or reset connection or a timeout moves it to the next URL; it keeps
    trying (all URLs in turn) until `patience` seconds have passed. `switches` counts the moves."""

    def __init__(
        self,
        urls: list[str],
        token: str,
        patience: float = 15.0,
        timeout: float = 10.0,
        history: tuple[HistoryFile, str] | None = None,
    ):
        """`history`: a file and a client name to record this client's operations under (`amc.check`)."""
        self.urls = urls
        self.token = token
        self.patience = patience
        self.current = 0
        self.switches = 0
        transport: httpx.BaseTransport = httpx.HTTPTransport()
        if history is not None:
            transport = SyncRecordingTransport(transport, *history)
        self.http = httpx.Client(timeout=timeout, transport=transport)

    def request(self, method: str, path: str, body: Any = None) -> httpx.Response:
        deadline = time.monotonic() + self.patience
        while True:
            url = self.urls[self.current]
            try:
                response = self.http.request(
                    method,
                    url + path,
                    json=body,
                    headers={"Authorization": f"Bearer {self.token}"},
                )
                if response.status_code != 503:
                    return response
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"no server led within {self.patience} s for {method} {path}")
            self.current = (self.current + 1) % len(self.urls)
            self.switches += 1
            time.sleep(0.05)

    def close(self) -> None:
        self.http.close()


def health(url: str) -> tuple[int, Any]:
    try:
        response = httpx.get(url + "/v1/health", timeout=2)
    except httpx.TransportError as exc:
        return 0, repr(exc)
    return response.status_code, response.json()


# --- failover under load (bench/failover.py, and a bounded run in the tests) ---------------


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
                posted = follower.request(
                    "POST", f"/v1/tasks/{task_id}/messages", {"intent": "steer", "text": "take your time"}
                )
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


def check_ledger(url: str, ledger: Ledger) -> tuple[int, list[str]]:
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


@attrs.define
class FailoverReport:
    takeovers: list[float]  # seconds from each kill until the standby's health was 200
    first_renewals: list[float]  # seconds from each kill until a renewal succeeded
    counts: dict[str, int]  # acknowledged commands by kind
    kept_leases: int  # renewals of a lease granted before a kill that succeeded after it
    checked: int  # acknowledged commands looked up in the database
    lost: list[str]  # what was acknowledged and is not there (or leases that lapsed)
    differences: list[str]  # `verify`: the replayed log against the records, the invariants
    history: Report  # the history checker over every operation the hosts and clients saw


def run_failover(
    cluster: Cluster,
    scratch: Path,
    *,
    kills: int = 10,
    interval: float = 4.0,
    hosts: int = 4,
    clients: int = 2,
    progress: Callable[[str], None] = lambda line: None,
) -> FailoverReport:
    """Two servers on a new database of `cluster`, load, and `kills` SIGKILLs of the leader,
    each `interval` seconds apart (see bench/failover.py)."""
    host_ids = [f"h{i + 1}" for i in range(hosts)]
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
    urls = [s.url for s in servers]  # shared by every follower; replaced in place after each kill
    ledger, stop, kill_times = Ledger(), threading.Event(), []
    history = HistoryFile(scratch / "history.jsonl")
    followers = [Follower(urls, tokens[h], patience=30, history=(history, h)) for h in host_ids]
    followers += [Follower(urls, tokens["client"], patience=30, history=(history, f"c{n}")) for n in range(clients)]
    threads = [
        threading.Thread(target=host_loop, args=(f, h, ledger, stop, kill_times), daemon=True)
        for f, h in zip(followers, host_ids)
    ]
    threads += [
        threading.Thread(target=client_loop, args=(f, n, ledger, stop), daemon=True)
        for n, f in enumerate(followers[hosts:])
    ]
    for thread in threads:
        thread.start()
    takeovers: list[float] = []
    first_renewals: list[float] = []
    try:
        for k in range(kills):
            time.sleep(interval)
            leader = leader_of(servers)
            assert leader is not None, "nobody leads"
            killed = time.monotonic()
            kill_times.append(killed)
            leader.signal(signal.SIGKILL)
            leader.process.wait()
            standby = next(s for s in servers if s is not leader)
            while health(standby.url)[0] != 200:
                if time.monotonic() - killed > 30:
                    raise AssertionError("the standby did not take over within 30 s")
                time.sleep(0.02)
            takeovers.append(time.monotonic() - killed)
            while not any(t > killed for t in ledger.renewals[-50:]) and time.monotonic() - killed < 30:
                time.sleep(0.02)
            after = [t for t in ledger.renewals[-50:] if t > killed]
            if after:
                first_renewals.append(min(after) - killed)
            replacement = launch()  # the killed server comes back, as the next standby
            servers = [standby, replacement]
            urls[:] = [s.url for s in servers]
            shown = f"{first_renewals[-1]:.2f} s" if after else "none within 30 s"
            progress(f"kill {k + 1}: standby led after {takeovers[-1]:.2f} s; first renewal after {shown}")
    finally:
        stop.set()
        for thread in threads:
            thread.join(40)
        for follower in followers:
            follower.close()
        try:
            checked_history = check_history(history, servers, tokens["admin"])
        finally:
            history.close()
            for server in servers:
                server.stop()
    checked, lost = check_ledger(url, ledger)
    return FailoverReport(
        takeovers, first_renewals, dict(ledger.counts), ledger.kept_leases, checked, lost, verify(url), checked_history
    )


def check_history(history: HistoryFile, servers: list[Server], admin: str) -> Report:
    """The history checker over what the followers recorded, against the leader's final state."""
    deadline = time.monotonic() + 30
    while (leader := leader_of(servers)) is None:
        assert time.monotonic() < deadline, "nobody leads at the end"
        time.sleep(0.1)
    recorded = read_history([history.path])
    return check(recorded, read_final_state(leader.url, admin, message_tasks(recorded.operations)))
