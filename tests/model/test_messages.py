"""Part B in the kernel: messages, steering, pause and follow-ups, scenario by scenario.

Each test drives `amc.core.kernel` through `World`, which checks every invariant after
every command and that a rejection changes nothing; `restart()` rebuilds the state from the
log and from the records. The server and the Host Agent have their own tests of the same ids.
"""

from __future__ import annotations

import pytest

from amc.core import steering
from amc.core.errors import Code
from amc.core.records import Boundary, Plan, Stage, Step, StepOutcome
from tests.model.world import LEASE_MS, World, code

req = pytest.mark.req


def plan(*ids: str) -> Plan:
    return Plan(steps=tuple(Step(id=i, action="tap", args={"x": 1, "y": 2}) for i in ids))


def step(i: str) -> dict:
    return {"id": i, "action": "screenshot", "args": {}}


def running(w: World, *ids: str, **fields):
    """A task with steps `ids`, assigned to h1 and started: its id and assignment."""
    w.register("h1", "d1")
    task_id = w.submit(plan=plan(*ids), **fields)
    a = w.claim("h1")
    assert w.start(a).accepted
    return task_id, a


def posted(decision) -> str:
    assert decision.accepted, decision.rejection
    return decision.reply.message_id


def result_steps(pairs: list[tuple[str, str, str | None]]) -> tuple[StepOutcome, ...]:
    return tuple(StepOutcome(id=i, status=s, reason=r) for i, s, r in pairs)


def message(w: World, task_id: str, message_id: str):
    return w.task(task_id).message(message_id)


# -- delivery -----------------------------------------------------------------------------


@req("DELIVERY/s1", "STEER/s1")
def test_a_steer_is_queued_then_delivered_then_admitted_then_completed():
    w = World()
    task_id, a = running(w, "a", "b", "c", "d")
    m = posted(w.post(task_id, "steer", data={"skip": ["d"]}))
    assert message(w, task_id, m).state == "queued" and message(w, task_id, m).delivered_at is None

    w.now += 1000
    grant = w.renew(a).reply
    assert [x.id for x in grant.messages] == [m] and grant.messages[0].state == "delivered"
    delivered = message(w, task_id, m)
    assert (delivered.state, delivered.delivered_at, delivered.admitted_at, delivered.attempt) == (
        "delivered",
        w.now,
        None,
        1,
    )

    w.now += 1000
    assert w.ack(a, m, "admitted", before_step="c").accepted
    admitted = message(w, task_id, m)
    assert (admitted.state, admitted.admitted_at, admitted.boundary) == ("admitted", w.now, Boundary(before_step="c"))
    w.now += 1000
    assert w.ack(a, m, "completed").accepted
    assert (message(w, task_id, m).state, message(w, task_id, m).completed_at) == ("completed", w.now)

    steps = result_steps(
        [("a", "completed", None), ("b", "completed", None), ("c", "completed", None), ("d", "not_started", "steered")]
    )
    assert w.report(a, "done", steps=steps).accepted


@req("DELIVERY/s2")
def test_a_message_is_carried_until_acknowledged_and_a_repeat_changes_nothing():
    w = World()
    task_id, a = running(w, "a", "b", "c")
    m = posted(w.post(task_id, "steer", data={"insert_after": "a", "steps": [step("a2")]}))
    first = w.renew(a).reply.messages
    again = w.renew(a).reply.messages  # the host did not acknowledge: carried again, same id
    assert [x.id for x in first] == [x.id for x in again] == [m]
    assert w.ack(a, m, "admitted", before_step="b").accepted
    assert w.renew(a).reply.messages == ()

    before = w.state.records_copy()
    repeat = w.ack(a, m, "admitted", before_step="b")
    assert repeat.accepted and repeat.reply.repeated and w.state == before
    assert w.ack(a, m, "completed").accepted
    assert code(w.ack(a, m, "admitted", before_step="b")) is Code.message_conflict
    assert code(w.ack(a, m, "rejected", detail="too late")) is Code.message_conflict


@req("DELIVERY/s3")
def test_queued_and_delivered_messages_survive_a_restart_and_are_carried_once_each():
    w = World()
    task_id, a = running(w, "a", "b", "c")
    m2 = posted(w.post(task_id, "steer", text="mind the dialog"))
    w.renew(a)
    m1 = posted(w.post(task_id, "steer", data={"skip": ["c"]}))
    before = w.task(task_id).messages
    w.restart()
    assert w.task(task_id).messages == before
    carried = w.renew(a).reply.messages
    assert [x.id for x in carried] == [m2, m1] and all(x.state == "delivered" for x in carried)


def test_a_message_skipping_admission_or_never_delivered_is_a_conflict():
    w = World()
    task_id, a = running(w, "a", "b")
    m = posted(w.post(task_id, "pause"))
    assert code(w.ack(a, m, "admitted", before_step="b")) is Code.message_conflict  # not delivered yet
    w.renew(a)
    assert code(w.ack(a, m, "completed")) is Code.message_conflict  # admitted comes first
    assert code(w.ack(a, m, "admitted")) is Code.invalid_request  # no boundary
    assert code(w.ack(a, m, "rejected")) is Code.invalid_request  # no detail
    assert code(w.ack(a, "nope", "admitted", before_step="b")) is Code.not_found


def test_acknowledgements_pass_the_lease_checks():
    w = World()
    w.register("h2", "e1")
    task_id, a = running(w, "a", "b")
    m = posted(w.post(task_id, "pause"))
    w.renew(a)
    assert code(w.ack(a, m, "admitted", before_step="b", host="h2")) is Code.lease_foreign
    assert code(w.ack(a, m, "admitted", before_step="b", lease_id="other")) is Code.lease_unknown
    w.now += LEASE_MS
    assert code(w.ack(a, m, "admitted", before_step="b")) is Code.lease_expired


# -- steering -----------------------------------------------------------------------------


@req("STEER/s2")
def test_a_steer_that_would_recall_a_started_step_cannot_be_admitted_only_rejected():
    w = World()
    task_id, a = running(w, "a", "b", "c")
    m = posted(w.post(task_id, "steer", data={"skip": ["b"]}))
    w.renew(a)
    refused = w.ack(a, m, "admitted", before_step="c")  # b is running: it started
    assert code(refused) is Code.message_conflict and "'b' had already started" in refused.rejection.detail
    pretend = result_steps([("a", "completed", None), ("b", "not_started", "steered"), ("c", "completed", None)])
    refused = w.report(a, "done", steps=pretend)  # b was never removed
    assert code(refused) is Code.invalid_request
    assert refused.rejection.detail == "steps[1]: step 'b' was not removed by a correction; report its own outcome"
    assert w.ack(a, m, "rejected", detail="step 'b' had already started").accepted
    assert message(w, task_id, m).state == "rejected"
    # b keeps its true outcome; the plan is unchanged
    steps = result_steps([("a", "completed", None), ("b", "completed", None), ("c", "completed", None)])
    assert w.report(a, "done", steps=steps).accepted


@req("STEER/s3")
def test_replace_remaining_changes_only_the_work_it_names():
    w = World()
    w.register("h1", "d1", "d2")
    x = w.submit(plan=plan("a", "b", "c"))
    y = w.submit(plan=plan("p", "q"))
    ax, ay = w.claim("h1"), w.claim("h1")
    w.start(ax), w.start(ay)
    y_before = w.task(y)
    m = posted(w.post(x, "steer", data={"replace_remaining": [step("b2")]}))
    w.renew(ax)
    before = w.task(x)
    assert w.ack(ax, m, "admitted", before_step="b").accepted
    after = w.task(x)
    assert (after.status, after.attempts, after.cancellation) == (before.status, before.attempts, before.cancellation)
    assert w.task(y) == y_before

    wrong = result_steps([("a", "completed", None), ("b", "completed", None), ("c", "completed", None)])
    refused = w.report(ax, "done", steps=wrong)
    assert code(refused) is Code.invalid_request
    assert refused.rejection.detail == (
        "steps: must name every planned step once, in plan order"
        " (4 planned, first difference at position 3: step 'b2' is missing)"
    )
    removed = result_steps(
        [("a", "completed", None), ("b", "completed", None), ("c", "not_started", "steered"), ("b2", "completed", None)]
    )
    refused = w.report(ax, "done", steps=removed)
    assert code(refused) is Code.invalid_request
    assert refused.rejection.detail == (
        "steps[1]: step 'b' was removed by a correction; report not_started with reason steered"
    )
    steps = result_steps(
        [
            ("a", "completed", None),
            ("b", "not_started", "steered"),
            ("c", "not_started", "steered"),
            ("b2", "completed", None),
        ]
    )
    assert w.report(ax, "done", steps=steps).accepted


@req("BOUNDARY/s2")
def test_a_result_lists_every_step_of_the_edited_plan_in_its_order():
    w = World()
    task_id, a = running(w, "a", "b", "c")
    m = posted(w.post(task_id, "steer", data={"insert_after": "a", "steps": [step("a2")]}))
    w.renew(a)
    assert w.ack(a, m, "admitted", before_step="b").accepted
    missing = result_steps([("a", "completed", None), ("b", "completed", None), ("c", "completed", None)])
    assert code(w.report(a, "failed", steps=missing)) is Code.invalid_request
    steps = result_steps(
        [
            ("a", "completed", None),
            ("a2", "interrupted", "lease_lost"),
            ("b", "not_started", "lease_lost"),
            ("c", "not_started", "lease_lost"),
        ]
    )
    assert w.report(a, "failed", steps=steps).accepted


def test_a_correction_outlives_the_attempt_that_admitted_it():
    w = World()
    task_id, a = running(w, "a", "b", "c")
    m = posted(w.post(task_id, "steer", data={"skip": ["c"]}))
    w.renew(a)
    w.ack(a, m, "admitted", before_step="b")
    w.now += LEASE_MS  # attempt 1 expires; the task is queued again
    retry = w.claim("h1")
    assert [s.id for s in retry.plan.steps] == ["a", "b"]
    w.start(retry)
    steps = result_steps([("a", "completed", None), ("b", "completed", None)])
    assert w.report(retry, "done", steps=steps).accepted
    w.restart()


def test_an_edit_at_a_boundary_that_is_not_a_step_still_to_run_is_a_conflict():
    w = World()
    task_id, a = running(w, "a", "b")
    m = posted(w.post(task_id, "steer", data={"skip": ["b"]}))
    w.renew(a)
    assert code(w.ack(a, m, "admitted", before_step="zz")) is Code.message_conflict
    assert w.ack(a, m, "admitted", before_step="b").accepted  # b had not started: it is skipped


@pytest.mark.parametrize(
    "intent, text, data, field",
    [
        ("poke", None, None, "intent"),
        ("steer", None, None, "data"),
        ("steer", None, {"skip": []}, "data.skip"),
        ("steer", None, {"skip": ["a"], "steps": []}, "data.steps"),
        ("steer", None, {"insert_after": "a"}, "data.steps"),
        ("steer", None, {"replace_remaining": [{"id": "x"}]}, "data.replace_remaining[0].action"),
        ("steer", None, {"replace_remaining": [step("x"), step("x")]}, "data.replace_remaining"),
        ("pause", None, {"until": "later"}, "data"),
        ("follow_up", None, {"steps": "all"}, "data.steps"),
        ("follow_up", None, {"step": [step("x")]}, "data.step"),
    ],
)
def test_malformed_messages_are_refused_naming_the_field(intent, text, data, field):
    w = World()
    task_id, _ = running(w, "a", "b")
    refused = w.post(task_id, intent, text=text, data=data)
    assert code(refused) is Code.invalid_request and refused.rejection.detail.startswith(field + ":")


def test_structured_edits_are_refused_for_staged_plans_but_guidance_is_not():
    w = World()
    w.register("h1", "d1")
    staged = Plan(stages=(Stage(id="s", steps=(Step(id="a", action="tap", args={}),)),))
    task_id = w.submit(plan=staged)
    assert code(w.post(task_id, "steer", data={"skip": ["a"]})) is Code.invalid_request
    assert w.post(task_id, "steer", text="go slower").accepted


def test_messages_to_an_unknown_or_foreign_task_are_not_found():
    w = World()
    task_id, _ = running(w, "a")
    assert code(w.post("nope", "pause")) is Code.not_found
    assert code(w.post(task_id, "pause", tenant="other")) is Code.not_found
    assert w.post(task_id, "pause", tenant=None).accepted  # an admin


# -- pause --------------------------------------------------------------------------------


@req("PAUSE/s1")
def test_a_pause_admitted_at_a_boundary_keeps_the_lease_alive():
    w = World()
    task_id, a = running(w, "a", "b", "c")
    m = posted(w.post(task_id, "pause"))
    assert not w.task(task_id).paused  # posted is not applied
    w.renew(a)
    assert not w.task(task_id).paused  # delivered is not applied either
    assert w.ack(a, m, "admitted", before_step="b").accepted
    assert w.task(task_id).paused and w.task(task_id).status == "dispatched"
    for _ in range(10):  # many lease periods, renewed
        w.now += LEASE_MS // 2
        assert w.renew(a).accepted
    assert w.task(task_id).paused and w.task(task_id).active_attempt is not None


@req("PAUSE/s2")
def test_a_queued_task_paused_is_held_and_released_with_its_place():
    w = World()
    w.register("h1", "d1")
    first = w.submit(plan=plan("a"))
    pause = w.post(first, "pause")
    assert pause.accepted and message(w, first, pause.reply.message_id).state == "completed"
    assert w.task(first).held
    assert w.claim("h1") is None
    later = w.submit(plan=plan("b"))
    assert w.post(first, "resume").accepted
    assert not w.task(first).held
    assert w.claim("h1").task_id == first  # ahead of `later`, submitted after it
    assert w.task(later).status == "queued"


@req("PAUSE/s3")
def test_a_pause_stays_in_force_across_renewals_redelivery_and_restarts_until_resumed():
    w = World()
    task_id, a = running(w, "a", "b", "c")
    p = posted(w.post(task_id, "pause"))
    w.renew(a)
    w.ack(a, p, "admitted", before_step="b")
    for _ in range(3):
        w.now += 1000
        w.renew(a)
    w.restart()
    assert w.task(task_id).paused
    r = posted(w.post(task_id, "resume"))
    assert [x.id for x in w.renew(a).reply.messages] == [r]
    assert w.task(task_id).paused  # delivered, not yet admitted
    assert w.ack(a, r, "admitted", before_step="b").accepted
    assert not w.task(task_id).paused


def test_a_task_whose_attempt_lapses_while_paused_comes_back_held():
    w = World()
    task_id, a = running(w, "a", "b")
    p = posted(w.post(task_id, "pause"))
    w.renew(a)
    w.ack(a, p, "admitted", before_step="b")
    w.now += LEASE_MS
    assert w.claim("h1") is None
    assert w.task(task_id).held
    assert w.post(task_id, "resume").accepted
    assert w.claim("h1").task_id == task_id


def test_undelivered_pause_of_a_lapsed_attempt_holds_the_requeued_task_and_delivered_ones_are_not_admitted():
    w = World()
    task_id, a = running(w, "a", "b")
    steer = posted(w.post(task_id, "steer", data={"skip": ["b"]}))
    w.renew(a)
    pause = posted(w.post(task_id, "pause"))
    w.now += LEASE_MS
    w.advance(0)
    assert message(w, task_id, steer).state == "not_admitted"
    assert message(w, task_id, pause).state == "completed" and w.task(task_id).held
    w.restart()


def test_a_cancel_still_works_on_a_held_task():
    w = World()
    w.register("h1", "d1")
    task_id = w.submit(plan=plan("a"))
    w.post(task_id, "pause")
    assert w.cancel(task_id).accepted and w.task(task_id).status == "cancelled"


# -- follow-ups ---------------------------------------------------------------------------


@req("FOLLOWUP/s1", "COLLECT/s1")
def test_follow_ups_to_a_task_that_ends_done_become_one_successor():
    w = World()
    w.register("h1", "d1", attributes={"model": "Pixel 7"})
    from amc.core.records import Requirements

    task_id = w.submit(plan=plan("a"), requirements=Requirements(attributes={"model": "Pixel 7"}))
    a = w.claim("h1")
    w.start(a)
    m1 = posted(w.post(task_id, "follow_up", text="open Wi-Fi settings"))
    m2 = posted(w.post(task_id, "follow_up", text="take a screenshot", data={"steps": [step("shot")]}))
    assert w.renew(a).reply.messages == ()  # follow-ups wait on the task; no host applies them
    steps = result_steps([("a", "completed", None)])
    assert w.report(a, "done", steps=steps).accepted

    successors = [t for t in w.state.tasks.values() if t.follow_up_of == task_id]
    assert len(successors) == 1
    s = successors[0]
    assert s.status == "queued" and s.requirements == w.task(task_id).requirements
    assert [(f.message_id, f.text, f.data) for f in s.collected] == [
        (m1, "open Wi-Fi settings", None),
        (m2, "take a screenshot", {"steps": [step("shot")]}),
    ]
    assert [x.id for x in s.plan.steps] == [f"{m2}.shot"]
    assert [(x.id, x.state, x.successor) for x in w.task(task_id).messages] == [
        (m1, "admitted", s.id),
        (m2, "admitted", s.id),
    ]
    assert w.task(task_id).result.steps == steps

    later = w.post(task_id, "follow_up", text="and once more")
    assert later.accepted and later.reply.successor_id not in (None, s.id)
    again = w.task(later.reply.successor_id)
    assert [f.message_id for f in again.collected] == [later.reply.message_id] and again.follow_up_of == task_id
    w.restart()


@req("FOLLOWUP/s2")
@pytest.mark.parametrize("ending", ["reported", "exhausted", "cancelled"])
def test_follow_ups_to_a_task_that_ends_otherwise_are_not_admitted(ending):
    w = World()
    task_id, a = running(w, "a", max_attempts=1)
    m1 = posted(w.post(task_id, "follow_up", text="then this"))
    if ending == "reported":
        w.report(a, "failed", steps=result_steps([("a", "failed", "boom")]))
    elif ending == "exhausted":
        w.now += LEASE_MS
        w.advance(0)
    else:
        w.cancel(task_id)
        w.report(a, "cancelled", steps=result_steps([("a", "not_started", "cancelled")]))
    assert w.task(task_id).status in ("failed", "cancelled")
    assert message(w, task_id, m1).state == "not_admitted"
    assert not [t for t in w.state.tasks.values() if t.follow_up_of == task_id]
    assert code(w.post(task_id, "follow_up", text="more")) is Code.task_terminal
    assert code(w.post(task_id, "steer", text="more")) is Code.task_terminal


def test_open_messages_of_an_ended_task_are_not_admitted():
    w = World()
    task_id, a = running(w, "a", "b")
    queued = posted(w.post(task_id, "steer", text="later"))
    w.report(a, "done", steps=result_steps([("a", "completed", None), ("b", "completed", None)]))
    assert message(w, task_id, queued).state == "not_admitted"


@req("BOUNDARY/s1")
def test_a_steer_admitted_while_calls_run_removes_only_those_that_had_not_crossed_the_boundary():
    w = World()
    task_id, a = running(w, "c1", "c2", "c3")
    m = posted(w.post(task_id, "steer", data={"skip": ["c2", "c3"]}))
    w.renew(a)
    # c1 and c2 were launched (in parallel) before the host admitted the steer: the boundary is before c3
    assert w.ack(a, m, "admitted", before_step="c3").accepted
    history = [e for e in w.log if type(e).__name__ == "MessageAcknowledged"]
    assert [(e.message_id, e.boundary) for e in history] == [(m, Boundary(before_step="c3"))]
    recalled = result_steps(
        [("c1", "completed", None), ("c2", "not_started", "steered"), ("c3", "not_started", "steered")]
    )
    refused = w.report(a, "failed", steps=recalled)
    assert code(refused) is Code.invalid_request and "c2" in refused.rejection.detail
    truthful = result_steps(
        [("c1", "completed", None), ("c2", "interrupted", "cancelled"), ("c3", "not_started", "steered")]
    )
    assert w.report(a, "failed", steps=truthful).accepted
    assert w.task(task_id).result.steps == truthful


def test_a_skip_of_steps_that_all_started_is_rejected_and_a_mixed_one_keeps_the_started():
    outline = steering.outline_of(plan("a", "b", "c").steps)
    assert steering.apply_edit(outline, steering.Skip(ids=("a", "b")), 2, "m") == "steps 'a', 'b' had all started"
    mixed = steering.apply_edit(outline, steering.Skip(ids=("b", "c")), 2, "m")
    assert [(e.step.id, e.removed_by) for e in mixed] == [("a", None), ("b", None), ("c", "m")]


def test_an_admission_boundary_never_moves_back_behind_a_step_that_started():
    w = World()
    task_id, a = running(w, "a", "b", "c", "d")
    pause = posted(w.post(task_id, "pause"))
    skip = posted(w.post(task_id, "steer", data={"skip": ["a"]}))
    w.renew(a)
    assert w.ack(a, pause, "admitted", before_step="b").accepted  # a had started
    refused = w.ack(a, skip, "admitted", before_step="a")
    assert code(refused) is Code.message_conflict and "'a' had already started" in refused.rejection.detail
    assert w.ack(a, skip, "rejected", detail="step 'a' had already started").accepted
    assert not [e for e in steering.attempt_outline(w.task(task_id), 1) if e.removed_by]


# -- early refusals and the details of messages that were not applied ----------------------


@req("STEER-EARLY/s1")
@pytest.mark.parametrize(
    "data, field",
    [
        ({"skip": ["b", "nosuchstep"]}, "data.skip"),
        ({"insert_after": "nosuchstep", "steps": [step("x")]}, "data.insert_after"),
    ],
)
def test_a_steer_naming_a_step_in_no_plan_is_refused_when_posted(data, field):
    w = World()
    task_id, _ = running(w, "a", "b")
    refused = w.post(task_id, "steer", data=data)
    assert code(refused) is Code.invalid_request
    assert refused.rejection.detail.startswith(field + ":") and "'nosuchstep'" in refused.rejection.detail


@req("STEER-EARLY/s1")
def test_a_steer_may_name_a_step_an_earlier_steer_inserts_until_that_one_is_refused():
    w = World()
    task_id, a = running(w, "a", "b")
    insert = posted(w.post(task_id, "steer", data={"insert_after": "a", "steps": [step("x")]}))
    assert w.post(task_id, "steer", data={"skip": ["x"]}).accepted  # x is on its way
    assert w.post(task_id, "steer", data={"insert_after": "x", "steps": [step("y")]}).accepted
    w.renew(a)
    assert w.ack(a, insert, "rejected", detail="no").accepted
    assert code(w.post(task_id, "steer", data={"skip": ["x"]})) is Code.invalid_request
    assert steering.known_step_ids(w.task(task_id)) == {"a", "b", "y"}


@req("DELIVERY/s4")
def test_messages_not_admitted_say_why():
    w = World()
    task_id, a = running(w, "a", "b")
    delivered = posted(w.post(task_id, "steer", data={"skip": ["b"]}))
    w.renew(a)
    w.now += LEASE_MS
    w.advance(0)  # attempt 1 expires, the task is queued again
    detail = message(w, task_id, delivered).detail
    assert "attempt 1 ended before its host applied" in detail and "queued" in detail

    a2 = w.claim("h1")
    w.start(a2)
    queued = posted(w.post(task_id, "steer", text="later"))
    follow_up = posted(w.post(task_id, "follow_up", text="then this"))
    w.report(a2, "failed", steps=result_steps([("a", "failed", "boom"), ("b", "not_started", "x")]))
    assert message(w, task_id, queued).detail == "the task ended failed before any host received the message"
    assert "only when it ends done" in message(w, task_id, follow_up).detail
    assert all(m.detail for m in w.task(task_id).messages if m.state in ("not_admitted", "rejected"))
    w.restart()


# -- progress -----------------------------------------------------------------------------


@req("PROGRESS/s2")
def test_progress_must_name_a_step_of_the_plan_as_steered_so_far():
    w = World()
    task_id, a = running(w, "a", "b")
    assert w.renew(a, progress_step="b").accepted
    refused = w.renew(a, progress_step="zz")
    assert code(refused) is Code.invalid_request and "'zz'" in refused.rejection.detail
    # a bad step is a bad body: refused before the lease checks would refuse the renewal
    assert code(w.renew(a, lease_id="L-wrong", progress_step="zz")) is Code.invalid_request
    assert code(w.renew(a, lease_id="L-wrong", progress_step="b")) is Code.lease_unknown
    # a step a steer inserts counts from when the steer is posted, before it is admitted
    posted(w.post(task_id, "steer", data={"insert_after": "a", "steps": [step("a2")]}))
    assert w.renew(a, progress_step="a2").accepted
    # but not one a refused steer would have inserted
    m = posted(w.post(task_id, "steer", data={"insert_after": "a", "steps": [step("a3")]}))
    assert w.renew(a).accepted  # carries the steer to the host
    assert w.ack(a, m, "rejected", detail="no room").accepted
    assert code(w.renew(a, progress_step="a3")) is Code.invalid_request
    # a start makes the same check
    w.register("h2", "d2")
    w.submit(plan=plan("x"))
    b = w.claim("h2")
    assert code(w.start(b, progress_step="nope")) is Code.invalid_request
    assert w.start(b, progress_step="x").accepted
