"""A random but plausible stream of commands, chosen from what a reference state holds.

`next_command(rng, state)` looks at the state (usually a `MemoryService`'s) to pick task
ids, attempts and leases that mostly exist, with a share of wrong ones, so that every
command and most rejections and every event type come up in a few hundred steps.
"""

from __future__ import annotations

import random

from amc.core.commands import (
    AcknowledgeMessage,
    CancelTask,
    ClaimTask,
    Command,
    PostMessage,
    PurgeArtifacts,
    RegisterHost,
    ReleaseAttempt,
    RenewLease,
    ReportResult,
    StartAttempt,
    StoreArtifact,
    SubmitTask,
)
from amc.core.records import Boundary, DeviceSpec, Plan, Requirements, Stage, Step, StepOutcome, Task
from amc.core.state import State
from amc.core.steering import attempt_outline, planned_step_ids

TENANTS = ("acme", "beta", "gamma")
HOSTS = ("h1", "h2", "h3")
SERIALS = ("s1", "s2", "s3", "s4")
MODELS = ("pixel", "galaxy")

PLANS = (
    Plan(steps=(Step(id="open", action="launch", args={"package": "com.android.settings"}),)),
    Plan(steps=(Step(id="a", action="tap", args={"x": 1, "y": 2}), Step(id="b", action="wait", args={"seconds": 0.5}))),
    Plan(
        stages=(
            Stage(id="one", steps=(Step(id="s", action="screenshot"),)),
            Stage(id="two", steps=(Step(id="t", action="text", args={"text": "héllo"}),)),
        )
    ),
)
REQUIREMENTS = (
    Requirements(),
    Requirements(attributes={"model": "pixel"}),
    Requirements(serial="s2"),
    Requirements(attributes={"model": "galaxy"}),
)


class Workload:
    """Generates commands; remembers nothing but a counter for fresh ids."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        # Artifacts draw from their own generator, so the other commands of a seed stay
        # what they were before artifacts existed. Its seed decides which steps an upload
        # takes; with this one, seeds 1 and 2 of test_service still produce every event type.
        self.evidence = random.Random(seed + 2)
        self.purges = random.Random(seed + 3)
        self.counter = 0

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def next_command(self, state: State) -> Command:
        rng = self.rng
        tasks = list(state.tasks.values())
        if tasks and self.evidence.random() < 0.06:
            upload = self.store_artifact(tasks)
            # Now and then an operator's `amc store gc --older-than` instead, from a stream
            # of its own: the other streams, and so the rest of the workload, stay as they were.
            ended = [t for t in tasks if t.artifacts and t.result is not None]
            if ended and self.purges.random() < 0.2:
                return PurgeArtifacts(now=0, task_id=self.purges.choice(ended).id)
            return upload
        roll = rng.random()
        if roll < 0.22 or not tasks:
            return self.submit()
        if roll < 0.28 or not state.hosts:
            return self.register()
        if roll < 0.42:
            devices = None if rng.random() < 0.8 else tuple(rng.sample(SERIALS, 2))
            return ClaimTask(
                now=0,
                host_id=rng.choice(HOSTS),
                lease_id=self.fresh("L"),
                lease_ms=rng.choice((1000, 4000, 9000)),
                devices=devices,
            )
        active = [t for t in tasks if t.active_attempt is not None]
        if roll < 0.50:
            task = rng.choice(active if active and rng.random() < 0.5 else tasks)
            tenant = rng.choice((task.tenant, task.tenant, None, "nobody"))
            return CancelTask(now=0, task_id=task.id, tenant=tenant, reason=rng.choice((None, "user asked")))
        if roll < 0.58:
            return self.post(rng.choice(active if active and rng.random() < 0.7 else tasks))
        with_attempts = [t for t in tasks if t.attempts] or tasks
        task = rng.choice(active if active and rng.random() < 0.75 else with_attempts)
        attempt = task.current
        number = attempt.number if attempt else 1
        if rng.random() < 0.15 and task.attempts:
            number = rng.randint(1, len(task.attempts) + 1)
        host_id = attempt.host_id if attempt and rng.random() < 0.9 else rng.choice(HOSTS)
        lease_id = attempt.lease_id if attempt and rng.random() < 0.9 else "L-wrong"
        common = dict(now=0, host_id=host_id, task_id=task.id, attempt=number, lease_id=lease_id)
        if roll < 0.64:
            return self.acknowledge(task, common)
        if roll < 0.72:
            return StartAttempt(**common)
        if roll < 0.85:
            return RenewLease(**common)
        if roll < 0.87:
            reason = rng.choice((None, "host_stopping", "device_lost"))
            return ReleaseAttempt(**common, reason=reason, steps=self.steps(task, number))
        status = rng.choice(("done", "done", "failed", "cancelled"))
        return ReportResult(
            **common,
            status=status,
            metadata={"exit": rng.randint(0, 2), "notes": ["a", {"b": None}]},
            steps=self.steps(task, number),
        )

    def steps(self, task: Task, number: int) -> tuple[StepOutcome, ...] | None:
        """Half the time none; else every step of the attempt's plan completed, but those a
        correction removed."""
        if self.rng.random() >= 0.5:
            return None
        return tuple(
            StepOutcome(id=e.step.id, status="not_started", reason="steered")
            if e.removed_by
            else StepOutcome(id=e.step.id, status="completed", started_at=1, ended_at=2, output="ok")
            for e in attempt_outline(task, number)
        )

    def store_artifact(self, tasks: list[Task]) -> StoreArtifact:
        """Evidence of a planned step (sometimes not), mostly by the current attempt's host,
        under a few names and two contents, so that repeats, conflicts, stale leases and the
        task's limit come up too."""
        rng = self.evidence
        active = [t for t in tasks if t.active_attempt is not None]
        task = rng.choice(active if active and rng.random() < 0.8 else [t for t in tasks if t.attempts] or tasks)
        attempt = task.current
        number = attempt.number if attempt else 1
        steps = planned_step_ids(task, number if attempt else None)
        return StoreArtifact(
            now=0,
            host_id=attempt.host_id if attempt and rng.random() < 0.9 else rng.choice(HOSTS),
            task_id=task.id,
            attempt=number,
            lease_id=attempt.lease_id if attempt and rng.random() < 0.95 else "L-wrong",
            artifact_id=self.fresh("a"),
            step=rng.choice(steps) if steps and rng.random() < 0.9 else "nowhere",
            name=rng.choice(("screen.png", "ui.xml", "log.txt")),
            content_type=rng.choice(("image/png", "text/plain")),
            size=rng.choice((10, 2_000)),
            sha256=rng.choice("ab") * 64,
            max_task_bytes=4_100,
        )

    def submit(self) -> SubmitTask:
        rng = self.rng
        key = None if rng.random() < 0.7 else f"k{rng.randint(1, 6)}"
        return SubmitTask(
            now=0,
            task_id=self.fresh("t"),
            tenant=rng.choice(TENANTS),
            plan=rng.choice(PLANS) if key is None else PLANS[0],
            requirements=rng.choice(REQUIREMENTS),
            priority=rng.choice((-1, 0, 0, 1, 5)),
            max_attempts=rng.choice((1, 2, 3)),
            labels={} if rng.random() < 0.5 else {"team": rng.choice(("x", "y"))},
            idempotency_key=key,
        )

    def post(self, task: Task) -> PostMessage:
        rng = self.rng
        intent = rng.choice(("steer", "steer", "follow_up", "pause", "resume"))
        step_ids = [s.id for s in task.plan.all_steps()]
        text, data = rng.choice((None, "look again")), None
        new = [{"id": self.fresh("n"), "action": "screenshot", "args": {}}]
        if intent == "steer":
            data = rng.choice(
                (
                    {"skip": [rng.choice(step_ids)]} if step_ids else None,  # a successor asked in words
                    {"insert_after": rng.choice([None, *step_ids]), "steps": new},
                    {"replace_remaining": new},
                    None,
                )
            )
            text = text if data else "look again"
        elif intent == "follow_up" and rng.random() < 0.5:
            data = {"steps": new}
        return PostMessage(
            now=0,
            task_id=task.id,
            tenant=rng.choice((task.tenant, None)),
            message_id=self.fresh("m"),
            intent=intent,
            text=text,
            data=data,
        )

    def acknowledge(self, task: Task, common: dict) -> AcknowledgeMessage:
        rng = self.rng
        delivered = [m for m in task.messages if m.state in ("delivered", "admitted")]
        message_id = rng.choice(delivered).id if delivered else rng.choice([m.id for m in task.messages] or ["m-none"])
        state = rng.choice(("admitted", "admitted", "completed", "rejected"))
        outline = planned_step_ids(task, common["attempt"]) if task.attempts else []
        boundary = Boundary(before_step=rng.choice([None, *outline])) if state == "admitted" else None
        return AcknowledgeMessage(
            **common,
            message_id=message_id,
            state=state,
            boundary=boundary,
            detail="could not" if state == "rejected" else None,
        )

    def register(self) -> RegisterHost:
        rng = self.rng
        serials = rng.sample(SERIALS, rng.randint(0, 3))
        devices = tuple(DeviceSpec(serial=s, attributes={"model": rng.choice(MODELS)}) for s in sorted(serials))
        return RegisterHost(now=0, host_id=rng.choice(HOSTS), devices=devices)
