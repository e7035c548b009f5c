"""Every field of every record the HTTP wire shows is either a member of its view or listed
in `wire.NOT_SHOWN` with a reason: a field added to a record cannot silently miss the wire."""

from __future__ import annotations

import typing

import attrs

from amc.adapters.http import wire
from amc.core import records as rec
from amc.core.plans import plan_to_json

STEP = rec.Step(id="s1", action="tap", args={"x": 1, "y": 2})
OUTCOME = rec.StepOutcome(
    id="s1", status="failed", reason="r", started_at=1_000, ended_at=2_000, output="o", artifacts=("a_1",)
)
ATTEMPT = rec.Attempt(
    number=1,
    host_id="h",
    device="d",
    lease_id="L",
    lease_ms=30_000,
    assigned_at=1_000,
    lease_expires_at=31_000,
    dispatched_at=1_500,
    renewals=2,
    ended_at=3_000,
    outcome="failed",
)
MESSAGE = rec.Message(
    id="m",
    intent="steer",
    text="t",
    data={"k": 1},
    state="completed",
    created_at=1_000,
    attempt=1,
    delivered_at=1_100,
    admitted_at=1_200,
    completed_at=1_300,
    boundary=rec.Boundary(before_step="s1"),
    detail="d",
    successor="t2",
)
FOLLOW_UP = rec.FollowUp(message_id="m", text="t", data={"k": 1})
ARTIFACT = rec.Artifact(
    id="a", attempt=1, step="s1", name="n.png", content_type="image/png", size=3, sha256="f" * 64, created_at=1_400
)
TASK = rec.Task(
    id="t",
    tenant="a",
    status="failed",
    plan=rec.Plan(steps=(STEP,)),
    requirements=rec.Requirements(serial="d", attributes={"model": "P7"}),
    priority=1,
    max_attempts=2,
    labels={"l": "v"},
    idempotency_key="k",
    created_at=1_000,
    updated_at=2_000,
    seq=7,
    attempts=(ATTEMPT,),
    cancellation=rec.Cancellation(state="completed", requested_at=1_000, attempt=1, delivered_at=1_100, reason="r"),
    result=rec.Result(
        status="failed", attempt=1, reason="reported", metadata={"m": 1}, steps=(OUTCOME,), recorded_at=3_000
    ),
    paused=True,
    messages=(MESSAGE,),
    admissions=("m",),
    follow_up_of="t0",
    collected=(FOLLOW_UP,),
    artifacts=(ARTIFACT,),
)
ACTION = rec.Action(
    id="x1",
    seq=1,
    step=rec.Step(id="x1", action="tap", args={"x": 1, "y": 2}),
    status="interrupted",
    posted_at=1_000,
    reason="r",
    attempt=1,
    delivered_at=1_100,
    started_at=1_200,
    ended_at=1_300,
    output="o",
    artifacts=("a_1",),
)
SESSION_TASK = attrs.evolve(TASK, session=rec.Session(idle_ms=5_000, end_requested_at=2_000, actions=(ACTION,)))
HOST = rec.Host(
    id="h",
    updated_at=1_000,
    devices=(
        rec.Device(
            serial="d", attributes={"model": "P7"}, online=False, reservation=rec.Reservation(task_id="t", attempt=1)
        ),
    ),
)
STAGED = rec.Plan(stages=(rec.Stage(id="g", steps=(STEP,)),))

# Each record and the views that show it (a record shown in two shapes: the union of both).
VIEWS = {
    rec.Task: [wire.task_view(TASK)],
    rec.Attempt: [wire.attempt_view(ATTEMPT)],
    rec.Cancellation: [wire.cancellation_view(TASK.cancellation)],
    rec.Result: [wire.result_view(TASK.result)],
    rec.StepOutcome: [wire.step_outcome_view(OUTCOME)],
    rec.Message: [wire.message_view(MESSAGE)],
    rec.Boundary: [wire.message_view(MESSAGE)["boundary"]],
    rec.FollowUp: [wire.follow_up_view(FOLLOW_UP)],
    rec.Artifact: [wire.artifact_view("t", ARTIFACT)],
    rec.Requirements: [wire.task_view(TASK)["requirements"]],
    rec.Plan: [plan_to_json(TASK.plan), plan_to_json(STAGED), plan_to_json(rec.Plan(steps=(STEP,), record=True))],
    rec.Stage: [plan_to_json(STAGED)["stages"][0]],
    rec.Step: [plan_to_json(TASK.plan)["steps"][0]],
    rec.Host: [wire.host_view(HOST)],
    rec.Device: [wire.device_view(HOST.devices[0])],
    rec.Reservation: [wire.device_view(HOST.devices[0])["reservation"]],
    rec.Session: [wire.task_view(SESSION_TASK)["session"]],
    rec.Action: [wire.action_view(ACTION)],
}


def unaccounted(cls: type) -> list[str]:
    shown = {key for view in VIEWS[cls] for key in view}
    return [f.name for f in attrs.fields(cls) if f.name not in shown and f.name not in wire.NOT_SHOWN.get(cls, {})]


def test_every_record_field_is_on_the_wire_or_listed_as_not_shown():
    problems = {cls.__name__: unaccounted(cls) for cls in VIEWS if unaccounted(cls)}
    assert not problems, f"fields the wire neither shows nor lists in wire.NOT_SHOWN: {problems}"


def test_the_not_shown_list_names_only_fields_that_exist_and_are_not_shown():
    for cls, fields in wire.NOT_SHOWN.items():
        names = {f.name for f in attrs.fields(cls)}
        shown = {key for view in VIEWS[cls] for key in view}
        assert set(fields) <= names, f"{cls.__name__}: wire.NOT_SHOWN lists fields it does not have"
        assert not set(fields) & shown, f"{cls.__name__}: wire.NOT_SHOWN lists fields its view shows"


def test_every_record_a_task_or_host_holds_has_its_view_checked_here():
    seen, todo = set(), [rec.Task, rec.Host]
    while todo:
        cls = todo.pop()
        if cls not in seen:
            seen.add(cls)
            for field in attrs.fields(attrs.resolve_types(cls)):
                todo.extend(t for t in _types_in(field.type) if attrs.has(t))
    assert seen <= VIEWS.keys(), (
        f"records without a checked wire view: {sorted(c.__name__ for c in seen - VIEWS.keys())}"
    )


def _types_in(tp) -> list:
    return [tp, *(inner for arg in typing.get_args(tp) for inner in _types_in(arg))]


def test_the_views_show_what_the_server_knows_of_the_moment_beside_the_records():
    """Progress, `waiting` and liveness are no record fields: the views take them as arguments."""
    from amc.adapters.http.liveness import Progress
    from amc.core.waiting import Waiting, WaitingReason

    view = wire.task_view(TASK, progress=lambda task_id, n: Progress("s1", 0), waiting=Waiting(WaitingReason.ready, 2))
    assert view["attempts"][0]["progress"] == {"step": "s1", "ended": 0}
    assert view["waiting"] == {"reason": "ready", "matching_devices": 2}
    plain = wire.task_view(TASK)
    assert (plain["attempts"][0]["progress"], plain["waiting"]) == (None, None)
    online_device = attrs.evolve(HOST.devices[0], online=True)
    host = attrs.evolve(HOST, devices=(online_device,))
    seen = wire.host_view(host, last_seen_at=1_000, online=True)
    assert (seen["last_seen_at"], seen["online"], seen["devices"][0]["online"]) == (wire.rfc3339(1_000), True, True)
    silent = wire.host_view(host, last_seen_at=1_000, online=False)
    assert (silent["online"], silent["devices"][0]["online"]) == (False, False)  # a silent host's devices too
    assert wire.host_view(host)["last_seen_at"] is None
