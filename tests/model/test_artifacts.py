"""Part C in the kernel: artifact metadata, with the lease checks, names, steps and limits.

Each test drives `amc.core.kernel` through `World`, which checks every invariant (I12 among
them) after every command and that a rejection changes nothing; `restart()` rebuilds the
state from the log and from the records. The HTTP tests and the conformance scenarios
check the same ids over the wire, with the bytes.
"""

from __future__ import annotations

import pytest
from attrs import evolve

from amc.core.errors import Code
from amc.core.history import history_data, history_type
from amc.core.lifecycle import StepStatus, TaskStatus
from amc.core.records import Plan, Step, StepOutcome
from tests.model.world import LEASE_MS, World, code

req = pytest.mark.req


def running(w: World, host: str = "h1", plan: Plan | None = None):
    w.register(host, "d1")
    task_id = w.submit(plan=plan) if plan is not None else w.submit()
    a = w.claim(host)
    assert w.start(a).accepted
    return task_id, a


@req("ARTIFACT/s1", "ARTIFACT/s7")
def test_the_owning_host_records_an_artifact_and_the_history_shows_it():
    w = World()
    task_id, a = running(w)
    decision = w.store(a, name="shot.png", step="open", sha256="b" * 64, size=123)
    assert decision.accepted and decision.reply.created
    artifact = decision.reply.artifact
    assert (artifact.attempt, artifact.step, artifact.name, artifact.size, artifact.sha256) == (
        1,
        "open",
        "shot.png",
        123,
        "b" * 64,
    )
    assert artifact.created_at == w.now and w.task(task_id).artifacts == (artifact,)
    stored = w.log[-1]
    assert history_type(stored) == "artifact_stored"
    assert history_data(stored) == {
        "id": artifact.id,
        "step": "open",
        "name": "shot.png",
        "size": 123,
        "sha256": "b" * 64,
    }
    w.restart()
    assert w.task(task_id).artifacts == (artifact,)


@req("ARTIFACT/s2")
def test_the_same_name_with_the_same_bytes_is_the_same_artifact_and_other_bytes_conflict():
    w = World()
    task_id, a = running(w)
    first = w.store(a, name="log.txt").reply.artifact
    again = w.store(a, name="log.txt")
    assert again.accepted and not again.reply.created and again.reply.artifact == first and not again.events
    assert code(w.store(a, name="log.txt", sha256="c" * 64)) == Code.artifact_conflict
    assert code(w.store(a, name="log.txt", step="look")) == Code.artifact_conflict
    assert w.task(task_id).artifacts == (first,)


@req("ARTIFACT/s3")
def test_a_foreign_or_unknown_lease_never_adds_evidence():
    w = World()
    w.register("h2", "d2")
    task_id, a = running(w)
    assert code(w.store(a, host="h2")) == Code.lease_foreign
    assert code(w.store(a, lease_id="L-other")) == Code.lease_unknown
    assert w.task(task_id).artifacts == ()


@req("ARTIFACT/s3")
def test_a_stale_attempt_never_adds_evidence():
    w = World()
    task_id, first = running(w)
    w.advance(LEASE_MS)  # expired, requeued
    assert code(w.store(first)) == Code.lease_expired
    second = w.claim("h1")
    assert code(w.store(first)) == Code.lease_replaced
    assert w.start(second).accepted and w.report(second, "done").accepted
    assert code(w.store(second)) == Code.lease_ended
    assert w.task(task_id).artifacts == ()


@req("ARTIFACT/s4")
def test_a_step_outside_the_attempts_plan_is_refused_naming_it():
    w = World()
    task_id, a = running(w)
    refused = w.store(a, step="nowhere")
    assert code(refused) == Code.invalid_request and "'nowhere'" in refused.rejection.detail
    assert w.task(task_id).artifacts == ()


@req("ARTIFACT/s4")
def test_a_step_a_steer_inserted_may_carry_evidence_once_admitted():
    w = World()
    task_id, a = running(w, plan=Plan(steps=(Step(id="a", action="wait", args={"seconds": 1}),)))
    posted = w.post(
        task_id, "steer", data={"insert_after": "a", "steps": [{"id": "b", "action": "screenshot", "args": {}}]}
    )
    message_id = posted.reply.message_id
    assert code(w.store(a, step="b")) == Code.invalid_request  # not in the plan until admitted
    assert w.renew(a).accepted and w.ack(a, message_id, "admitted", before_step=None).accepted
    assert w.store(a, step="b").accepted


@req("ARTIFACT/s5")
def test_the_tasks_artifacts_together_stay_within_the_limit():
    w = World()
    task_id, a = running(w)
    assert w.store(a, name="one", size=60, max_task_bytes=100).accepted
    refused = w.store(a, name="two", size=41, max_task_bytes=100)
    assert code(refused) == Code.payload_too_large and "100 bytes" in refused.rejection.detail
    assert Code.payload_too_large.http_status == 413
    assert w.store(a, name="two", size=40, max_task_bytes=100).accepted  # exactly the limit
    assert [x.name for x in w.task(task_id).artifacts] == ["one", "two"]
    assert w.store(a, name="one", size=60, max_task_bytes=100).accepted  # a retry adds nothing


def test_an_unknown_task_or_attempt_is_not_found():
    w = World()
    _, a = running(w)
    assert code(w.store(evolve(a, task_id="nope"), host="h1")) == Code.not_found
    assert code(w.store(evolve(a, attempt=2), host="h1")) == Code.not_found


# -- retention: purging the artifacts of an ended task ---------------------------------------


@req("ARTIFACT-RETAIN/s2")
def test_a_purge_drops_every_artifact_of_an_ended_task_and_the_history_keeps_what_they_were():
    from amc.core.commands import PurgeArtifacts

    w = World()
    task_id, a = running(w)
    shot = w.store(a, name="shot.png", size=100).reply.artifact
    log = w.store(a, name="log.txt", sha256="c" * 64, size=20).reply.artifact
    refused = w.run(PurgeArtifacts(now=w.now, task_id=task_id))
    assert code(refused) == Code.invalid_request and "only an ended task" in refused.rejection.detail
    assert w.report(a, "done").accepted
    purged = w.run(PurgeArtifacts(now=w.now, task_id=task_id))
    assert purged.accepted and w.task(task_id).artifacts == ()
    assert history_type(w.log[-1]) == "artifacts_purged"
    assert history_data(w.log[-1]) == {"ids": [shot.id, log.id], "bytes": 120}
    again = w.run(PurgeArtifacts(now=w.now, task_id=task_id))
    assert again.accepted and not again.events  # nothing left to drop
    assert code(w.run(PurgeArtifacts(now=w.now, task_id="t_nope"))) == Code.not_found
    w.restart()
    assert w.task(task_id).artifacts == ()


def outcomes(open_ids: tuple[str, ...] = (), look_ids: tuple[str, ...] = ()) -> tuple[StepOutcome, ...]:
    """Both steps of `PLAN` completed, listing these artifacts."""
    return (
        StepOutcome(id="open", status=StepStatus.completed, artifacts=open_ids),
        StepOutcome(id="look", status=StepStatus.completed, artifacts=look_ids),
    )


@req("ARTIFACT/s9")
@pytest.mark.parametrize("release", [False, True], ids=["result", "release"])
def test_a_step_outcome_lists_only_its_own_attempts_artifacts_of_that_step(release):
    w = World()
    w.register("h2", "d2")
    task_id, first = running(w)
    mine = w.store(first, name="open.png", step="open").reply.artifact
    w.advance(LEASE_MS)  # expired: attempt 2 goes to h2
    second = w.claim("h2")
    assert second is not None and w.start(second).accepted
    other = w.store(second, name="open.png", step="open").reply.artifact
    looked = w.store(second, name="look.png", step="look").reply.artifact

    def send(steps):
        return w.release(second, steps=steps) if release else w.report(second, "done", steps=steps)

    for steps, named in (
        (outcomes(open_ids=(mine.id,)), mine.id),  # attempt 1's
        (outcomes(open_ids=(looked.id,)), looked.id),  # another step's
        (outcomes(look_ids=("a_nowhere",)), "a_nowhere"),  # no artifact at all
        (outcomes(open_ids=(other.id, other.id)), "twice"),
    ):
        refused = send(steps)
        assert code(refused) == Code.invalid_request and named in refused.rejection.detail, steps
    task = w.task(task_id)
    assert task.status == TaskStatus.dispatched and task.attempts[1].active
    assert send(outcomes(open_ids=(other.id,), look_ids=(looked.id,))).accepted
    recorded = w.task(task_id).attempts[1].steps if release else w.task(task_id).result.steps
    assert [o.artifacts for o in recorded] == [(other.id,), (looked.id,)]
    w.restart()
    assert (w.task(task_id).attempts[1].steps if release else w.task(task_id).result.steps) == recorded
