"""The records' hooks that `amc.adapters.codec` generates from their declarations write and read
exactly what a plain cattrs converter does: the same JSON bytes out, the same records back."""

from __future__ import annotations

import enum
import typing

import attrs
import orjson
from cattrs.preconf.orjson import make_converter
from hypothesis import given, settings
from hypothesis import strategies as st

from amc.adapters import codec
from amc.adapters.lmdb import layout
from amc.core import records
from amc.core.lifecycle import AttemptState, CancellationState, MessageState, StepStatus, TaskStatus

text = st.text(max_size=8)
opt_int = st.none() | st.integers(min_value=0, max_value=2**53)
opt_text = st.none() | text
json_leaf = st.none() | st.booleans() | st.integers(min_value=-(2**53), max_value=2**53) | text
json_value = st.recursive(
    json_leaf, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3), max_leaves=6
)
json_dict = st.dictionaries(text, json_value, max_size=3)
str_dict = st.dictionaries(text, text, max_size=3)

# The reference: cattrs' own generic hooks, which wrote every store before the codec
# generated its own.
plain = make_converter(forbid_extra_keys=True)

steps = st.lists(st.builds(records.Step, id=text, action=text, args=json_dict), max_size=3).map(tuple)
plans = st.one_of(
    st.builds(records.Plan, steps=steps),
    st.builds(records.Plan, stages=st.lists(st.builds(records.Stage, id=text, steps=steps), max_size=3).map(tuple)),
    st.builds(
        records.Plan,
        steps=st.none() | steps,
        stages=st.none() | st.lists(st.builds(records.Stage, id=text, steps=steps), max_size=2).map(tuple),
    ),
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
    steps=st.none() | st.lists(st.deferred(lambda: outcomes), max_size=2).map(tuple),
    release_reason=opt_text,
)
outcomes = st.builds(
    records.StepOutcome,
    id=text,
    status=st.sampled_from(StepStatus),
    reason=opt_text,
    started_at=opt_int,
    ended_at=opt_int,
    output=opt_text,
    artifacts=st.lists(text, max_size=2).map(tuple),
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
artifacts = st.builds(
    records.Artifact,
    id=text,
    attempt=st.integers(1, 10),
    step=text,
    name=text,
    content_type=text,
    size=st.integers(0, 2**40),
    sha256=text,
    created_at=st.integers(0, 2**53),
)
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
    | st.builds(
        records.Cancellation,
        state=st.sampled_from(CancellationState),
        requested_at=st.integers(0, 2**53),
        attempt=opt_int,
        delivered_at=opt_int,
        reason=opt_text,
    ),
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
    artifacts=st.lists(artifacts, max_size=2).map(tuple),
)


@settings(max_examples=300, deadline=None)
@given(tasks)
def test_task_codec_is_cattrs(task):
    expected = orjson.dumps({**plain.unstructure(task), "type": "task"})
    assert codec.dumps(task) == expected
    assert layout.encode(task) == expected
    assert layout.encode_task(task) == expected
    assert layout.decode_task(expected) == task == codec.loads(expected) == layout.TaskLoader()(expected)
    assert plain.structure(plain.unstructure(task), records.Task) == task
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
def test_plan_codec_is_cattrs(plan):
    data = plain.unstructure(plan)
    assert orjson.dumps(codec.converter.unstructure(plan)) == orjson.dumps(data)
    assert codec.converter.structure(orjson.loads(orjson.dumps(data)), records.Plan) == plan


def test_defaults_are_filled_like_cattrs():
    """An older record without the defaulted fields decodes as cattrs decodes it."""
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
    expected = plain.structure(orjson.loads(orjson.dumps(data)), records.Task)
    raw = orjson.dumps({**data, "type": "task"})
    assert layout.decode_task(raw) == expected == layout.TaskLoader()(raw)


def test_a_missing_field_without_a_default_is_refused_by_name():
    raw = orjson.dumps({"type": "task", "id": "t", "tenant": "x"})
    try:
        layout.decode_task(raw)
    except KeyError as exc:
        assert exc.args == ("status",)
    else:
        raise AssertionError("a task without a status was decoded")


def test_every_field_of_every_record_has_a_generated_hook():
    """A new record class nested in a task or a host gets generated hooks too (or the codec
    refuses to import, naming the field's type)."""
    seen, todo = set(), [records.Task, records.Host]
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.add(cls)
        assert cls in codec._unstructure_fns and cls in codec._structure_fns, cls
        for field in attrs.fields(attrs.resolve_types(cls)):
            todo.extend(t for t in (field.type, *typing.get_args(field.type)) if attrs.has(t))
            for arg in typing.get_args(field.type):
                todo.extend(t for t in typing.get_args(arg) if attrs.has(t))
    assert records.Message in seen and records.Reservation in seen


class Colour(enum.StrEnum):
    red = "red"


@attrs.frozen(kw_only=True)
class Painted:
    colour: Colour
    previous: Colour | None = None
    history: tuple[Colour, ...] = ()


def test_enum_fields_are_stored_by_value():
    """A field typed with an enum (a lifecycle's StrEnum) is stored as its value and
    structured by calling the enum, as cattrs does."""
    codec._generate(Painted)
    value = Painted(colour=Colour.red, previous=None, history=(Colour.red,))
    data = codec.converter.unstructure(value)
    assert (
        orjson.dumps(data)
        == orjson.dumps(plain.unstructure(value))
        == b'{"colour":"red","previous":null,"history":["red"]}'
    )
    back = codec.converter.structure(orjson.loads(orjson.dumps(data)), Painted)
    assert back == value and type(back.colour) is Colour and type(back.history[0]) is Colour


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
    events.ArtifactStored: st.builds(events.ArtifactStored, at=st.integers(0, 2**53), task_id=text, artifact=artifacts),
    events.ArtifactsPurged: st.builds(
        events.ArtifactsPurged,
        at=st.integers(0, 2**53),
        task_id=text,
        artifacts=st.lists(artifacts, max_size=3).map(tuple),
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
    tuple[records.StepOutcome, ...] | None: st.none() | st.lists(outcomes, max_size=3).map(tuple),
}


def _flat(cls):
    import attrs

    return st.builds(cls, **{f.name: _FLAT[f.type] for f in attrs.fields(attrs.resolve_types(cls))})


any_event = st.one_of(
    *(event_strategies[cls] if cls in event_strategies else _flat(cls) for cls in codec.EVENT_TAGS.values())
)


@settings(max_examples=400, deadline=None)
@given(any_event)
def test_event_encoders_are_cattrs(event):
    assert (
        layout.encode(event)
        == codec.dumps(event)
        == orjson.dumps({**plain.unstructure(event), "type": codec._TAG_OF[type(event)]})
    )
    assert layout.decode_event(layout.encode(event)) == event


def test_an_unknown_key_is_refused_by_name():
    plan = records.Plan(steps=(records.Step(id="a", action="tap"),))
    task = records.Task(
        id="t",
        tenant="x",
        status=TaskStatus.queued,
        plan=plan,
        requirements=records.Requirements(),
        priority=0,
        max_attempts=1,
        labels={},
        idempotency_key=None,
        created_at=0,
        updated_at=0,
        seq=1,
    )
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
        return records.Task(
            id=f"t{n}",
            tenant="x",
            status=TaskStatus.queued,
            plan=plan,
            requirements=records.Requirements(),
            priority=0,
            max_attempts=1,
            labels={},
            idempotency_key=None,
            created_at=0,
            updated_at=0,
            seq=n,
        )

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
def test_host_codec_is_cattrs(host):
    assert layout.encode(host) == codec.dumps(host) == orjson.dumps({**plain.unstructure(host), "type": "host"})
    assert layout.decode_host(layout.encode(host)) == host
