"""Artifacts (specs/protocol.md Part C): the evidence a step produced, as metadata.

The kernel never sees an artifact's bytes: the edge streams them into a blob store first
(durable under their sha256), then sends `StoreArtifact` with the digest and the size. The
kernel decides whether the attempt may add that evidence, and records it on the task:

- the task and the attempt exist (404), and the step is one of the attempt's plan as
  steered (400, naming the step);
- the lease checks of Part A (409 `lease_*`): a stale or foreign attempt never adds evidence;
- a name is unique within its attempt: the same name with the same sha256 is answered with
  the artifact already recorded (a retried upload), other bytes are 409 `artifact_conflict`;
- the task's artifacts together stay within the limit the command carries (413).

A refusal after the bytes were stored leaves an unreferenced blob, which the store's gc
removes; a record is only ever made for bytes that are already durable.

An operator may drop the artifacts of a task that ended (`PurgeArtifacts`, sent by `amc
store gc --older-than`): all of them at once, with an `artifacts_purged` event that keeps
what they were. The task reads as if it had stored none (a read of one is 404), and their
bytes, now unreferenced, go at the store's next gc. A task that has not ended keeps its
evidence: its host may still add to it.

A result's (or a release's) step outcomes list the ids of the artifacts each step
produced; `listing_problem` holds them to the truth: each id is an artifact the same
attempt stored for that same step, listed once (ARTIFACT/s9). The outcome need not list
every artifact of its step (an upload whose answer never came may still be recorded).
"""

from __future__ import annotations

from amc.core import steering
from amc.core.commands import PurgeArtifacts, StoreArtifact
from amc.core.decisions import ArtifactRecorded, Decision, check_live, check_ownership, find_attempt, reject
from amc.core.errors import Code
from amc.core.events import ArtifactsPurged, ArtifactStored
from amc.core.lifecycle import TERMINAL_STATUSES
from amc.core.records import Artifact, StepOutcome, Task, replace
from amc.core.state import State


def task_bytes(task: Task) -> int:
    """The bytes of the task's artifacts together (what the per-task limit counts)."""
    return sum(a.size for a in task.artifacts)


def find(task: Task, number: int, name: str) -> Artifact | None:
    """The artifact `name` of attempt `number`, if recorded."""
    for artifact in task.artifacts:
        if artifact.attempt == number and artifact.name == name:
            return artifact
    return None


def room(task: Task, number: int, name: str, max_task_bytes: int) -> int:
    """How many bytes artifact `name` of attempt `number` may hold under the per-task limit:
    what the task's artifacts leave, and the bytes of that artifact if it is recorded already
    (a retry of it does not count them twice). The edge bounds an upload's body by it before
    the bytes arrive; the kernel refuses a new artifact larger than it."""
    existing = find(task, number, name)
    return max_task_bytes - task_bytes(task) + (existing.size if existing is not None else 0)


def over_task_limit(task: Task, max_task_bytes: int) -> str:
    """The detail of a `payload_too_large` for the per-task limit."""
    return (
        f"the artifacts of task {task.id!r} may hold at most {max_task_bytes} bytes together"
        f" (--max-task-artifact-bytes); {task_bytes(task)} are stored"
    )


def by_id(task: Task, artifact_id: str) -> Artifact | None:
    for artifact in task.artifacts:
        if artifact.id == artifact_id:
            return artifact
    return None


def listing_problem(task: Task, number: int, steps: tuple[StepOutcome, ...]) -> str | None:
    """Why the artifact ids in attempt `number`'s step outcomes are not that attempt's
    evidence of those steps, or None."""
    if not any(outcome.artifacts for outcome in steps):
        return None
    steps_of = {a.id: a.step for a in task.artifacts if a.attempt == number}
    for i, outcome in enumerate(steps):
        for artifact_id in outcome.artifacts:
            step = steps_of.get(artifact_id)
            if step is None:
                return f"steps[{i}].artifacts: {artifact_id!r} is not an artifact of attempt {number}"
            if step != outcome.id:
                return f"steps[{i}].artifacts: {artifact_id!r} is an artifact of step {step!r}, not of {outcome.id!r}"
        if len(set(outcome.artifacts)) != len(outcome.artifacts):
            return f"steps[{i}].artifacts: step {outcome.id!r} lists an artifact twice"
    return None


# ---------------------------------------------------------------------------------------
# decide


def store(state: State, c: StoreArtifact) -> Decision:
    found = find_attempt(state, c)
    if isinstance(found, Decision):
        return found
    task, attempt = found
    refused = refusal(task, c)
    if refused is not None:
        return refused
    existing = find(task, attempt.number, c.name)
    if existing is not None:
        if existing.sha256 == c.sha256 and existing.step == c.step:
            return Decision(reply=ArtifactRecorded(task.id, existing, created=False))
        return reject(
            Code.artifact_conflict, f"attempt {attempt.number} already stored {c.name!r} with other bytes or step"
        )
    if by_id(task, c.artifact_id) is not None:
        return reject(Code.invalid_request, f"artifact id {c.artifact_id!r} is taken")
    if c.size > room(task, attempt.number, c.name, c.max_task_bytes):
        return reject(Code.payload_too_large, over_task_limit(task, c.max_task_bytes))
    artifact = Artifact(
        id=c.artifact_id,
        attempt=attempt.number,
        step=c.step,
        name=c.name,
        content_type=c.content_type,
        size=c.size,
        sha256=c.sha256,
        created_at=c.now,
    )
    return Decision(
        events=(ArtifactStored(at=c.now, task_id=task.id, artifact=artifact),),
        reply=ArtifactRecorded(task.id, artifact, created=True),
    )


def refusal(task: Task, c: StoreArtifact) -> Decision | None:
    """Why attempt `c.attempt` (which exists) may not add evidence for `c.step` now, or None:
    the step is not in its plan as steered (400), or a lease check fails (409). The edge
    asks this of the task it read before it takes an upload's bytes, so that a stale host
    is refused without sending them; the kernel asks again when the command runs."""
    attempt = task.attempts[c.attempt - 1]
    if task.session is not None:  # Part D: the step is an action the attempt was given
        if c.step not in {a.id for a in task.session.actions if a.attempt == attempt.number}:
            return reject(
                Code.invalid_request, f"step: {c.step!r} is not an action delivered to attempt {attempt.number}"
            )
    elif c.step not in steering.planned_step_ids(task, attempt.number):  # the plan as steered
        return reject(Code.invalid_request, f"step: {c.step!r} is not a step of attempt {attempt.number}'s plan")
    return check_ownership(task, attempt, c) or check_live(attempt, c.now)


def purge(state: State, c: PurgeArtifacts) -> Decision:
    """Drop every artifact of an ended task; nothing to do when it has none."""
    task = state.tasks.get(c.task_id)
    if task is None:
        return reject(Code.not_found, f"no task {c.task_id!r}")
    if task.status not in TERMINAL_STATUSES:
        return reject(Code.invalid_request, f"task {task.id!r} is {task.status}: only an ended task's artifacts go")
    if not task.artifacts:
        return Decision()
    return Decision(events=(ArtifactsPurged(at=c.now, task_id=task.id, artifacts=task.artifacts),))


# ---------------------------------------------------------------------------------------
# apply


def apply_stored(state: State, e: ArtifactStored) -> None:
    task = state.tasks[e.task_id]
    state.put_task(replace(task, artifacts=task.artifacts + (e.artifact,), updated_at=e.at))


def apply_purged(state: State, e: ArtifactsPurged) -> None:
    state.put_task(replace(state.tasks[e.task_id], artifacts=(), updated_at=e.at))
