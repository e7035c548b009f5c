"""Model-based differential run: random request sequences, the kernel (amc.core) as the oracle.

Hypothesis generates programs of submits, registrations, claims, starts, renewals, results,
cancels and clock advances across two tenants and two hosts. Each request goes to the
target over HTTP and, as the matching command, to `amc.core.kernel.execute` on a state of
its own. The two must agree on the status code, the problem `code`, and every task field
the protocol fixes: status, attempts (number, host, device, outcome, renewals and their
times), cancellation, result, the claim and lease answers, the devices' reservations, and
the history (types, times, and the status and reason of `ended`). Ids the server chooses
(task ids, lease ids) are mapped to the oracle's by order of creation; `updated_at` and the
plan's rendering are not compared.

Times are compared exactly, which is why this run needs the manual clock: the oracle's
`now` is the server's, learned from ``POST /v1/admin/clock``. Without a manual clock the
test is skipped with that reason.

This is the only module of the suite that imports amc.core; everything else is black-box.

Knobs (environment variables): AMC_CONFORMANCE_EXAMPLES (programs, default 50) and
AMC_CONFORMANCE_STEPS (longest program, default 30) keep the run under half a minute. The
programs are the same on every run, so a report can be reproduced; AMC_CONFORMANCE_RANDOM=1
draws fresh ones. A failure prints the program that failed, step by step, and the first
disagreement; AMC_CONFORMANCE_SHRINK=1 first shrinks it to a minimal program (slow: every
attempt replays against the server). With -s the run prints how many requests of each kind
and outcome it made.
"""

from __future__ import annotations

import os
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, Phase, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule, run_state_machine_as_test

from amc.conformance.client import PLAN, RUN_ATTRIBUTE, wire
from amc.core import kernel
from amc.core.commands import (
    CancelTask,
    ClaimTask,
    ExpireLeases,
    RegisterHost,
    ReleaseAttempt,
    RenewLease,
    ReportResult,
    StartAttempt,
    SubmitTask,
)
from amc.core.events import HostRegistered
from amc.core.history import history_type
from amc.core.records import DeviceSpec, Plan, Requirements, Step, Task
from amc.core.state import State

EXAMPLES = int(os.environ.get("AMC_CONFORMANCE_EXAMPLES", "50"))
STEPS = int(os.environ.get("AMC_CONFORMANCE_STEPS", "30"))
# The programs are the same on every run (a report you can reproduce) unless
# AMC_CONFORMANCE_RANDOM=1 asks for fresh ones.
RANDOM = os.environ.get("AMC_CONFORMANCE_RANDOM", "") not in ("", "0")
# Shrinking replays the failing program many times against the server: minutes, not seconds.
SHRINK = os.environ.get("AMC_CONFORMANCE_SHRINK", "") not in ("", "0")

OUTCOMES: Counter = Counter()  # what the run exercised: "verb: status code", printed with -s

ORACLE_PLAN = Plan(steps=tuple(Step(id=s["id"], action=s["action"], args=s["args"]) for s in PLAN["steps"]))
SERIALS = ("s1", "s2", "s3")
MODELS = {"s1": "P7", "s2": "P8", "s3": "P7"}


# The actions of a program and their weights, and each action's arguments.
ACTIONS = (
    ["submit"] * 2
    + ["claim"] * 3
    + ["start_or_renew"] * 3
    + ["result"] * 3
    + ["release"] * 2
    + ["cancel"] * 3
    + ["advance"] * 2
)
LEASE_ACTIONS = {"start_or_renew", "result", "release"}
# Which lease or task an action picks (see Differential.lease_of_kind); the repeats are weights.
LEASE_KINDS = ("any", "active", "active", "pending", "pending", "replaced", "ended", "expired")
RESULT_KINDS = ("any", "active", "active", "pending", "replaced", "replaced", "ended", "expired")
TASK_KINDS = (
    "any",
    "queued",
    "assigned",
    "assigned",
    "dispatched",
    "dispatched",
    "done",
    "done",
    "failed",
    "cancelled",
)
ARGUMENTS = {
    "submit": dict(
        who=st.sampled_from(["acme", "beta", "admin for acme", "admin for beta"]),
        priority=st.sampled_from([0, 5]),
        max_attempts=st.sampled_from([1, 2, 3]),
        model=st.sampled_from([None, None, "P7", "P8"]),
        pin=st.sampled_from([None, None, None, "s1", "s3"]),
        key=st.sampled_from([None, None, None, "k1", "k2"]),
    ),
    "claim": dict(
        host=st.sampled_from(["h1", "h2"]),
        lease_seconds=st.sampled_from([1, 2, 5]),
        only=st.sampled_from([None, None, None, None, ["s1"], ["s2", "s3"], []]),
        inventory=st.sampled_from([None] * 12 + [[], ["s1"], ["s2", "s3"], ["s1", "s2", "s3"]]),
    ),
    "start_or_renew": dict(
        kind=st.sampled_from(LEASE_KINDS),
        pick=st.integers(0, 999),
        verb=st.sampled_from(["start", "renew"]),
        sender=st.sampled_from(["owner", "owner", "owner", "other host"]),
        lease_id=st.sampled_from(["own", "own", "own", "another"]),
        other=st.integers(0, 999),
    ),
    "result": dict(
        kind=st.sampled_from(RESULT_KINDS),
        pick=st.integers(0, 999),
        status=st.sampled_from(["done", "done", "failed", "cancelled"]),
        metadata=st.sampled_from([None, {}, {"n": 1}]),
        sender=st.sampled_from(["owner", "owner", "owner", "other host"]),
        lease_id=st.sampled_from(["own", "own", "own", "another"]),
        other=st.integers(0, 999),
    ),
    "release": dict(
        kind=st.sampled_from(RESULT_KINDS),
        pick=st.integers(0, 999),
        reason=st.sampled_from([None, "host_stopping", "device_lost"]),
        sender=st.sampled_from(["owner", "owner", "owner", "other host"]),
        lease_id=st.sampled_from(["own", "own", "own", "another"]),
        other=st.integers(0, 999),
    ),
    "cancel": dict(
        kind=st.sampled_from(TASK_KINDS),
        pick=st.integers(0, 999),
        who=st.sampled_from(["owner", "owner", "other tenant", "admin"]),
        reason=st.sampled_from([None, "r1", "r2"]),
    ),
    "advance": dict(
        how=st.sampled_from(
            [
                "0.5 s",
                "1 s",
                "2 s",
                "3 s",
                "to an active lease's expiry",
                "to a pending lease's expiry",
                "to 1 ms before an active lease's expiry",
            ]
        ),
        pick=st.integers(0, 999),
    ),
}


@dataclass(eq=False)
class TaskRef:
    n: int
    server_id: str
    oracle_id: str

    def __repr__(self) -> str:
        return f"t{self.n}"


@dataclass(eq=False)
class LeaseRef:
    n: int
    server_lease: str
    oracle_lease: str
    task: TaskRef
    attempt: int
    host: str

    def __repr__(self) -> str:
        return f"L{self.n}({self.task!r}/{self.attempt}@{self.host})"


class Disagreement(AssertionError):
    """The target and the oracle answered differently."""


class Differential(RuleBasedStateMachine):
    """One example: a fresh oracle state, a fresh run tag on the shared target."""

    world: Any = None  # set by the test: the scene (callers, clock) of this run

    # -- set-up ----------------------------------------------------------------------------

    @initialize()
    def begin(self) -> None:
        scene = self.world
        self.tag = uuid.uuid4().hex[:10]
        self.state = State()
        self.clients = {"acme": scene.acme, "beta": scene.beta}
        self.tenant = {"acme": scene.acme.tenant, "beta": scene.beta.tenant}
        self.hosts = {"h1": scene.h1, "h2": scene.h2}
        self.admin = scene.admin
        self.clock = scene.clock
        self.clock.advance(0.001)  # learn the server's now
        self.now = self.clock.now()
        self.refs: dict[str, TaskRef] = {}  # oracle id -> ref
        self.lease_count = 0
        self.all_leases: list[LeaseRef] = []
        self.history: dict[str, list[tuple]] = {}
        # Both hosts start with devices (h1: s1, s2; h2: s2, s3); a claim may replace them.
        self.register("h1", ["s1", "s2"])
        self.register("h2", ["s2", "s3"])

    def teardown(self) -> None:
        """Leave the shared target tidy: this example's tasks cancelled, its devices gone."""
        if getattr(self, "state", None) is None:
            return
        for ref in self.refs.values():
            self.admin.send("POST", f"/v1/tasks/{ref.server_id}/cancel", {})
        for host in self.hosts.values():
            host.caller.send("PUT", f"/v1/hosts/{host.id}", {"devices": []})

    # -- the oracle ------------------------------------------------------------------------

    def oracle(self, command) -> kernel.Decision:
        decision = kernel.execute(self.state, command)
        for event in decision.events:
            kind = history_type(event)
            if kind is not None and not isinstance(event, HostRegistered):
                data = getattr(event, "status", None), getattr(event, "reason", None)
                ended = data if kind == "ended" else None
                self.history.setdefault(event.task_id, []).append((kind, wire(event.at), ended))
        return decision

    @staticmethod
    def expected(decision: kernel.Decision) -> tuple[int, str | None]:
        if decision.rejection is not None:
            return decision.rejection.http_status, decision.rejection.code.name
        reply = decision.reply
        if isinstance(reply, kernel.Submitted):
            return (201 if reply.created else 200), None
        if isinstance(reply, kernel.CancelAccepted):
            return (202 if reply.pending else 200), None
        if isinstance(reply, kernel.NoAssignment):
            return 204, None
        return 200, None

    def agree(self, label: str, response, decision: kernel.Decision):
        """The response's status and code must be the oracle's; returns the body (or None)."""
        status, code = self.expected(decision)
        body = None if response.status_code == 204 or not response.content else response.json()
        got_code = body.get("code") if isinstance(body, dict) and response.status_code >= 400 else None
        OUTCOMES[f"{label.split()[0]}: {status} {code or ''}".strip()] += 1
        note(f"{label} -> {response.status_code} {got_code or ''}")
        if (response.status_code, got_code) != (status, code):
            raise Disagreement(
                f"{label}: the target answered {response.status_code} {got_code or ''} "
                f"{response.text[:300]}\n  the oracle: {status} {code or ''}"
                + (f" ({decision.rejection.detail})" if decision.rejection else "")
            )
        return body

    # -- views the protocol fixes ----------------------------------------------------------

    def server_id(self, oracle_id: str | None) -> str | None:
        return None if oracle_id is None else self.refs[oracle_id].server_id

    def oracle_view(self, task: Task) -> dict:
        def time(value):
            return None if value is None else wire(value)

        c, r = task.cancellation, task.result
        return {
            "id": self.server_id(task.id),
            "tenant": task.tenant,
            "status": task.status,
            "priority": task.priority,
            "max_attempts": task.max_attempts,
            "labels": task.labels,
            "requirements": {"serial": task.requirements.serial, "attributes": task.requirements.attributes},
            "created_at": wire(task.created_at),
            "attempt": task.attempts[-1].number if task.attempts else None,
            "attempts": [
                {
                    "number": a.number,
                    "host_id": self.hosts[a.host_id].id,  # the oracle's h1/h2 are the target's two hosts
                    "device": a.device,
                    "assigned_at": wire(a.assigned_at),
                    "dispatched_at": time(a.dispatched_at),
                    "lease_expires_at": wire(a.lease_expires_at),
                    "renewals": a.renewals,
                    "ended_at": time(a.ended_at),
                    "outcome": a.outcome,
                }
                for a in task.attempts
            ],
            "cancellation": None
            if c is None
            else {
                "state": c.state,
                "requested_at": wire(c.requested_at),
                "attempt": c.attempt,
                "delivered_at": time(c.delivered_at),
                "reason": c.reason,
            },
            "result": None
            if r is None
            else {
                "status": r.status,
                "attempt": r.attempt,
                "reason": r.reason,
                "metadata": r.metadata,
                "steps": None,
                "recorded_at": wire(r.recorded_at),
            },
        }

    @staticmethod
    def server_view(task: dict) -> dict:
        keys = (
            "id",
            "tenant",
            "status",
            "priority",
            "max_attempts",
            "labels",
            "requirements",
            "created_at",
            "attempt",
            "attempts",
            "cancellation",
            "result",
        )
        view = {key: task.get(key) for key in keys}
        attempt_keys = (
            "number",
            "host_id",
            "device",
            "assigned_at",
            "dispatched_at",
            "lease_expires_at",
            "renewals",
            "ended_at",
            "outcome",
        )
        view["attempts"] = [{key: a.get(key) for key in attempt_keys} for a in task.get("attempts") or []]
        if task.get("result") is not None:
            view["result"] = {
                key: task["result"].get(key)
                for key in ("status", "attempt", "reason", "metadata", "steps", "recorded_at")
            }
        return view

    def same_task(self, label: str, server_task: dict, oracle_id: str) -> None:
        expected = self.oracle_view(self.state.tasks[oracle_id])
        got = self.server_view(server_task)
        if got != expected:
            differences = {k: (got[k], expected[k]) for k in expected if got[k] != expected[k]}
            raise Disagreement(f"{label}: task {self.refs[oracle_id]!r} differs (target, oracle): {differences}")

    def check_task(self, label: str, ref: TaskRef) -> None:
        """Read the task and its history from the target; both must be the oracle's."""
        self.same_task(f"{label}, then GET {ref!r}", self.admin.get_task(ref.server_id), ref.oracle_id)
        events = self.admin.history(ref.server_id)
        got = [
            (e["type"], e["at"], (e["data"].get("status"), e["data"].get("reason")) if e["type"] == "ended" else None)
            for e in events
        ]
        expected = self.history.get(ref.oracle_id, [])
        if got != expected:
            raise Disagreement(f"{label}, then GET {ref!r}/history: target {got}\n  oracle {expected}")
        if [e["seq"] for e in events] != list(range(1, len(events) + 1)):
            raise Disagreement(f"{label}: history seq of {ref!r} is not 1..n: {[e['seq'] for e in events]}")

    def check_hosts(self, label: str) -> None:
        for host_id, host in self.hosts.items():
            oracle = self.state.hosts.get(host_id)
            if oracle is None:  # not registered in this example (the shared target may know it)
                continue
            expected = [
                {
                    "serial": d.serial,
                    "attributes": d.attributes,
                    "online": d.online,
                    "reservation": None
                    if d.reservation is None
                    else {"task_id": self.server_id(d.reservation.task_id), "attempt": d.reservation.attempt},
                }
                for d in oracle.devices
            ]
            got = [d for d in host.read()["devices"] if d["serial"].endswith(f".{self.tag}")]
            if got != expected:
                raise Disagreement(f"{label}, then GET host {host_id}: target {got}\n  oracle {expected}")

    # -- names -----------------------------------------------------------------------------

    def serial(self, name: str) -> str:
        return f"{name}.{self.tag}"

    def requirements(self, model: str | None, pin: str | None) -> dict:
        attributes = {RUN_ATTRIBUTE: self.tag, **({"model": model} if model else {})}
        return {"serial": self.serial(pin) if pin else None, "attributes": attributes}

    # -- picking what to act on ----------------------------------------------------------
    #
    # Rules name their target by a kind and a number (`kind="pending", pick=3`), and the
    # kind is looked up in the oracle's state: a short program then reaches the interesting
    # cases (a lease whose task has a pending cancellation, a replaced attempt, a done task)
    # as easily as the plain ones. An empty kind falls back to every lease (or task).

    def lease_of_kind(self, kind: str, pick: int) -> LeaseRef:
        def attempt(lease: LeaseRef):
            return self.state.tasks[lease.task.oracle_id].attempts[lease.attempt - 1]

        def current(lease: LeaseRef) -> bool:
            return len(self.state.tasks[lease.task.oracle_id].attempts) == lease.attempt

        tests = {
            "any": lambda lease: True,
            "active": lambda lease: attempt(lease).active,
            "pending": lambda lease: (
                attempt(lease).active and self.state.tasks[lease.task.oracle_id].cancellation_pending
            ),
            "replaced": lambda lease: not current(lease),
            "ended": lambda lease: attempt(lease).outcome not in (None, "expired"),
            "expired": lambda lease: attempt(lease).outcome == "expired" and current(lease),
        }
        found = [lease for lease in self.all_leases if tests[kind](lease)] or self.all_leases
        return found[pick % len(found)]

    def task_of_kind(self, kind: str, pick: int) -> TaskRef:
        refs = list(self.refs.values())
        found = [r for r in refs if kind == "any" or self.state.tasks[r.oracle_id].status == kind] or refs
        return found[pick % len(found)]

    # -- rules -----------------------------------------------------------------------------

    def submit(self, who, priority, max_attempts, model, pin, key):
        requirements = self.requirements(model, pin)
        body = {"plan": PLAN, "requirements": requirements, "priority": priority, "max_attempts": max_attempts}
        if key is not None:
            # An admin's keys are its own: whether an admin's body naming the tenant is "the same"
            # as a client's body without it is not the protocol's to say, so they never meet.
            body["idempotency_key"] = f"{key}.{'admin.' if who.startswith('admin') else ''}{self.tag}"
        tenant_name = who.split()[-1]
        if who.startswith("admin"):
            caller, body["tenant"] = self.admin, self.tenant[tenant_name]
        else:
            caller = self.clients[tenant_name]
        label = (
            f"submit by {who} (priority {priority}, max_attempts {max_attempts}, model {model}, pin {pin}, key {key})"
        )
        response = caller.send("POST", "/v1/tasks", body)
        oracle_id = f"t{len(self.refs) + 1}"
        decision = self.oracle(
            SubmitTask(
                now=self.now,
                task_id=oracle_id,
                tenant=self.tenant[tenant_name],
                plan=ORACLE_PLAN,
                requirements=Requirements(serial=requirements["serial"], attributes=requirements["attributes"]),
                priority=priority,
                max_attempts=max_attempts,
                idempotency_key=body.get("idempotency_key"),
            )
        )
        task = self.agree(label, response, decision)
        if decision.rejection is not None:
            return
        submitted = decision.reply
        assert isinstance(submitted, kernel.Submitted)
        if submitted.created:
            self.refs[oracle_id] = TaskRef(len(self.refs) + 1, task["id"], oracle_id)
            note(f"  {self.refs[oracle_id]!r} is {task['id']}")
        self.same_task(label, task, submitted.task_id)

    def register(self, host: str, devices: list[str]) -> None:
        listed: list[dict[str, Any]] = [
            {"serial": self.serial(s), "attributes": {RUN_ATTRIBUTE: self.tag, "model": MODELS[s]}} for s in devices
        ]
        response = self.hosts[host].caller.send("PUT", f"/v1/hosts/{self.hosts[host].id}", {"devices": listed})
        decision = self.oracle(
            RegisterHost(
                now=self.now,
                host_id=host,
                devices=tuple(DeviceSpec(serial=d["serial"], attributes=d["attributes"]) for d in listed),
            )
        )
        self.agree(f"register {host} {devices}", response, decision)
        self.check_hosts(f"register {host} {devices}")

    def claim(self, host, lease_seconds, only, inventory):
        """A claim, first replacing the host's inventory when `inventory` is given."""
        if inventory is not None:
            self.register(host, inventory)
        body = {"lease_seconds": lease_seconds}
        if only is not None:
            body["devices"] = [self.serial(s) for s in only]
        label = f"claim by {host} {body}"
        response = self.hosts[host].caller.send("POST", f"/v1/hosts/{self.hosts[host].id}/claim", body)
        self.lease_count += 1
        oracle_lease = f"L{self.lease_count}"
        decision = self.oracle(
            ClaimTask(
                now=self.now,
                host_id=host,
                lease_id=oracle_lease,
                lease_ms=lease_seconds * 1000,
                devices=None if only is None else tuple(body["devices"]),
            )
        )
        answer = self.agree(label, response, decision)
        reply = decision.reply
        if not isinstance(reply, kernel.Assignment):
            return
        ref = self.refs[reply.task_id]
        expected = {
            "task_id": ref.server_id,
            "attempt": reply.attempt,
            "device": reply.device,
            "lease_expires_at": wire(reply.lease_expires_at),
            "lease_seconds": lease_seconds,
            "cancel_requested": False,
        }
        got = {key: answer.get(key) for key in expected}
        if got != expected:
            raise Disagreement(f"{label}: target {got}\n  oracle {expected}")
        self.check_task(label, ref)
        lease = LeaseRef(self.lease_count, answer["lease_id"], oracle_lease, ref, reply.attempt, host)
        self.all_leases.append(lease)
        note(f"  {lease!r} on {reply.device}, expires {expected['lease_expires_at']}")

    def lease_request(self, verb: str, lease: LeaseRef, sender: str, other: LeaseRef | None, body_extra: dict):
        host = lease.host if sender == "owner" else ("h2" if lease.host == "h1" else "h1")
        used = other or lease
        body = {"lease_id": used.server_lease, **body_extra}
        path = f"/v1/tasks/{lease.task.server_id}/attempts/{lease.attempt}/{verb}"
        label = f"{verb} {lease!r} by {host} with the lease of {used!r} {body_extra or ''}"
        response = self.hosts[host].caller.send("POST", path, body)
        common = dict(
            now=self.now, host_id=host, task_id=lease.task.oracle_id, attempt=lease.attempt, lease_id=used.oracle_lease
        )
        command: StartAttempt | RenewLease | ReportResult | ReleaseAttempt
        if verb == "start":
            command = StartAttempt(**common)
        elif verb == "renew":
            command = RenewLease(**common)
        elif verb == "release":
            command = ReleaseAttempt(**common, reason=body_extra.get("reason"))
        else:
            command = ReportResult(**common, status=body_extra["status"], metadata=body_extra.get("metadata", {}))
        decision = self.oracle(command)
        answer = self.agree(label, response, decision)
        if isinstance(decision.reply, kernel.LeaseGranted):
            reply = decision.reply
            expected = {
                "task_id": lease.task.server_id,
                "attempt": reply.attempt,
                "status": reply.status,
                "lease_expires_at": wire(reply.lease_expires_at),
                "cancel_requested": reply.cancel_requested,
            }
            got = {key: answer.get(key) for key in expected}
            if got != expected:
                raise Disagreement(f"{label}: target {got}\n  oracle {expected}")
        elif isinstance(decision.reply, (kernel.ResultRecorded, kernel.ReleaseRecorded)):
            self.same_task(label, answer, lease.task.oracle_id)
        self.check_task(label, lease.task)

    def start_or_renew(self, kind, pick, verb, sender, lease_id, other):
        lease = self.lease_of_kind(kind, pick)
        self.lease_request(verb, lease, sender, self.lease_of_kind("any", other) if lease_id == "another" else None, {})

    def result(self, kind, pick, status, metadata, sender, lease_id, other):
        extra = {"status": status} if metadata is None else {"status": status, "metadata": metadata}
        lease = self.lease_of_kind(kind, pick)
        self.lease_request(
            "result", lease, sender, self.lease_of_kind("any", other) if lease_id == "another" else None, extra
        )

    def release(self, kind, pick, reason, sender, lease_id, other):
        extra = {} if reason is None else {"reason": reason}
        lease = self.lease_of_kind(kind, pick)
        self.lease_request(
            "release", lease, sender, self.lease_of_kind("any", other) if lease_id == "another" else None, extra
        )

    def cancel(self, kind, pick, who, reason):
        task = self.task_of_kind(kind, pick)
        owner = self.state.tasks[task.oracle_id].tenant
        owner_name = next(name for name, tenant in self.tenant.items() if tenant == owner)
        other_name = "beta" if owner_name == "acme" else "acme"
        caller = {"owner": self.clients[owner_name], "other tenant": self.clients[other_name], "admin": self.admin}[who]
        body = {} if reason is None else {"reason": reason}
        label = f"cancel {task!r} by {who} {body}"
        response = caller.send("POST", f"/v1/tasks/{task.server_id}/cancel", body)
        scope = None if who == "admin" else self.tenant[owner_name if who == "owner" else other_name]
        decision = self.oracle(CancelTask(now=self.now, task_id=task.oracle_id, tenant=scope, reason=reason))
        answer = self.agree(label, response, decision)
        if decision.rejection is None:
            self.same_task(label, answer, task.oracle_id)
        self.check_task(label, task)

    def advance(self, how, pick):
        """Move the clock by some seconds, or to the instant a lease expires (or 1 ms before).

        A pending lease is one whose task has a pending cancellation (see `lease_of_kind`).
        """
        seconds = float(how.split()[0]) if how.endswith(" s") else 0.5
        if "expiry" in how and self.all_leases:
            lease = self.lease_of_kind("pending" if "pending" in how else "active", pick)
            attempt = self.state.tasks[lease.task.oracle_id].attempts[lease.attempt - 1]
            target = attempt.lease_expires_at - (1 if how.startswith("to 1 ms") else 0)
            if attempt.active and target > self.now:
                seconds = (target - self.now) / 1000
        in_flight = [ref for ref in self.refs.values() if self.state.tasks[ref.oracle_id].active_attempt]
        self.clock.advance(seconds)
        now = self.clock.now()
        if now != self.now + round(seconds * 1000):
            raise Disagreement(f"advance {seconds}: the clock moved from {wire(self.now)} to {wire(now)}")
        self.now = now
        note(f"advance {seconds} s -> now {wire(now)}")
        self.oracle(ExpireLeases(now=now))
        for ref in in_flight:  # only a lease can make time change a task
            self.check_task(f"advance {seconds} s", ref)
        self.check_hosts(f"advance {seconds} s")

    # -- the one rule ----------------------------------------------------------------------
    #
    # One rule draws the action, then its arguments by name, so that the mix of actions is
    # ours (ACTIONS) rather than the outcome of Hypothesis's per-example rule selection,
    # which often leaves a program with only claims or only clock advances. A failing
    # program prints each step's draws: "Draw 1 (action): 'claim'", "Draw 2 (host): 'h1'".

    @rule(data=st.data())
    def step(self, data):
        possible = [a for a in ACTIONS if (a not in LEASE_ACTIONS or self.all_leases) and (a != "cancel" or self.refs)]
        action = data.draw(st.sampled_from(possible), label="action")
        arguments = {name: data.draw(strategy, label=name) for name, strategy in ARGUMENTS[action].items()}
        getattr(self, action)(**arguments)


def differential_programs() -> Differential:
    """The state machine, made by a function of its own: with `derandomize`, Hypothesis seeds
    its programs from the digest of this factory's source, so editing the class (a comment,
    a type) does not change which programs run; editing this function does."""
    return Differential()


def test_the_target_agrees_with_the_kernel_on_random_request_sequences(scene):
    """Model-based differential run: Hypothesis request sequences, amc.core as the oracle (manual clock only)."""
    scene.clock.need_manual("the oracle must know the server's time to the millisecond")
    Differential.world = scene
    try:
        run_state_machine_as_test(
            differential_programs,  # type: ignore[arg-type]  # any factory of a machine will do
            settings=settings(
                max_examples=EXAMPLES,
                stateful_step_count=STEPS,
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
                print_blob=False,
                derandomize=not RANDOM,
                phases=list(Phase) if SHRINK else [p for p in Phase if p not in (Phase.shrink, Phase.explain)],
            ),
        )
    finally:
        Differential.world = None
        print("requests by outcome:", ", ".join(f"{k} x{n}" for k, n in sorted(OUTCOMES.items())))
