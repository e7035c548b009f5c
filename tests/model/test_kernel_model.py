"""The kernel under a Hypothesis stateful model.

Several hosts, devices and tenants; a clock that jumps, sometimes exactly onto a lease's
expiry; duplicate and stale requests (old leases stay in the bundle after they are
replaced); restarts that rebuild the state from the event log and from the records.
After every step: every invariant of specs/design.md, and that a rejection changed nothing.

The claim order is checked against a brute-force reference (the "trivially correct
model" of the queue): the best claimable task any free device matches, by priority then age.

Part B rides along: messages of every intent to tasks in every status, acknowledgements
with right and wrong boundaries and states, redelivery by every renewal. Beyond the
invariants, the model checks that a pause holds exactly from its admission to a resume's
(against a reference computed from the log), that a renewal carries each unacknowledged
message once, and that every follow-up of a done task went into a successor.
"""

from __future__ import annotations

import itertools

from hypothesis import event, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, multiple, precondition, rule

from amc.core import invariants, kernel, steering
from amc.core.commands import (
    AcknowledgeMessage,
    CancelTask,
    ClaimTask,
    ExpireLeases,
    PostMessage,
    RegisterHost,
    ReleaseAttempt,
    RenewLease,
    ReportResult,
    StartAttempt,
    SubmitTask,
)
from amc.core.errors import Code
from amc.core.events import CancellationRequested, MessageAcknowledged, MessageApplied, TaskAssigned
from amc.core.history import history_data, history_type
from amc.core.records import Boundary, DeviceSpec, Plan, Requirements, Step, StepOutcome
from amc.core.state import State

HOSTS = {"h1": ("a1", "a2"), "h2": ("b1",), "h3": ("c1",)}
TENANTS = ("acme", "globex")
MODELS = ("P7", "P8")
PLANS = (
    Plan(steps=(Step(id="s1", action="wait", args={"seconds": 1}),)),
    Plan(steps=(Step(id="s1", action="tap", args={"x": 1, "y": 2}), Step(id="s2", action="screenshot"))),
    Plan(steps=tuple(Step(id=f"s{i}", action="wait", args={"seconds": 1}) for i in range(1, 5))),
)
NEW_STEPS = [{"id": "n1", "action": "screenshot", "args": {}}]
MESSAGES = (
    ("steer", None, {"skip": ["s2"]}),
    ("steer", None, {"skip": ["s1", "s3"]}),
    ("steer", None, {"insert_after": "s1", "steps": NEW_STEPS}),
    ("steer", None, {"insert_after": None, "steps": NEW_STEPS}),
    ("steer", None, {"replace_remaining": NEW_STEPS}),
    ("steer", "slow down", None),
    ("follow_up", "then this", None),
    ("follow_up", None, {"steps": NEW_STEPS}),
    ("pause", None, None),
    ("resume", None, None),
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
        self.state.open_journal()
        decision = kernel.execute(self.state, command)
        journal_wrong = journal_problems(before, self.state, self.state.close_journal())
        assert not journal_wrong, f"after {command!r}: {journal_wrong}"
        note(f"{command!r}\n  -> {decision.rejection or decision.reply}")
        event(
            f"{type(command).__name__}: {decision.rejection.code.name if decision.rejection else type(decision.reply).__name__}"
        )
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
                now=self.now,
                task_id=self.fresh("t"),
                tenant=tenant,
                plan=plan,
                requirements=requirements,
                priority=priority,
                max_attempts=max_attempts,
                idempotency_key=key,
            )
        )
        if existing is not None:
            same = kernel._same_submission(
                self.state.tasks[existing],
                SubmitTask(
                    now=0,
                    task_id="",
                    tenant=tenant,
                    plan=plan,
                    requirements=requirements,
                    priority=priority,
                    max_attempts=max_attempts,
                ),
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
        self.run(
            RegisterHost(
                now=self.now,
                host_id=host,
                devices=tuple(DeviceSpec(serial=s, attributes={"model": model}) for s in serials),
            )
        )

    @rule(
        target=leases,
        host=st.sampled_from(sorted(HOSTS) + ["stranger"]),
        lease_ms=st.sampled_from(LEASE_MS),
        only=st.sampled_from((None, None, ("a2",), ("b1", "c1"))),
    )
    def claim(self, host, lease_ms, only):
        self.run(ExpireLeases(now=self.now))
        expected = reference_claim(self.state, host, only)
        decision = self.run(
            ClaimTask(now=self.now, host_id=host, lease_id=self.fresh("L"), lease_ms=lease_ms, devices=only)
        )
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
                task = self.state.tasks[task_id]
                assert decision.reply.cancel_requested == task.cancellation_pending
                carried = [m.id for m in decision.reply.messages]
                unacknowledged = [m.id for m in task.messages if m.state == "delivered" and m.attempt == number]
                assert carried == unacknowledged, "a renewal must carry each unacknowledged message once"

    @rule(task_id=tasks, message=st.sampled_from(MESSAGES), who=st.sampled_from(("own", "own", "admin", "other")))
    def post(self, task_id, message, who):
        intent, text, data = message
        self.run(ExpireLeases(now=self.now))
        task = self.state.tasks[task_id]
        tenant = {"own": task.tenant, "admin": None, "other": next(t for t in TENANTS if t != task.tenant)}[who]
        decision = self.run(
            PostMessage(
                now=self.now,
                task_id=task_id,
                tenant=tenant,
                message_id=self.fresh("m"),
                intent=intent,
                text=text,
                data=data,
            )
        )
        edit = steering.parse_edit(data) if intent == "steer" else None
        if who == "other":
            assert decision.rejection.code is Code.not_found
        elif edit is not None and steering.unknown_step(edit, steering.known_step_ids(task)) is not None:
            assert decision.rejection.code is Code.invalid_request  # a bad body (400) before the rules (409)
        elif task.status in ("failed", "cancelled") or (task.status == "done" and intent != "follow_up"):
            assert decision.rejection.code is Code.task_terminal
        elif decision.accepted and task.status == "done":
            assert decision.reply.successor_id in self.state.tasks

    @rule(lease=leases, pick=st.integers(0, 5), boundary_pick=st.integers(0, 6), admit=st.booleans())
    def renew_and_apply(self, lease, pick, boundary_pick, admit):
        """What a Host Agent does: renew, then acknowledge a message the renewal carried."""
        decision = self._lease_command(RenewLease, lease, "none")
        if decision.accepted and decision.reply.messages:
            carried = decision.reply.messages[pick % len(decision.reply.messages)]
            self.acknowledge(
                lease,
                pick=0,
                state="admitted" if admit else "rejected",
                boundary_pick=boundary_pick,
                tamper="none",
                message_id=carried.id,
            )

    @rule(
        lease=leases,
        pick=st.integers(0, 5),
        state=st.sampled_from(("admitted", "admitted", "completed", "rejected")),
        boundary_pick=st.integers(0, 6),
        tamper=st.sampled_from(("none", "none", "none", "host")),
    )
    def acknowledge(self, lease, pick, state, boundary_pick, tamper, message_id=None):
        task = self.state.tasks[lease[0]]
        given = [m for m in task.messages if m.attempt == lease[1]]  # mostly what this attempt was given
        candidates = given if given and pick < 4 else task.messages
        if not candidates:
            return
        message = task.message(message_id) if message_id else candidates[pick % len(candidates)]
        planned = [None, *steering.planned_step_ids(task, lease[1])]
        boundary = Boundary(before_step=planned[boundary_pick % len(planned)]) if state == "admitted" else None
        self._lease_command(
            AcknowledgeMessage,
            lease,
            tamper,
            message_id=message.id,
            state=state,
            boundary=boundary,
            detail="cannot" if state == "rejected" else None,
        )

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
            outline = steering.attempt_outline(self.state.tasks[task_id], lease[1])
            steps = tuple(
                StepOutcome(id=e.step.id, status="not_started", reason="steered")
                if e.removed_by
                else StepOutcome(id=e.step.id, status="completed" if status == "done" else "not_started")
                for e in outline
            )
        before = self.state.tasks[task_id]
        decision = self._lease_command(ReportResult, lease, tamper, status=status, steps=steps)
        if decision.accepted and not decision.reply.repeated:
            assert before.active_attempt is not None and before.active_attempt.number == lease[1]
            assert self.state.tasks[task_id].status == status

    @rule(
        lease=leases,
        reason=st.sampled_from((None, "host_stopping", "device_lost")),
        tamper=st.sampled_from(("none", "none", "none", "host", "lease_id")),
        with_steps=st.booleans(),
    )
    def release(self, lease, reason, tamper, with_steps):
        """Give the attempt back: the task goes on as after an expiry, at once; a repeat of
        the recorded release is answered as such, any other release of it conflicts."""
        task_id, number = lease[0], lease[1]
        steps = None
        if with_steps:
            outline = steering.attempt_outline(self.state.tasks[task_id], number)
            steps = tuple(
                StepOutcome(id=e.step.id, status="not_started", reason="steered" if e.removed_by else "host_stopping")
                for e in outline
            )
        self.run(ExpireLeases(now=self.now))
        before = self.state.tasks[task_id]
        attempt = before.attempts[number - 1]
        decision = self._lease_command(ReleaseAttempt, lease, tamper, reason=reason, steps=steps)
        if not decision.accepted:
            if tamper == "none" and attempt.outcome == "released":
                assert decision.rejection.code == Code.result_conflict
            return
        after = self.state.tasks[task_id]
        if decision.reply.repeated:
            assert (attempt.outcome, attempt.release_reason, attempt.steps) == ("released", reason, steps)
            assert after == before
            return
        assert before.active_attempt is not None and before.active_attempt.number == number
        ended = after.attempts[number - 1]
        assert (ended.outcome, ended.ended_at, ended.steps, ended.release_reason) == (
            "released",
            self.now,
            steps,
            reason,
        )
        if before.cancellation_pending:
            assert (after.status, after.result.reason) == ("cancelled", "released_with_cancellation")
        elif before.attempts_left:
            assert after.status == "queued"
        else:
            assert (after.status, after.result.reason) == ("failed", "attempts_exhausted")

    def _lease_command(self, command_type, lease, tamper, **fields) -> kernel.Decision:
        task_id, number, host, lease_id = lease
        if tamper == "host":
            host = next(h for h in HOSTS if h != host)
        elif tamper == "lease_id":
            lease_id = "forged"
        return self.run(
            command_type(now=self.now, host_id=host, task_id=task_id, attempt=number, lease_id=lease_id, **fields)
        )

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

    @rule(tenant=st.sampled_from((*TENANTS, None)))
    def read_everything(self, tenant):
        """STATUS-READ: what a status question computes (visibility, each attempt's plan and
        progress, the history) changes nothing."""
        before, logged = self.state.records_copy(), len(self.log)
        for task_id in list(self.state.tasks):
            task = kernel.visible_task(self.state, task_id, tenant)
            for number in range(1, len(task.attempts) + 2) if task else ():
                steering.attempt_progress(task, number)
                steering.attempt_plan(task, number)
        for logged_event in self.log:
            if history_type(logged_event):
                history_data(logged_event)
        assert self.state == before and len(self.log) == logged

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
    def a_pause_holds_from_its_admission_until_a_resume(self):
        """The reference: a task is paused iff the last pause or resume applied to it was a pause."""
        expected: dict[str, bool] = {}
        for logged in self.log:
            applied = isinstance(logged, MessageApplied) or (
                isinstance(logged, MessageAcknowledged) and logged.state == "admitted"
            )
            if applied:
                intent = self.state.tasks[logged.task_id].message(logged.message_id).intent
                if intent in ("pause", "resume"):
                    expected[logged.task_id] = intent == "pause"
        for task in self.state.tasks.values():
            assert task.paused == expected.get(task.id, False), f"{task.id} paused={task.paused}"

    @invariant()
    def follow_ups_of_done_tasks_went_into_successors(self):
        for task in self.state.tasks.values():
            if task.status == "done":
                for m in task.messages:
                    if m.intent == "follow_up":
                        assert m.state == "admitted" and m.successor in self.state.tasks, m

    @invariant()
    def indexes_agree_with_records(self):
        queued = {t.id for t in self.state.tasks.values() if t.claimable}
        assert len(self.state.queue) >= len(queued)
        actives = list(self.state.active_tasks())
        if actives:
            earliest = min(t.active_attempt.lease_expires_at for t in actives)
            assert self.state.leases.next_expiry() == earliest


def journal_problems(before: State, after: State, journal) -> list[str]:
    """How the journal of a command fails to name exactly the records that the command
    replaced, each with the record before it (empty: it names exactly those).

    Records are immutable, so a record the command did not replace is the same object
    after it; one it replaced is a new object (equal to the old one only when the command
    changed nothing in it, as a second start in the same millisecond)."""
    problems = []
    for kind, old, new, named in (
        ("task", before.tasks, after.tasks, journal.tasks),
        ("host", before.hosts, after.hosts, journal.hosts),
    ):
        replaced = {key for key in new.keys() | old.keys() if old.get(key) is not new.get(key)}
        problems += [
            f"{kind} {key!r} changed but the journal does not name it" for key in sorted(replaced - named.keys())
        ]
        problems += [
            f"the journal names {kind} {key!r}, which was not replaced" for key in sorted(named.keys() - replaced)
        ]
        problems += [
            f"the journal's earlier {kind} {key!r} is not the record before the command"
            for key in sorted(named.keys() & replaced)
            if named[key] is not old.get(key)
        ]
    return problems


def reference_claim(state: State, host_id: str, only) -> tuple[str, str] | None:
    """Brute force: the best queued task a free device matches, and its first such device."""
    host = state.hosts.get(host_id)
    if host is None:
        return None
    free = [d for d in host.devices if d.online and d.reservation is None and (only is None or d.serial in only)]
    best = None
    for task in state.tasks.values():
        if task.status != "queued" or task.paused:
            continue
        devices = [d for d in free if task.requirements.matches(d.serial, d.attributes)]
        if devices and (best is None or (-task.priority, task.seq) < (-best[0].priority, best[0].seq)):
            best = (task, devices[0].serial)
    return None if best is None else (best[0].id, best[1])


KernelModel.TestCase.settings = settings(max_examples=200, stateful_step_count=60, deadline=None)
test_kernel_model = KernelModel.TestCase
