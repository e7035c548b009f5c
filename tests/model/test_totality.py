"""Totality: every (state, command) gives a new state or a typed rejection, nothing else.

States come from random command sequences over small pools of ids (so commands collide,
go stale and repeat); the final command is any command at all, including ones naming
tasks, attempts, hosts and leases that do not exist.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from amc.core import invariants, kernel
from amc.core.commands import (
    CancelTask,
    ClaimTask,
    ExpireLeases,
    RegisterHost,
    RenewLease,
    ReportResult,
    StartAttempt,
    SubmitTask,
)
from amc.core.errors import Code, Rejection
from amc.core.records import DeviceSpec, Plan, Requirements, Step, StepOutcome
from amc.core.state import State

TASK_IDS = st.sampled_from(("t1", "t2", "t3", "nope"))
HOST_IDS = st.sampled_from(("h1", "h2", "ghost"))
LEASE_IDS = st.sampled_from(("L1", "L2", "L3", "L4", "bogus"))
TENANTS = st.sampled_from(("acme", "globex"))
PLAN = Plan(steps=(Step(id="a", action="wait"), Step(id="b", action="wait")))
NOW = st.integers(0, 100_000)

commands = st.one_of(
    st.builds(
        SubmitTask,
        now=NOW,
        task_id=TASK_IDS,
        tenant=TENANTS,
        plan=st.just(PLAN),
        requirements=st.sampled_from((Requirements(), Requirements(serial="d2"), Requirements(attributes={"m": "x"}))),
        priority=st.integers(-2, 2),
        max_attempts=st.integers(1, 3),
        idempotency_key=st.sampled_from((None, "k")),
    ),
    st.builds(CancelTask, now=NOW, task_id=TASK_IDS, tenant=st.one_of(st.none(), TENANTS)),
    st.builds(
        RegisterHost,
        now=NOW,
        host_id=HOST_IDS,
        devices=st.lists(st.sampled_from(("d1", "d2", "d3")), unique=True).map(
            lambda serials: tuple(DeviceSpec(serial=s, attributes={"m": "x"}) for s in serials)
        ),
    ),
    st.builds(
        ClaimTask,
        now=NOW,
        host_id=HOST_IDS,
        lease_id=LEASE_IDS,
        lease_ms=st.integers(1, 20_000),
        devices=st.one_of(st.none(), st.just(("d2",))),
    ),
    st.builds(StartAttempt, now=NOW, host_id=HOST_IDS, task_id=TASK_IDS, attempt=st.integers(0, 4), lease_id=LEASE_IDS),
    st.builds(RenewLease, now=NOW, host_id=HOST_IDS, task_id=TASK_IDS, attempt=st.integers(0, 4), lease_id=LEASE_IDS),
    st.builds(
        ReportResult,
        now=NOW,
        host_id=HOST_IDS,
        task_id=TASK_IDS,
        attempt=st.integers(0, 4),
        lease_id=LEASE_IDS,
        status=st.sampled_from(("done", "failed", "cancelled")),
        steps=st.sampled_from(
            (
                None,
                (StepOutcome(id="a", status="completed"), StepOutcome(id="b", status="failed")),
                (StepOutcome(id="zz", status="completed"),),
            )
        ),
    ),
    st.builds(ExpireLeases, now=NOW),
)


@settings(max_examples=400, deadline=None)
@given(history=st.lists(commands, max_size=25), final=commands)
def test_every_command_gives_a_state_or_a_typed_rejection(history, final):
    state, clock = State(), 0
    for command in [*history, final]:
        clock += command.now % 5_000  # time moves forward by a random amount
        command = type(command)(**{**_fields(command), "now": clock})
        kernel.execute(state, ExpireLeases(now=clock))
        before = state.records_copy()
        decision = kernel.decide(state, command)  # must not raise
        assert state == before, "decide mutated the state"
        if decision.accepted:
            assert decision.reply is not None
            for event in decision.events:
                kernel.apply(state, event)
            invariants.check(state, before, clock)
        else:
            assert isinstance(decision.rejection, Rejection) and isinstance(decision.rejection.code, Code)
            assert decision.events == ()


def _fields(command) -> dict:
    import attrs

    return attrs.asdict(command, recurse=False)
