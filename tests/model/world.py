"""A kernel with a clock and terse helpers, so that kernel tests read as scenarios.

Every command goes through `kernel.execute`; after each one the invariants are checked
against the state before it, a rejection must leave the state exactly as it was, and
`restart()` rebuilds the state from the event log (and from the records) and requires
both to equal the live state.
"""

from __future__ import annotations

import itertools

import attrs

from amc.core import invariants, kernel
from amc.core.commands import (
    AcknowledgeMessage,
    CancelTask,
    ClaimTask,
    Command,
    EndSession,
    ExpireLeases,
    PollAction,
    PostAction,
    PostMessage,
    RegisterHost,
    ReleaseAttempt,
    RenewLease,
    ReportAction,
    ReportResult,
    StartAttempt,
    StoreArtifact,
    SubmitTask,
)
from amc.core.errors import Code
from amc.core.records import Boundary, DeviceSpec, Plan, Step, StepOutcome
from amc.core.state import State
from tests.support.plans import TWO_STEPS, as_record

PLAN = as_record(TWO_STEPS)  # "open" and "look"
START = 1_764_460_800_000  # 2025-11-30T00:00:00Z
LEASE_MS = 30_000


class World:
    def __init__(self, now: int = START):
        self.state = State()
        self.now = now
        self.log: list = []
        self._ids = itertools.count(1)

    # -- driving the kernel --------------------------------------------------------------

    def run(self, command: Command) -> kernel.Decision:
        command = attrs.evolve(command, now=self.now)
        # Expire first, so that what a rejection must leave unchanged is well defined.
        self.log.extend(kernel.execute(self.state, ExpireLeases(now=self.now)).events)
        before = self.state.records_copy()
        decision = kernel.execute(self.state, command)
        self.log.extend(decision.events)
        if not decision.accepted:
            assert self.state == before, f"{decision.rejection} changed the state"
        invariants.check(self.state, before, self.now)
        return decision

    def advance(self, ms: int) -> kernel.Decision:
        self.now += ms
        decision = kernel.execute(self.state, ExpireLeases(now=self.now))
        self.log.extend(decision.events)
        invariants.check(self.state, now=self.now)
        return decision

    def restart(self) -> None:
        """Rebuild from the log and from the records; both must equal the live state."""
        replayed = kernel.replay(self.log)
        assert replayed == self.state, "replaying the log does not rebuild the state"
        rebuilt = State.from_records(self.state.tasks.values(), self.state.hosts.values())
        assert rebuilt == self.state, "rebuilding from the records does not give the state"
        self.state = replayed

    # -- commands ------------------------------------------------------------------------

    def submit(self, tenant: str = "acme", plan: Plan = PLAN, **fields) -> str:
        decision = self.run(SubmitTask(now=0, task_id=f"t{next(self._ids)}", tenant=tenant, plan=plan, **fields))
        assert decision.accepted, decision.rejection
        return decision.reply.task_id

    def register(self, host: str = "h1", *serials: str, attributes: dict | None = None) -> kernel.Decision:
        devices = tuple(DeviceSpec(serial=s, attributes=dict(attributes or {})) for s in serials or ("d1",))
        return self.run(RegisterHost(now=0, host_id=host, devices=devices))

    def claim(
        self, host: str = "h1", lease_ms: int = LEASE_MS, devices=None, sessions: bool = False
    ) -> kernel.Assignment | None:
        decision = self.run(
            ClaimTask(
                now=0,
                host_id=host,
                lease_id=f"L{next(self._ids)}",
                lease_ms=lease_ms,
                devices=devices,
                sessions=sessions,
            )
        )
        return decision.reply if isinstance(decision.reply, kernel.Assignment) else None

    def _lease(self, command_type, a: kernel.Assignment, host: str | None, lease_id: str | None, **fields):
        return self.run(
            command_type(
                now=0,
                host_id=host or self.task(a.task_id).attempts[a.attempt - 1].host_id,
                task_id=a.task_id,
                attempt=a.attempt,
                lease_id=lease_id or a.lease_id,
                **fields,
            )
        )

    def start(self, a, host=None, lease_id=None, progress_step=None) -> kernel.Decision:
        return self._lease(StartAttempt, a, host, lease_id, progress_step=progress_step)

    def renew(self, a, host=None, lease_id=None, progress_step=None) -> kernel.Decision:
        return self._lease(RenewLease, a, host, lease_id, progress_step=progress_step)

    def report(self, a, status: str, host=None, lease_id=None, metadata=None, steps=None) -> kernel.Decision:
        return self._lease(ReportResult, a, host, lease_id, status=status, metadata=metadata or {}, steps=steps)

    def release(self, a, reason: str | None = None, steps=None, host=None, lease_id=None) -> kernel.Decision:
        return self._lease(ReleaseAttempt, a, host, lease_id, reason=reason, steps=steps)

    def cancel(self, task_id: str, tenant: str | None = "acme", reason: str | None = None) -> kernel.Decision:
        return self.run(CancelTask(now=0, task_id=task_id, tenant=tenant, reason=reason))

    def post(self, task_id: str, intent: str, text=None, data=None, tenant: str | None = "acme") -> kernel.Decision:
        message_id = f"m{next(self._ids)}"
        return self.run(
            PostMessage(
                now=0, task_id=task_id, tenant=tenant, message_id=message_id, intent=intent, text=text, data=data
            )
        )

    def ack(self, a, message_id: str, state: str, before_step=..., detail=None, host=None, lease_id=None):
        """Acknowledge a message; `before_step` (a step id or None) is required for `admitted`."""
        boundary = None if before_step is ... else Boundary(before_step=before_step)
        return self._lease(
            AcknowledgeMessage, a, host, lease_id, message_id=message_id, state=state, boundary=boundary, detail=detail
        )

    def store(
        self,
        a,
        name: str = "shot.png",
        step: str = "open",
        sha256: str = "a" * 64,
        size: int = 10,
        max_task_bytes: int = 1 << 30,
        host=None,
        lease_id=None,
    ) -> kernel.Decision:
        """Record an artifact of attempt `a` (its bytes are assumed stored)."""
        return self._lease(
            StoreArtifact,
            a,
            host,
            lease_id,
            artifact_id=f"a{next(self._ids)}",
            step=step,
            name=name,
            content_type="image/png",
            size=size,
            sha256=sha256,
            max_task_bytes=max_task_bytes,
        )

    # -- sessions (Part D) ---------------------------------------------------------------

    def submit_session(self, idle_ms: int = 300_000, **fields) -> str:
        return self.submit(plan=Plan(steps=()), idle_ms=idle_ms, **fields)

    def act(self, task_id: str, action_id: str, action: str = "tap", tenant: str | None = "acme", **args):
        """Post an action (`args` default to a tap at 1, 2)."""
        step = Step(id=action_id, action=action, args=args or ({"x": 1, "y": 2} if action == "tap" else {}))
        return self.run(PostAction(now=0, task_id=task_id, tenant=tenant, step=step))

    def end(self, task_id: str, tenant: str | None = "acme") -> kernel.Decision:
        return self.run(EndSession(now=0, task_id=task_id, tenant=tenant))

    def poll(self, a, host=None, lease_id=None) -> kernel.Decision:
        return self._lease(PollAction, a, host, lease_id)

    def outcome(self, a, action_id: str, status: str = "completed", reason=None, host=None, lease_id=None, **more):
        outcome = StepOutcome(id=action_id, status=status, reason=reason, **more)
        return self._lease(ReportAction, a, host, lease_id, outcome=outcome)

    def action(self, task_id: str, action_id: str):
        return self.state.tasks[task_id].session.action(action_id)

    # -- reading -------------------------------------------------------------------------

    def task(self, task_id: str):
        return self.state.tasks[task_id]

    def device(self, host: str, serial: str):
        return self.state.hosts[host].device(serial)


def code(decision: kernel.Decision) -> Code | None:
    return None if decision.accepted else decision.rejection.code


def outcomes(*pairs: tuple[str, str]) -> tuple[StepOutcome, ...]:
    return tuple(StepOutcome(id=step_id, status=status) for step_id, status in pairs)
