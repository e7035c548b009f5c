"""Concurrent load on `amc serve`, with a ledger of every 2xx it got, and the check that the
ledger is still reflected after the server was killed and started again.

Clients (several tenants) submit tasks, with and without an idempotency key, cancel them and
post messages; hosts (one device each) claim, start, renew, upload artifacts of a few KiB to
1 MiB, report results and release attempts. Each actor runs one request at a time, as a real
caller does, and stops at the first transport error: the server was killed under it. What
it was doing then has an unknown outcome and goes into no ledger; a lease whose result or
release was in flight is left out of the renewal check (that request may have ended it).

The actors are asyncio tasks over httpx, so that dozens of them cost one thread.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import random
import secrets
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx

from amc.check.recorder import HistoryFile, RecordingTransport
from tests.support.plans import PLAN

TENANTS = ("acme", "beta", "gamma")
LEASE_SECONDS = 60  # long enough that a lease granted before a kill is still live after the restart
RENEWAL_MARGIN_S = 2.0  # a lease checked after a restart must have at least this left
STEP = PLAN["steps"][0]["id"]


def tokens_for(hosts: int) -> list[dict]:
    """The tokens file: an admin, a client per tenant, a host per host id."""
    listed = [{"token": "crash-admin-" + "0" * 12, "role": "admin"}]
    listed += [{"token": f"crash-client-{t}-" + "0" * 12, "role": "client", "tenant": t} for t in TENANTS]
    listed += [{"token": f"crash-host-h{i}-" + "0" * 12, "role": "host", "host_id": f"h{i}"} for i in range(hosts)]
    return listed


def admin_token() -> str:
    return "crash-admin-" + "0" * 12


def client_token(tenant: str) -> str:
    return f"crash-client-{tenant}-" + "0" * 12


def host_token(host_id: str) -> str:
    return f"crash-host-{host_id}-" + "0" * 12


def epoch(rfc3339: str) -> float:
    return datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


def async_client(url: str, history: HistoryFile | None = None) -> httpx.AsyncClient:
    """A client for the actors; with `history`, every operation it sends is recorded there
    for the history checker (`amc.check`)."""
    transport: httpx.AsyncBaseTransport = httpx.AsyncHTTPTransport(
        socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)],
        limits=httpx.Limits(max_connections=500, max_keepalive_connections=500),
    )
    if history is not None:
        transport = RecordingTransport(transport, history, "crashload")
    return httpx.AsyncClient(base_url=url, timeout=60, transport=transport)


# --- the ledger ------------------------------------------------------------------------------


@dataclass
class Submitted:
    tenant: str
    key: str | None
    body: dict


@dataclass
class Lease:
    task_id: str
    attempt: int
    lease_id: str
    host_id: str
    expires_at: float
    started: bool = False
    cancel_requested: bool = False
    ending: bool = False  # a result or release was sent: its outcome may be unknown
    artifacts: int = 0


@dataclass
class Ledger:
    """Every operation the server acknowledged with a 2xx, and what it promised."""

    submits: dict[str, Submitted] = field(default_factory=dict)
    hosts: set[str] = field(default_factory=set)
    claims: dict[tuple[str, int], str] = field(default_factory=dict)  # (task, attempt) -> host
    starts: set[tuple[str, int]] = field(default_factory=set)
    renewals: collections.Counter = field(default_factory=collections.Counter)  # (task, attempt) -> count
    ends: dict[tuple[str, int], str] = field(default_factory=dict)  # result status, or "released"
    cancels: dict[str, int] = field(default_factory=dict)  # task -> 200 (ended cancelled) or 202 (pending)
    messages: dict[str, set[str]] = field(default_factory=lambda: collections.defaultdict(set))
    artifacts: dict[str, dict] = field(default_factory=dict)  # artifact id -> what the 201/200 said
    read_back: set[str] = field(default_factory=set)  # artifacts already downloaded and hashed
    by_kind: collections.Counter = field(default_factory=collections.Counter)  # acknowledged ops by kind
    unexpected: list[str] = field(default_factory=list)  # answers no correct server gives this load

    def acknowledged(self, kind: str) -> None:
        self.by_kind[kind] += 1

    @property
    def total(self) -> int:
        return sum(self.by_kind.values())

    def note_unexpected(self, what: str, response: httpx.Response) -> None:
        self.unexpected.append(f"{what}: {response.status_code} {response.text[:300]}")


# --- the actors --------------------------------------------------------------------------------


class ClientActor:
    """A client of one tenant: submits, cancels and messages its own tasks."""

    def __init__(self, number: int, ledger: Ledger, rng: random.Random):
        self.tenant = TENANTS[number % len(TENANTS)]
        self.headers = {"Authorization": f"Bearer {client_token(self.tenant)}"}
        self.ledger = ledger
        self.rng = rng
        self.own: list[str] = []

    async def step(self, http: httpx.AsyncClient) -> None:
        roll = self.rng.random()
        if roll < 0.6 or not self.own:
            await self.submit(http)
        elif roll < 0.8:
            await self.cancel(http, self.rng.choice(self.own))
        else:
            await self.message(http, self.rng.choice(self.own))

    async def submit(self, http: httpx.AsyncClient) -> None:
        key = f"k-{secrets.token_hex(8)}" if self.rng.random() < 0.5 else None
        body: dict[str, Any] = {"plan": PLAN, "labels": {"actor": self.tenant}}
        if key is not None:
            body["idempotency_key"] = key
        response = await http.post("/v1/tasks", json=body, headers=self.headers)
        if response.status_code != 201:
            return self.ledger.note_unexpected("submit", response)
        task_id = response.json()["id"]
        self.ledger.submits[task_id] = Submitted(self.tenant, key, body)
        self.ledger.acknowledged("submit with key" if key else "submit")
        self.own.append(task_id)

    async def cancel(self, http: httpx.AsyncClient, task_id: str) -> None:
        response = await http.post(f"/v1/tasks/{task_id}/cancel", json={"reason": "crash test"}, headers=self.headers)
        if response.status_code in (200, 202):
            if self.ledger.cancels.get(task_id) != 200:
                self.ledger.cancels[task_id] = response.status_code
            self.ledger.acknowledged("cancel")
        elif response.status_code != 409:  # 409 task_terminal: it ended first
            self.ledger.note_unexpected("cancel", response)

    async def message(self, http: httpx.AsyncClient, task_id: str) -> None:
        body = {"intent": "steer", "text": "a note from the crash test"}
        response = await http.post(f"/v1/tasks/{task_id}/messages", json=body, headers=self.headers)
        if response.status_code == 201:
            self.ledger.messages[task_id].add(response.json()["id"])
            self.ledger.acknowledged("message")
        elif response.status_code != 409:
            self.ledger.note_unexpected("message", response)


class HostActor:
    """A host with one device: claims an attempt and works it to its end, one request at a time."""

    def __init__(self, number: int, ledger: Ledger, rng: random.Random):
        self.host_id = f"h{number}"
        self.headers = {"Authorization": f"Bearer {host_token(self.host_id)}"}
        self.ledger = ledger
        self.rng = rng
        self.lease: Lease | None = None
        self.registered = False

    async def step(self, http: httpx.AsyncClient) -> None:
        if not self.registered:
            await self.register(http)
        elif self.lease is None:
            await self.claim(http)
        elif not self.lease.started:
            await self.extend(http, self.lease, "start")
        elif self.lease.cancel_requested:
            await self.finish(http, self.lease, "cancelled")
        else:
            choice = self.rng.choices(("renew", "upload", "finish"), (3, 2, 2))[0]
            if choice == "renew":
                await self.extend(http, self.lease, "renew")
            elif choice == "upload" and self.lease.artifacts < 3:
                await self.upload(http, self.lease)
            else:
                outcome = self.rng.choices(("done", "failed", "release"), (6, 2, 2))[0]
                await self.finish(http, self.lease, outcome)

    async def register(self, http: httpx.AsyncClient) -> None:
        body = {"devices": [{"serial": f"emulator-{self.host_id}", "attributes": {}}]}
        response = await http.put(f"/v1/hosts/{self.host_id}", json=body, headers=self.headers)
        if response.status_code != 200:
            return self.ledger.note_unexpected("register", response)
        self.registered = True
        self.ledger.hosts.add(self.host_id)
        self.ledger.acknowledged("register")

    async def claim(self, http: httpx.AsyncClient) -> None:
        body = {"wait_seconds": 0.5, "lease_seconds": LEASE_SECONDS}
        response = await http.post(f"/v1/hosts/{self.host_id}/claim", json=body, headers=self.headers)
        if response.status_code == 204:
            return
        if response.status_code != 200:
            return self.ledger.note_unexpected("claim", response)
        got = response.json()
        self.lease = Lease(
            got["task_id"],
            got["attempt"],
            got["lease_id"],
            self.host_id,
            epoch(got["lease_expires_at"]),
            cancel_requested=got["cancel_requested"],
        )
        self.ledger.claims[(got["task_id"], got["attempt"])] = self.host_id
        self.ledger.acknowledged("claim")

    async def extend(self, http: httpx.AsyncClient, lease: Lease, verb: str) -> None:
        path = f"/v1/tasks/{lease.task_id}/attempts/{lease.attempt}/{verb}"
        response = await http.post(path, json={"lease_id": lease.lease_id}, headers=self.headers)
        if response.status_code == 200:
            got = response.json()
            lease.expires_at = epoch(got["lease_expires_at"])
            lease.cancel_requested = got["cancel_requested"]
            if verb == "start":
                lease.started = True
                self.ledger.starts.add((lease.task_id, lease.attempt))
            else:
                self.ledger.renewals[(lease.task_id, lease.attempt)] += 1
            self.ledger.acknowledged(verb)
        else:
            self.drop(lease, verb, response)

    async def upload(self, http: httpx.AsyncClient, lease: Lease) -> None:
        data = self.rng.randbytes(int(2 ** self.rng.uniform(11, 20)))  # 2 KiB .. 1 MiB
        name = f"evidence-{lease.artifacts}.bin"
        lease.artifacts += 1
        path = f"/v1/tasks/{lease.task_id}/attempts/{lease.attempt}/artifacts/{name}"
        headers = {**self.headers, "Amc-Lease-Id": lease.lease_id, "Content-Type": "application/octet-stream"}
        response = await http.put(path, content=data, params={"step": STEP}, headers=headers)
        if response.status_code in (200, 201):
            got = response.json()
            if got["sha256"] != hashlib.sha256(data).hexdigest() or got["size"] != len(data):
                return self.ledger.note_unexpected("upload (another sha256 or size)", response)
            self.ledger.artifacts[got["id"]] = got
            self.ledger.acknowledged("artifact upload")
        else:
            self.drop(lease, "upload", response)

    async def finish(self, http: httpx.AsyncClient, lease: Lease, outcome: str) -> None:
        lease.ending = True
        base = f"/v1/tasks/{lease.task_id}/attempts/{lease.attempt}"
        if outcome == "release":
            body = {"lease_id": lease.lease_id, "reason": "crash test"}
            response = await http.post(f"{base}/release", json=body, headers=self.headers)
        else:
            body = {"lease_id": lease.lease_id, "status": outcome, "metadata": {"by": "crash test"}}
            response = await http.post(f"{base}/result", json=body, headers=self.headers)
        if response.status_code == 200:
            self.ledger.ends[(lease.task_id, lease.attempt)] = "released" if outcome == "release" else outcome
            self.ledger.acknowledged(outcome if outcome == "release" else "result")
            self.lease = None
        else:
            self.drop(lease, outcome, response)

    def drop(self, lease: Lease, what: str, response: httpx.Response) -> None:
        """A 409 ends this host's work on the attempt (it expired, or was cancelled and ended)."""
        if response.status_code != 409:
            self.ledger.note_unexpected(f"{what} on {lease.task_id}/{lease.attempt}", response)
        if self.lease is lease:
            self.lease = None


async def run_actor(actor: ClientActor | HostActor, http: httpx.AsyncClient, stop: asyncio.Event) -> None:
    """Step the actor until `stop`, or until the server dies under one of its requests."""
    while not stop.is_set():
        try:
            await actor.step(http)
        except httpx.TransportError:
            return
        await asyncio.sleep(0)


def forget_unknown_outcomes(hosts: list[HostActor]) -> None:
    """After a kill: a lease whose result or release was in flight may have ended; let it go."""
    for host in hosts:
        if host.lease is not None and host.lease.ending:
            host.lease = None


# --- the check after a restart -----------------------------------------------------------------


@dataclass
class CheckReport:
    checked: int = 0
    lost: list[str] = field(default_factory=list)
    leases_renewed: int = 0


async def all_tasks(http: httpx.AsyncClient) -> dict[str, dict]:
    headers = {"Authorization": f"Bearer {admin_token()}"}
    tasks: dict[str, dict] = {}
    after = None
    while True:
        params = {"limit": "1000", **({"after": after} if after else {})}
        response = await http.get("/v1/tasks", params=params, headers=headers)
        response.raise_for_status()
        page = response.json()
        tasks.update((t["id"], t) for t in page["tasks"])
        if not (after := page["next"]):
            return tasks


async def gather_limited(calls: list[Callable[[], Any]], limit: int = 32) -> list[Any]:
    gate = asyncio.Semaphore(limit)

    async def one(call):
        async with gate:
            return await call()

    return await asyncio.gather(*(one(c) for c in calls))


async def check_ledger(http: httpx.AsyncClient, ledger: Ledger, hosts: list[HostActor]) -> CheckReport:
    """Every acknowledged operation is reflected; every live lease renews. Counts what it checked."""
    report = CheckReport()

    def expect(ok: bool, what: str) -> None:
        report.checked += 1
        if not ok:
            report.lost.append(what)

    # Leases first: their terms run while the rest is checked.
    async def renew(host: HostActor) -> None:
        lease = host.lease
        assert lease is not None
        path = f"/v1/tasks/{lease.task_id}/attempts/{lease.attempt}/renew"
        response = await http.post(path, json={"lease_id": lease.lease_id}, headers=host.headers)
        expect(response.status_code == 200, f"lease of {lease.task_id}/{lease.attempt}: renewal {response.text}")
        if response.status_code == 200:
            report.leases_renewed += 1
            lease.expires_at = epoch(response.json()["lease_expires_at"])
            lease.cancel_requested = response.json()["cancel_requested"]
            ledger.renewals[(lease.task_id, lease.attempt)] += 1
        else:
            host.lease = None

    now = datetime.now().timestamp()
    holders = [h for h in hosts if h.lease is not None and h.lease.expires_at - now > RENEWAL_MARGIN_S]
    await gather_limited([lambda h=h: renew(h) for h in holders])

    tasks = await all_tasks(http)
    for task_id, submitted in ledger.submits.items():
        task = tasks.get(task_id)
        expect(task is not None and task["tenant"] == submitted.tenant, f"task {task_id} (submitted) is missing")

    async def by_key(task_id: str, submitted: Submitted) -> None:
        headers = {"Authorization": f"Bearer {client_token(submitted.tenant)}"}
        response = await http.post("/v1/tasks", json=submitted.body, headers=headers)
        found = response.status_code == 200 and response.json()["id"] == task_id
        expect(found, f"task {task_id} by its idempotency key: {response.status_code} {response.text[:200]}")

    keyed = [(t, s) for t, s in ledger.submits.items() if s.key is not None]
    await gather_limited([lambda t=t, s=s: by_key(t, s) for t, s in keyed])

    def attempt(task_id: str, number: int) -> dict | None:
        task = tasks.get(task_id)
        if task is None or len(task["attempts"]) < number:
            return None
        return task["attempts"][number - 1]

    for (task_id, number), host_id in ledger.claims.items():
        got = attempt(task_id, number)
        expect(got is not None and got["host_id"] == host_id, f"claim {task_id}/{number} by {host_id}: {got}")
    for task_id, number in ledger.starts:
        got = attempt(task_id, number)
        expect(got is not None and got["dispatched_at"] is not None, f"start {task_id}/{number}: {got}")
    for (task_id, number), count in ledger.renewals.items():
        got = attempt(task_id, number)
        expect(got is not None and got["renewals"] >= count, f"{count} renewals of {task_id}/{number}: {got}")
    for (task_id, number), outcome in ledger.ends.items():
        got = attempt(task_id, number)
        ended = got is not None and got["outcome"] == outcome
        if outcome != "released":
            ended = ended and tasks[task_id]["status"] == outcome and tasks[task_id]["result"]["attempt"] == number
        expect(ended, f"{outcome} of {task_id}/{number}: {got}")
    for task_id, status in ledger.cancels.items():
        task = tasks.get(task_id)
        if status == 200:
            expect(task is not None and task["status"] == "cancelled", f"cancel of {task_id} (200): {task}")
        else:
            expect(task is not None and task["cancellation"] is not None, f"cancel of {task_id} (202): {task}")
    for host_id in ledger.hosts:
        response = await http.get(f"/v1/hosts/{host_id}", headers={"Authorization": f"Bearer {admin_token()}"})
        expect(response.status_code == 200, f"host {host_id} (registered): {response.status_code}")

    async def messages(task_id: str, ids: set[str]) -> None:
        response = await http.get(f"/v1/tasks/{task_id}/messages", headers={"Authorization": f"Bearer {admin_token()}"})
        listed = {m["id"] for m in response.json()["messages"]} if response.status_code == 200 else set()
        for message_id in ids:
            expect(message_id in listed, f"message {message_id} of {task_id}")

    await gather_limited([lambda t=t, i=i: messages(t, i) for t, i in ledger.messages.items()])

    by_task: dict[str, list[dict]] = collections.defaultdict(list)
    for artifact in ledger.artifacts.values():
        by_task[artifact["task_id"]].append(artifact)

    async def artifacts(task_id: str, acknowledged: list[dict]) -> None:
        headers = {"Authorization": f"Bearer {admin_token()}"}
        response = await http.get(f"/v1/tasks/{task_id}/artifacts", headers=headers)
        listed = {a["id"]: a for a in response.json()["artifacts"]} if response.status_code == 200 else {}
        for artifact in acknowledged:
            expect(listed.get(artifact["id"]) == artifact, f"artifact {artifact['id']} of {task_id}")
            if artifact["id"] in ledger.read_back or artifact["id"] not in listed:
                continue  # its bytes were read back after an earlier restart, and `amc store verify` hashes them
            got = await http.get(f"/v1/tasks/{task_id}/artifacts/{artifact['id']}", headers=headers)
            same = got.status_code == 200 and hashlib.sha256(got.content).hexdigest() == artifact["sha256"]
            expect(same, f"the bytes of artifact {artifact['id']} of {task_id}")
            if same:
                ledger.read_back.add(artifact["id"])

    await gather_limited([lambda t=t, a=a: artifacts(t, a) for t, a in by_task.items()], limit=8)
    return report
