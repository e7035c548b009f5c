"""The state's indexes built in bulk at start-up equal the ones the kernel keeps live."""

from __future__ import annotations

import heapq

from hypothesis import given, settings
from hypothesis import strategies as st

from amc.core import kernel
from amc.core.commands import CancelTask, ClaimTask, RegisterHost, ReportResult, StartAttempt, SubmitTask
from amc.core.kernel import Assignment
from amc.core.records import DeviceSpec, Requirements
from amc.core.state import ClaimQueue, State
from tests.model.world import PLAN

REQUIREMENTS = (
    Requirements(),
    Requirements(attributes={"model": "pixel"}),
    Requirements(attributes={"model": "pixel", "sdk": "34"}),
    Requirements(serial="s1"),
    Requirements(serial="s2", attributes={"model": "pixel"}),
)

submits = st.lists(st.tuples(st.integers(-3, 3), st.sampled_from(range(len(REQUIREMENTS))), st.booleans()), max_size=40)


def groups_of(queue: ClaimQueue) -> dict:
    """Every group's entries in the order its heap gives them up, each heap checked."""
    found = {}
    for serial, groups in ((None, queue._open), *queue._pinned.items()):
        for key, (requirements, heap) in groups.items():
            assert all(heap[(i - 1) // 2] <= heap[i] for i in range(1, len(heap))), "not a heap"
            assert requirements.key() == key
            found[serial, key] = [heapq.heappop(heap) for _ in range(len(heap))]
    return found


@settings(max_examples=200, deadline=None)
@given(submits)
def test_a_queue_built_in_bulk_equals_the_one_pushed_task_by_task(plan):
    state = State()
    for n, (priority, requirements, cancelled) in enumerate(plan):
        task_id = f"t{n}"
        kernel.execute(
            state,
            SubmitTask(
                now=n,
                task_id=task_id,
                tenant="acme",
                plan=PLAN,
                priority=priority,
                requirements=REQUIREMENTS[requirements],
            ),
        )
        if cancelled:
            kernel.execute(state, CancelTask(now=n, task_id=task_id, tenant="acme"))
    pushed = ClaimQueue()
    for task in state.tasks.values():
        if task.claimable:
            pushed.push(task)
    assert groups_of(ClaimQueue.of(task for task in state.tasks.values() if task.claimable)) == groups_of(pushed)


@settings(max_examples=100, deadline=None)
@given(submits)
def test_a_rebuilt_state_hands_out_tasks_in_the_same_order(plan):
    state = State()
    kernel.execute(
        state,
        RegisterHost(
            now=0,
            host_id="h1",
            devices=(
                DeviceSpec(serial="s1", attributes={"model": "pixel", "sdk": "34"}),
                DeviceSpec(serial="s2", attributes={"model": "pixel"}),
                DeviceSpec(serial="s3"),
            ),
        ),
    )
    for n, (priority, requirements, _) in enumerate(plan):
        kernel.execute(
            state,
            SubmitTask(
                now=n,
                task_id=f"t{n}",
                tenant="acme",
                plan=PLAN,
                priority=priority,
                requirements=REQUIREMENTS[requirements],
            ),
        )
    rebuilt = State.from_records(state.tasks.values(), state.hosts.values())
    orders = []
    for live in (state, rebuilt):
        order = []
        for n in range(len(plan) + 1):
            decision = kernel.execute(live, ClaimTask(now=100, host_id="h1", lease_id=f"L{n}", lease_ms=1_000))
            assignment = decision.reply
            if isinstance(assignment, Assignment):  # finish it, so the next claim finds the device free
                lease = dict(now=100, host_id="h1", task_id=assignment.task_id, attempt=1, lease_id=f"L{n}")
                kernel.execute(live, StartAttempt(**lease))
                assert kernel.execute(live, ReportResult(**lease, status="done")).rejection is None
                order.append(assignment.task_id)
        orders.append(order)
    assert orders[0] == orders[1]
    assert len(orders[0]) == len(plan)  # every task was handed out, the whole order compared
