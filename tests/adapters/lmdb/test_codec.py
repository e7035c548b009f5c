"""The hand-written codec of the hot records (`amc.adapters.lmdb.codec.unstructure_task`, ...) is the
converter's: the same JSON bytes out, the same records back."""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from amc.adapters.lmdb import codec
from amc.adapters.lmdb import layout
from amc.core import records
from amc.core.lifecycle import AttemptState, CancellationState, MessageState, StepStatus, TaskStatus

text = st.text(max_size=8)
opt_int = st.none() | st.integers(min_value=0, max_value=2**53)
opt_text = st.none() | text
json_leaf = st.none() | st.booleans() | st.integers(min_value=-(2**53), max_value=2**53) | text
json_value = st.recursive(json_leaf, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3), max_leaves=6)
json_dict = st.dictionaries(text, json_value, max_size=3)
str_dict = st.dictionaries(text, text, max_size=3)

steps = st.lists(st.builds(records.Step, id=text, action=text, args=json_dict), max_size=3).map(tuple)
plans = st.one_of(
    st.builds(records.Plan, steps=steps),
    st.builds(records.Plan, stages=st.lists(st.builds(records.Stage, id=text, steps=steps), max_size=3).map(tuple)),
    st.builds(records.Plan, steps=st.none() | steps, stages=st.none() | st.lists(st.builds(records.Stage, id=text, steps=steps), max_size=2).map(tuple)),
)
attempts = st.builds(
    records.Attempt,
    number=st.integers(1, 10),
    host_id=text,
    device=text,
    lease_id=text,
    lease_ms=st.integers(0, 10**9),
    assigned_at=st.integers(0, 2**53),
    lease_expires_at=st.integers(0, 2**53),
    dispatched_at=opt_int,
    renewals=st.integers(0, 100),
    ended_at=opt_int,
    outcome=st.none() | st.sampled_from(AttemptState),
)
outcomes = st.builds(
    records.StepOutcome, id=text, status=st.sampled_from(StepStatus), reason=opt_text, started_at=opt_int, ended_at=opt_int, output=opt_text
)
boundaries = st.none() | st.builds(records.Boundary, before_step=opt_text)
messages = st.builds(
    records.Message,
    id=text,
    intent=text,
    text=opt_text,
    data=st.none() | json_dict,
    state=st.sampled_from(MessageState),
    created_at=st.integers(0, 2**53),
    attempt=opt_int,
    delivered_at=opt_int,
    admitted_at=opt_int,
    completed_at=opt_int,
    boundary=boundaries,
    detail=opt_text,
    successor=opt_text,
)
follow_ups = st.builds(records.FollowUp, message_id=text, text=opt_text, data=st.none() | json_dict)
tasks = st.builds(
    records.Task,
    id=text,
    tenant=text,
    status=st.sampled_from(TaskStatus),
    plan=plans,
    requirements=st.builds(records.Requirements, serial=opt_text, attributes=str_dict),
    priority=st.integers(-(2**31), 2**31),
    max_attempts=st.integers(1, 10),
    labels=str_dict,
    idempotency_key=opt_text,
    created_at=st.integers(0, 2**53),
    updated_at=st.integers(0, 2**53),
    seq=st.integers(0, 2**53),
    attempts=st.lists(attempts, max_size=3).map(tuple),
    cancellation=st.none()
    | st.builds(records.Cancellation, state=st.sampled_from(CancellationState), requested_at=st.integers(0, 2**53), attempt=opt_int, delivered_at=opt_int, reason=opt_text),
    result=st.none()
    | st.builds(
        records.Result,
        status=st.sampled_from(TaskStatus),
        attempt=opt_int,
        reason=text,
        metadata=json_dict,
        steps=st.none() | st.lists(outcomes, max_size=3).map(tuple),
        recorded_at=st.integers(0, 2**53),
    ),
    paused=st.booleans(),
    messages=st.lists(messages, max_size=3).map(tuple),
    admissions=st.lists(text, max_size=3).map(tuple),
    follow_up_of=opt_text,
    collected=st.lists(follow_ups, max_size=2).map(tuple),
)


@settings(max_examples=300, deadline=None)
@given(tasks)
def test_task_codec_is_the_converters(task):
    expected = codec.dumps(task)
    # encode: the same bytes as the converter, with and without the plan fragment
    assert orjson.dumps(codec.unstructure_task(task)) == orjson.dumps(codec.converter.unstructure(task))
    assert layout.encode(task) == expected
    assert layout.encode(task) == expected  # the plan cache's second use
    # decode: the same record as the converter, by every path the store uses
    assert codec.structure_task(orjson.loads(orjson.dumps(codec.converter.unstructure(task)))) == task
    assert layout.decode_task(expected) == task == codec.loads(expected)
    assert layout.TaskLoader()(expected) == task
    _assert_lifecycle_fields_are_enums(layout.decode_task(expected))
    _assert_lifecycle_fields_are_enums(layout.TaskLoader()(expected))


def _assert_lifecycle_fields_are_enums(task: records.Task) -> None:
    """Decoded records hold the lifecycle enums, not bare strings that merely compare equal."""
    assert type(task.status) is TaskStatus
    assert all(a.outcome is None or type(a.outcome) is AttemptState for a in task.attempts)
    assert task.cancellation is None or type(task.cancellation.state) is CancellationState
    assert all(type(m.state) is MessageState for m in task.messages)
    if task.result is not None:
        assert type(task.result.status) is TaskStatus
        assert all(type(o.status) is StepStatus for o in task.result.steps or ())


@settings(max_examples=200, deadline=None)
@given(plans)
def test_plan_codec_is_the_converters(plan):
    data = codec.converter.unstructure(plan)
    assert orjson.dumps(codec.unstructure_plan(plan)) == orjson.dumps(data)
    assert codec.structure_plan(orjson.loads(orjson.dumps(data))) == plan


def test_defaults_are_filled_like_the_converter():
    """An older record without the defaulted fields decodes as the converter does."""
    data = {
        "id": "t",
        "tenant": "x",
        "status": "queued",
        "plan": {"steps": [{"id": "a", "action": "b"}]},
        "requirements": {},
        "priority": 0,
        "max_attempts": 1,
        "labels": {},
        "idempotency_key": None,
        "created_at": 1,
        "updated_at": 1,
        "seq": 1,
    }
    expected = codec.converter.structure(orjson.loads(orjson.dumps(data)), records.Task)
    raw = orjson.dumps({**data, "type": "task"})
    assert layout.decode_task(raw) == expected
    assert layout.TaskLoader()(raw) == expected


from amc.core import events  # noqa: E402

requirements = st.builds(records.Requirements, serial=opt_text, attributes=str_dict)
event_strategies = {
    events.TaskSubmitted: st.builds(
        events.TaskSubmitted,
        at=st.integers(0, 2**53),
        task_id=text,
        tenant=text,
        plan=plans,
        requirements=requirements,
        priority=st.integers(-(2**31), 2**31),
        max_attempts=st.integers(1, 10),
        labels=str_dict,
        idempotency_key=opt_text,
        follow_up_of=opt_text,
        collected=st.lists(follow_ups, max_size=2).map(tuple),
    ),
    events.TaskEnded: st.builds(
        events.TaskEnded,
        at=st.integers(0, 2**53),
        task_id=text,
        status=st.sampled_from(TaskStatus),
        reason=text,
        attempt=opt_int,
        metadata=json_dict,
        steps=st.none() | st.lists(outcomes, max_size=3).map(tuple),
    ),
    events.HostRegistered: st.builds(
        events.HostRegistered,
        at=st.integers(0, 2**53),
        host_id=text,
        devices=st.lists(st.builds(records.DeviceSpec, serial=text, attributes=str_dict), max_size=3).map(tuple),
    ),
}
_FLAT = {
    int: st.integers(-(2**53), 2**53),
    str: text,
    int | None: opt_int,
    str | None: opt_text,
    records.JSON | None: st.none() | json_dict,
    dict[str, records.JSON] | None: st.none() | json_dict,
    tuple[str, ...]: st.lists(text, max_size=3).map(tuple),
    records.Boundary | None: boundaries,
    MessageState: st.sampled_from(MessageState),
}


def _flat(cls):
    import attrs

    return st.builds(cls, **{f.name: _FLAT[f.type] for f in attrs.fields(attrs.resolve_types(cls))})


any_event = st.one_of(*(event_strategies[cls] if cls in event_strategies else _flat(cls) for cls in codec.EVENT_TAGS.values()))


@settings(max_examples=400, deadline=None)
@given(any_event)
def test_event_encoders_are_the_converters(event):
    assert layout.encode(event) == codec.dumps(event)
    assert layout.encode(event) == codec.dumps(event)
    assert layout.decode_event(layout.encode(event)) == event


def test_a_record_the_fast_path_refuses_gets_the_converters_error():
    plan = records.Plan(steps=(records.Step(id="a", action="tap"),))
    task = records.Task(id="t", tenant="x", status="queued", plan=plan, requirements=records.Requirements(), priority=0,
                        max_attempts=1, labels={}, idempotency_key=None, created_at=0, updated_at=0, seq=1)
    encoded = layout.encode(task)
    variants = (
        encoded.replace(b'"action":"tap"', b'"action":"tap","surprise":1'),
        encoded.replace(b'"type":"task"', b'"type":"task","surprise":1'),
        encoded.replace(b'"stages":null', b'"stages":null,"surprise":1'),
        encoded.replace(b'"serial":null', b'"serial":null,"surprise":1'),
    )
    for raw in variants:
        assert raw != encoded
        for decode in (layout.decode_task, layout.TaskLoader()):
            try:
                decode(raw)
            except Exception as exc:  # noqa: BLE001
                assert "surprise" in repr(getattr(exc, "exceptions", exc)) or "surprise" in str(exc)
                assert not isinstance(exc, TypeError)
            else:
                raise AssertionError(f"an unknown field was accepted: {raw!r}")


def test_the_loader_stops_sharing_plans_when_all_are_distinct_and_still_decodes_exactly():
    load = layout.TaskLoader()
    shared = records.Plan(steps=(records.Step(id="s", action="tap"),))

    def task(n, plan):
        return records.Task(id=f"t{n}", tenant="x", status="queued", plan=plan, requirements=records.Requirements(),
                            priority=0, max_attempts=1, labels={}, idempotency_key=None, created_at=0, updated_at=0, seq=n)

    for n in range(6000):
        own = records.Plan(steps=(records.Step(id="s", action="tap", args={"n": n}),))
        original = task(n, own)
        assert load(layout.encode(original)) == original
    first, second = load(layout.encode(task(1, shared))), load(layout.encode(task(2, shared)))
    assert first == task(1, shared) and second == task(2, shared)


hosts = st.builds(
    records.Host,
    id=text,
    updated_at=st.integers(0, 2**53),
    devices=st.lists(
        st.builds(
            records.Device,
            serial=text,
            attributes=str_dict,
            online=st.booleans(),
            reservation=st.none() | st.builds(records.Reservation, task_id=text, attempt=st.integers(1, 10)),
        ),
        max_size=4,
    ).map(tuple),
)


@settings(max_examples=200, deadline=None)
@given(hosts)
def test_host_encoder_is_the_converters(host):
    assert layout.encode(host) == codec.dumps(host)
    assert layout.decode_host(layout.encode(host)) == host
