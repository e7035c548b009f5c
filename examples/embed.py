"""Embedding amc's kernel in another scheduler: the whole lifecycle of one task, in memory.

The caller supplies what the kernel never makes up itself: the time (`now`, in
milliseconds), new ids, and a place to keep the events (here, a list).
"""

from amc.core import kernel
from amc.core.commands import CancelTask, ClaimTask, RegisterHost, RenewLease, ReportResult, StartAttempt, SubmitTask
from amc.core.lifecycle import CancellationState, TaskStatus
from amc.core.records import DeviceSpec, Plan, Requirements, Step
from amc.core.state import State

state, log, now = State(), [], 1_764_460_800_000


def run(command):
    decision = kernel.execute(state, command)  # expires what is due at command.now, then decides and applies
    log.extend(decision.events)  # a store would persist these, in order
    if not decision.accepted:
        raise RuntimeError(f"{decision.rejection.code.name}: {decision.rejection.detail}")
    return decision.reply


run(
    RegisterHost(
        now=now, host_id="lab-1", devices=(DeviceSpec(serial="emulator-5554", attributes={"model": "Pixel 7"}),)
    )
)
plan = Plan(steps=(Step(id="open", action="launch", args={"package": "com.android.settings"}),))
run(
    SubmitTask(
        now=now, task_id="t1", tenant="acme", plan=plan, requirements=Requirements(attributes={"model": "Pixel 7"})
    )
)

lease = run(ClaimTask(now=now + 5, host_id="lab-1", lease_id="lease-1", lease_ms=30_000))
host = dict(host_id="lab-1", task_id=lease.task_id, attempt=lease.attempt, lease_id=lease.lease_id)
run(StartAttempt(now=now + 10, **host))
run(CancelTask(now=now + 20, task_id="t1", tenant="acme"))  # in flight: recorded as pending
renewal = run(RenewLease(now=now + 30, **host))
assert renewal.cancel_requested  # the host learns it at its next renewal
run(ReportResult(now=now + 40, **host, status=TaskStatus.cancelled))

task = state.tasks["t1"]
print(task.status, task.cancellation.state, [type(e).__name__ for e in log])
assert (task.status, task.cancellation.state) == (TaskStatus.cancelled, CancellationState.completed)
assert kernel.replay(log) == state  # the log alone rebuilds the state
