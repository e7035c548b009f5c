"""Every record and event type, written into a real store file and read back."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amc.adapters import codec
from amc.adapters.lmdb import layout, reads
from amc.adapters.lmdb.store import Store
from amc.core import events as ev
from amc.core import records as rec
from amc.core.lifecycle import AttemptState, CancellationState, MessageState, StepStatus, TaskStatus

text = st.text(max_size=8)
ids = st.text(min_size=1, max_size=12)
times = st.integers(0, 2**62)
small = st.integers(-(2**31), 2**31)
maybe = lambda s: st.none() | s  # noqa: E731
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=6,
)
json_objects = st.dictionaries(text, json_values, max_size=3)
str_maps = st.dictionaries(text, text, max_size=3)

steps = st.builds(rec.Step, id=ids, action=text, args=json_objects)
plans = st.builds(rec.Plan, steps=st.lists(steps, min_size=1, max_size=3).map(tuple)) | st.builds(
    rec.Plan,
    stages=st.lists(st.builds(rec.Stage, id=ids, steps=st.lists(steps, max_size=2).map(tuple)), max_size=2).map(tuple),
)
requirements = st.builds(rec.Requirements, serial=maybe(ids), attributes=str_maps)
outcomes = st.builds(
    rec.StepOutcome,
    id=ids,
    status=st.sampled_from(list(StepStatus)),
    reason=maybe(text),
    started_at=maybe(times),
    ended_at=maybe(times),
    output=maybe(text),
)
outcome_lists = maybe(st.lists(outcomes, max_size=3).map(tuple))
attempts = st.builds(
    rec.Attempt,
    number=st.integers(1, 100),
    host_id=ids,
    device=ids,
    lease_id=ids,
    lease_ms=times,
    assigned_at=times,
    lease_expires_at=times,
    dispatched_at=maybe(times),
    renewals=st.integers(0, 10**6),
    ended_at=maybe(times),
    outcome=maybe(
        st.sampled_from(
            [
                AttemptState.done,
                AttemptState.failed,
                AttemptState.cancelled,
                AttemptState.expired,
                AttemptState.released,
            ]
        )
    ),
    steps=outcome_lists,
    release_reason=maybe(ids),
)
cancellations = st.builds(
    rec.Cancellation,
    state=st.sampled_from([CancellationState.pending, CancellationState.completed, CancellationState.unfulfilled]),
    requested_at=times,
    attempt=maybe(st.integers(1, 100)),
    delivered_at=maybe(times),
    reason=maybe(text),
)
results = st.builds(
    rec.Result,
    status=st.sampled_from([TaskStatus.done, TaskStatus.failed, TaskStatus.cancelled]),
    attempt=maybe(st.integers(1, 100)),
    reason=st.sampled_from(
        ["reported", "cancelled_while_queued", "lease_expired_with_cancellation", "attempts_exhausted"]
    ),
    metadata=json_objects,
    steps=outcome_lists,
    recorded_at=times,
)
boundaries = maybe(st.builds(rec.Boundary, before_step=maybe(ids)))
messages = st.builds(
    rec.Message,
    id=ids,
    intent=st.sampled_from(["steer", "follow_up", "pause", "resume"]),
    text=maybe(text),
    data=maybe(json_objects),
    state=st.sampled_from(list(MessageState)),
    created_at=times,
    attempt=maybe(st.integers(1, 100)),
    delivered_at=maybe(times),
    admitted_at=maybe(times),
    completed_at=maybe(times),
    boundary=boundaries,
    detail=maybe(text),
    successor=maybe(ids),
)
follow_ups = st.builds(rec.FollowUp, message_id=ids, text=maybe(text), data=maybe(json_objects))
message_ids = st.lists(ids, min_size=1, max_size=3).map(tuple)
tasks = st.builds(
    rec.Task,
    id=ids,
    tenant=ids,
    status=st.sampled_from(list(TaskStatus)),
    plan=plans,
    requirements=requirements,
    priority=small,
    max_attempts=st.integers(1, 100),
    labels=str_maps,
    idempotency_key=maybe(text),
    created_at=times,
    updated_at=times,
    seq=st.integers(0, 2**40),
    attempts=st.lists(attempts, max_size=3).map(tuple),
    cancellation=maybe(cancellations),
    result=maybe(results),
    paused=st.booleans(),
    messages=st.lists(messages, max_size=3).map(tuple),
    admissions=st.lists(ids, max_size=2).map(tuple),
    follow_up_of=maybe(ids),
    collected=st.lists(follow_ups, max_size=2).map(tuple),
)
devices = st.builds(
    rec.Device,
    serial=ids,
    attributes=str_maps,
    online=st.booleans(),
    reservation=maybe(st.builds(rec.Reservation, task_id=ids, attempt=st.integers(1, 100))),
)
hosts = st.builds(rec.Host, id=ids, updated_at=times, devices=st.lists(devices, max_size=3).map(tuple))
specs = st.lists(st.builds(rec.DeviceSpec, serial=ids, attributes=str_maps), max_size=3).map(tuple)

ARTIFACTS = st.builds(
    rec.Artifact,
    id=ids,
    attempt=st.integers(1, 9),
    step=ids,
    name=ids,
    content_type=text,
    size=st.integers(0, 2**40),
    sha256=st.sampled_from(["a" * 64, "0" * 64]),
    created_at=times,
)
EVENTS = {
    ev.TaskSubmitted: st.builds(
        ev.TaskSubmitted,
        at=times,
        task_id=ids,
        tenant=ids,
        plan=plans,
        requirements=requirements,
        priority=small,
        max_attempts=st.integers(1, 100),
        labels=str_maps,
        idempotency_key=maybe(text),
        follow_up_of=maybe(ids),
        collected=st.lists(follow_ups, max_size=2).map(tuple),
    ),
    ev.HostRegistered: st.builds(ev.HostRegistered, at=times, host_id=ids, devices=specs),
    ev.TaskAssigned: st.builds(
        ev.TaskAssigned,
        at=times,
        task_id=ids,
        attempt=st.integers(1, 100),
        host_id=ids,
        device=ids,
        lease_id=ids,
        lease_ms=times,
        lease_expires_at=times,
    ),
    ev.AttemptStarted: st.builds(
        ev.AttemptStarted, at=times, task_id=ids, attempt=st.integers(1, 9), lease_expires_at=times
    ),
    ev.LeaseRenewed: st.builds(
        ev.LeaseRenewed, at=times, task_id=ids, attempt=st.integers(1, 9), lease_expires_at=times
    ),
    ev.LeaseExtended: st.builds(
        ev.LeaseExtended, at=times, task_id=ids, attempt=st.integers(1, 9), lease_expires_at=times
    ),
    ev.CancellationRequested: st.builds(
        ev.CancellationRequested, at=times, task_id=ids, attempt=maybe(st.integers(1, 9)), reason=maybe(text)
    ),
    ev.CancellationDelivered: st.builds(ev.CancellationDelivered, at=times, task_id=ids, attempt=st.integers(1, 9)),
    ev.LeaseExpired: st.builds(ev.LeaseExpired, at=times, task_id=ids, attempt=st.integers(1, 9)),
    ev.AttemptReleased: st.builds(
        ev.AttemptReleased,
        at=times,
        task_id=ids,
        attempt=st.integers(1, 9),
        reason=maybe(text),
        steps=outcome_lists,
    ),
    ev.TaskRequeued: st.builds(ev.TaskRequeued, at=times, task_id=ids),
    ev.TaskEnded: st.builds(
        ev.TaskEnded,
        at=times,
        task_id=ids,
        status=st.sampled_from([TaskStatus.done, TaskStatus.failed, TaskStatus.cancelled]),
        reason=text,
        attempt=maybe(st.integers(1, 9)),
        metadata=json_objects,
        steps=outcome_lists,
    ),
    ev.MessagePosted: st.builds(
        ev.MessagePosted,
        at=times,
        task_id=ids,
        message_id=ids,
        intent=st.sampled_from(["steer", "follow_up", "pause", "resume"]),
        text=maybe(text),
        data=maybe(json_objects),
    ),
    ev.MessagesDelivered: st.builds(
        ev.MessagesDelivered, at=times, task_id=ids, attempt=st.integers(1, 9), message_ids=message_ids
    ),
    ev.MessageAcknowledged: st.builds(
        ev.MessageAcknowledged,
        at=times,
        task_id=ids,
        attempt=st.integers(1, 9),
        message_id=ids,
        state=st.sampled_from([MessageState.admitted, MessageState.completed, MessageState.rejected]),
        boundary=boundaries,
        detail=maybe(text),
    ),
    ev.MessageApplied: st.builds(ev.MessageApplied, at=times, task_id=ids, message_id=ids),
    ev.MessagesNotAdmitted: st.builds(ev.MessagesNotAdmitted, at=times, task_id=ids, message_ids=message_ids),
    ev.FollowUpsCollected: st.builds(
        ev.FollowUpsCollected, at=times, task_id=ids, successor_id=ids, message_ids=message_ids
    ),
    ev.ArtifactStored: st.builds(ev.ArtifactStored, at=times, task_id=ids, artifact=ARTIFACTS),
    ev.ArtifactsPurged: st.builds(
        ev.ArtifactsPurged, at=times, task_id=ids, artifacts=st.lists(ARTIFACTS, max_size=3).map(tuple)
    ),
}


def test_every_event_type_has_a_strategy():
    assert set(EVENTS) == set(codec.EVENT_TAGS.values())


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    opened = Store.open(tmp_path_factory.mktemp("roundtrip") / "store")
    yield opened
    opened.close()


_seq = itertools.count(1)
_settings = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("event_type", sorted(EVENTS, key=lambda t: t.__name__), ids=lambda t: t.__name__)
def test_events_round_trip_through_the_log(store, event_type):
    @_settings
    @given(EVENTS[event_type])
    def check(event):
        assert layout.encode(event) == codec.dumps(event)  # the store's fast path is the codec
        key = layout.u64(next(_seq))
        store.write(lambda txn: txn.put(key, layout.encode(event), db=store.log, append=True))
        with store.read() as txn:
            assert layout.decode_event(txn.get(key, db=store.log)) == event

    check()


def test_tasks_round_trip_through_the_records(store):
    @_settings
    @given(tasks)
    def check(task):
        assert layout.encode(task) == codec.dumps(task)

        def put(txn):
            txn.put(layout.task_key(task), layout.encode(task), db=store.tasks)
            txn.put(task.id.encode(), layout.task_key(task), db=store.task_ids)

        store.write(put)
        with store.read() as txn:
            assert reads.task(store, txn, task.id) == task

    check()


def test_hosts_round_trip_through_the_records(store):
    @_settings
    @given(hosts)
    def check(host):
        assert layout.encode(host) == codec.dumps(host)
        store.write(lambda txn: txn.put(host.id.encode(), layout.encode(host), db=store.hosts))
        with store.read() as txn:
            assert reads.host(store, txn, host.id) == host

    check()


@_settings
@given(tasks, hosts)
def test_records_are_stored_under_stable_tags_not_class_names(task, host):
    raw = layout.encode(task)
    assert raw.startswith(b"{") and b'"type":"task"' in raw
    assert layout.decode_task(raw) == task
    with pytest.raises(ValueError, match="expected a 'task' record"):
        layout.decode_task(layout.encode(host))


@_settings
@given(st.lists(tasks, min_size=1, max_size=4))
def test_the_start_up_loader_decodes_exactly_like_the_codec(batch):
    load = layout.TaskLoader()
    for task in batch + batch:  # the second pass hits the plan and requirements caches
        assert load(layout.encode(task)) == task


def test_the_start_up_loader_shares_equal_plans_and_refuses_unknown_fields():
    load = layout.TaskLoader()
    plan = rec.Plan(steps=(rec.Step(id="a", action="tap", args={"x": 1}),))
    first, second = (
        load(
            layout.encode(
                rec.Task(
                    id=i,
                    tenant="t",
                    status=TaskStatus.queued,
                    plan=plan,
                    requirements=rec.Requirements(),
                    priority=0,
                    max_attempts=1,
                    labels={},
                    idempotency_key=None,
                    created_at=0,
                    updated_at=0,
                    seq=n,
                )
            )
        )
        for n, i in enumerate(("t1", "t2"))
    )
    assert first.plan is second.plan and first.plan == plan
    raw = layout.encode(first).replace(b'"type":"task"', b'"type":"task","surprise":1')
    with pytest.raises(Exception) as refused:
        load(raw)
    assert "surprise" in str(refused.value)  # forbid_extra_keys, as in the codec
