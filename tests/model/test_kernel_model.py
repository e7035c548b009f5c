"""The kernel under a Hypothesis stateful model.

Several hosts, devices and tenants; a clock that jumps, sometimes exactly onto a lease's
expiry; duplicate and stale requests (old leases stay in the bundle after they are
replaced); restarts that rebuild the state from the event log and from the records.
After every step: every invariant of DESIGN.md, and that a rejection changed nothing.

The claim order is checked against a brute-force reference (the "trivially correct
model" of the queue): the best queued task any free device matches, by priority then age.
"""

from __future__ import annotations

import itertools

from hypothesis import event, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, multiple, precondition, rule

from amc.core import invariants, kernel
from amc.core.commands import (
    CancelTask,
    ClaimTask,
    ExpireLeases,
    RegisterHost,
    RenewLease,
    ReportResult,
    StartAttempt,
    SubmitTask,
)
from amc.core.errors import Code
from amc.core.events import CancellationRequested, TaskAssigned
from amc.core.records import DeviceSpec, Plan, Requirements, Step, StepOutcome
from amc.core.state import State

HOSTS = {"h1": ("a1", "a2"), "h2": ("b1",), "h3": ("c1",)}
TENANTS = ("acme", "globex")
MODELS = ("P7", "P8")
PLANS = (
    Plan(steps=(Step(id="s1", action="wait", args={"seconds": 1}),)),
    Plan(steps=(Step(id="s1", action="tap", args={"x": 1, "y": 2}), Step(id="s2", action="screenshot"))),
)
REQUIREMENTS = (
    Requirements(),
    Requirements(attributes={"model": "P7"}),
    Requirements(attributes={"model": "P8"}),
    Requirements(serial="a2"),
    Requirements(serial="c1", attributes={"model": "P7"}),
    Requirements(attributes={"model": "nothing has this"}),
)
LEASE_MS = (4_000, 20_000)


class KernelModel(RuleBasedStateMachine):
    tasks = Bundle("tasks")
    leases = Bundle("leases")  # (task_id, attempt, host_id, lease_id); stale ones stay

    def __init__(self):
        super().__init__()
        self.state = State()
        self.log: list = []
        self.now = 1_000_000
        self.ids = itertools.count()

    # -- helpers ---------------------------------------------------------------------------

    def run(self, command) -> kernel.Decision:
        """Execute at the current time; a rejection must change nothing."""
        self.log.extend(kernel.execute(self.state, ExpireLeases(now=self.now)).events)
        before = self.state.records_copy()
        decision = kernel.execute(self.state, command)
        note(f"{command!r}\n  -> {decision.rejection or decision.reply}")
        event(f"{type(command).__name__}: {decision.rejection.code.name if decision.rejection else type(decision.reply).__name__}")
        self.log.extend(decision.events)
        if not decision.accepted:
            assert decision.events == ()
            assert self.state == before, f"rejected {command} but the state changed"
        found = invariants.violations(self.state, before, self.now)
        assert not found, found
        return decision

    def fresh(self, prefix: str) -> str:
        return f"{prefix}{next(self.ids)}"

    # -- rules -----------------------------------------------------------------------------

    @initialize()
    def register_everyone(self):
        for host_id, serials in HOSTS.items():
            devices = tuple(DeviceSpec(serial=s, attributes={"model": MODELS[i % 2]}) for i, s in enumerate(serials))
            self.run(RegisterHost(now=self.now, host_id=host_id, devices=devices))

    @rule(
        target=tasks,
        tenant=st.sampled_from(TENANTS),
        plan=st.sampled_from(PLANS),
        requirements=st.sampled_from(REQUIREMENTS),
        priority=st.sampled_from((-1, 0, 0, 5)),
        max_attempts=st.integers(1, 3),
        key=st.sampled_from((None, None, None, None, "k1", "k2")),
    )
    def submit(self, tenant, plan, requirements, priority, max_attempts, key):
        existing = self.state.idempotency.get((tenant, key)) if key else None
        decision = self.run(
            SubmitTask(
                now=self.now, task_id=self.fresh("t"), tenant=tenant, plan=plan, requirements=requirements,
                priority=priority, max_attempts=max_attempts, idempotency_key=key,
            )
        )
        if existing is not None:
            same = kernel._same_submission(
                self.state.tasks[existing],
                SubmitTask(now=0, task_id="", tenant=tenant, plan=plan, requirements=requirements,
                           priority=priority, max_attempts=max_attempts),
            )
            if same:
                assert decision.reply == kernel.Submitted(existing, created=False)
            else:
                assert decision.rejection.code is Code.idempotency_conflict
            return existing
        assert decision.reply.created
        return decision.reply.task_id

    @rule(host=st.sampled_from(sorted(HOSTS)), data=st.data())
    def register(self, host, data):
        serials = data.draw(st.lists(st.sampled_from(HOSTS[host]), unique=True))
        model = data.draw(st.sampled_from(MODELS))
        self.run(RegisterHost(
            now=self.now, host_id=host,
            devices=tuple(DeviceSpec(serial=s, attributes={"model": model}) for s in serials),
        ))

    @rule(
        target=leases,
        host=st.sampled_from(sorted(HOSTS) + ["stranger"]),
        lease_ms=st.sampled_from(LEASE_MS),
        only=st.sampled_from((None, None, ("a2",), ("b1", "c1"))),
    )
    def claim(self, host, lease_ms, only):
        self.run(ExpireLeases(now=self.now))
        expected = reference_claim(self.state, host, only)
        decision = self.run(ClaimTask(now=self.now, host_id=host, lease_id=self.fresh("L"), lease_ms=lease_ms, devices=only))
        reply = decision.reply
        if expected is None:
            assert isinstance(reply, kernel.NoAssignment)
            return multiple()
        assert (reply.task_id, reply.device) == expected, "claim order differs from the reference"
        assert self.state.tasks[reply.task_id].status == "assigned"
        return (reply.task_id, reply.attempt, host, reply.lease_id)

    @rule(lease=leases, tamper=st.sampled_from(("none", "none", "host", "lease_id")))
    def start(self, lease, tamper):
        self._lease_command(StartAttempt, lease, tamper)

    @rule(lease=leases, tamper=st.sampled_from(("none", "none", "host", "lease_id")))
    def renew(self, lease, tamper):
        task_id, number, _, _ = lease
        live = self._is_live(lease)
        decision = self._lease_command(RenewLease, lease, tamper)
        if tamper == "none":
            assert decision.accepted == live, "a renewal must succeed exactly while the lease is live"
            if decision.accepted:
                assert decision.reply.cancel_requested == self.state.tasks[task_id].cancellation_pending

    @rule(
        lease=leases,
        status=st.sampled_from(("done", "failed", "cancelled")),
        tamper=st.sampled_from(("none", "none", "none", "host", "lease_id")),
        with_steps=st.booleans(),
    )
    def report(self, lease, status, tamper, with_steps):
        task_id = lease[0]
        steps = None
        if with_steps:
            planned = self.state.tasks[task_id].plan.all_steps()
            steps = tuple(StepOutcome(id=s.id, status="completed" if status == "done" else "not_started") for s in planned)
        before = self.state.tasks[task_id]
        decision = self._lease_command(ReportResult, lease, tamper, status=status, steps=steps)
        if decision.accepted and not decision.reply.repeated:
            assert before.active_attempt is not None and before.active_attempt.number == lease[1]
            assert self.state.tasks[task_id].status == status

    def _lease_command(self, command_type, lease, tamper, **fields) -> kernel.Decision:
        task_id, number, host, lease_id = lease
        if tamper == "host":
            host = next(h for h in HOSTS if h != host)
        elif tamper == "lease_id":
            lease_id = "forged"
        return self.run(command_type(now=self.now, host_id=host, task_id=task_id, attempt=number, lease_id=lease_id, **fields))

    def _is_live(self, lease) -> bool:
        self.run(ExpireLeases(now=self.now))
        task = self.state.tasks[lease[0]]
        active = task.active_attempt
        return active is not None and active.number == lease[1] and self.now < active.lease_expires_at

    @rule(task_id=tasks, who=st.sampled_from(("own", "own", "other", "admin")))
    def cancel(self, task_id, who):
        self.run(ExpireLeases(now=self.now))
        task = self.state.tasks[task_id]
        tenant = {"own": task.tenant, "admin": None, "other": next(t for t in TENANTS if t != task.tenant)}[who]
        requests_before = sum(isinstance(e, CancellationRequested) and e.task_id == task_id for e in self.log)
        decision = self.run(CancelTask(now=self.now, task_id=task_id, tenant=tenant))
        after = self.state.tasks[task_id]
        if who == "other":
            assert decision.rejection.code is Code.not_found
        elif task.status in ("done", "failed"):
            assert decision.rejection.code is Code.task_terminal
        elif task.status == "queued":
            assert after.status == "cancelled" and after.attempts == task.attempts
        else:
            assert after.cancellation_pending or task.status == "cancelled"
        requests_after = sum(isinstance(e, CancellationRequested) and e.task_id == task_id for e in self.log)
        assert requests_after <= 1, "a cancellation was requested twice"
        assert requests_after - requests_before <= 1

    @rule(step=st.sampled_from((1, 500, 1_000, 3_999, 10_000)))
    def tick(self, step):
        self.now += step
        self.run(ExpireLeases(now=self.now))

    @precondition(lambda self: self.state.leases.next_expiry() is not None)
    @rule(offset=st.sampled_from((-1, 0, 0)))
    def jump_to_next_expiry(self, offset):
        """Land exactly on (or one millisecond before) the earliest lease expiry."""
        self.now = max(self.now, self.state.leases.next_expiry() + offset)
        self.run(ExpireLeases(now=self.now))

    @rule()
    def restart(self):
        replayed = kernel.replay(self.log)
        assert replayed == self.state, "replaying the log does not rebuild the state"
        rebuilt = State.from_records(self.state.tasks.values(), self.state.hosts.values())
        assert rebuilt == self.state
        self.state = rebuilt if len(self.log) % 2 else replayed  # keep going on a rebuilt index

    # -- invariants ------------------------------------------------------------------------

    @invariant()
    def queued_cancel_never_gets_an_attempt(self):
        cancelled_while_queued: set[str] = set()
        for logged in self.log:
            if isinstance(logged, CancellationRequested) and logged.attempt is None:
                cancelled_while_queued.add(logged.task_id)
            elif isinstance(logged, TaskAssigned):
                assert logged.task_id not in cancelled_while_queued, f"{logged.task_id} assigned after a queued cancel"

    @invariant()
    def indexes_agree_with_records(self):
        queued = {t.id for t in self.state.tasks.values() if t.status == "queued"}
        assert len(self.state.queue) >= len(queued)
        actives = list(self.state.active_tasks())
        if actives:
            earliest = min(t.active_attempt.lease_expires_at for t in actives)
            assert self.state.leases.next_expiry() == earliest


def reference_claim(state: State, host_id: str, only) -> tuple[str, str] | None:
    """Brute force: the best queued task a free device matches, and its first such device."""
    host = state.hosts.get(host_id)
    if host is None:
        return None
    free = [d for d in host.devices if d.online and d.reservation is None and (only is None or d.serial in only)]
    best = None
    for task in state.tasks.values():
        if task.status != "queued":
            continue
        devices = [d for d in free if task.requirements.matches(d.serial, d.attributes)]
        if devices and (best is None or (-task.priority, task.seq) < (-best[0].priority, best[0].seq)):
            best = (task, devices[0].serial)
    return None if best is None else (best[0].id, best[1])


KernelModel.TestCase.settings = settings(max_examples=200, stateful_step_count=60, deadline=None)
test_kernel_model = KernelModel.TestCase
