"""The four rules a run's history must satisfy, judged only from what the clients saw.

The uncertainty
===============

A client knows when it sent a request (``start``) and when the answer was in (``end``); the
server acted at some unknown instant in between. The rules are written so that they never
report a violation this uncertainty could explain: a violation is reported only when it
happened wherever, inside each request's window, the server actually acted.

Rule 1, one holder per task, and the lease a grant promises
-----------------------------------------------------------

A grant is a 2xx answer to a claim, a start or a renewal of one attempt's lease (its
``lease_id``). The attempt's lease length ``L`` is the claim answer's ``lease_seconds``; the
server extends the lease to (its time of the grant) + ``L``. The grant happened at or after
the request's ``start``, so the lease runs at least until ``start + L``, and the client holds
it for certain once the answer is in. So a grant ``G`` promises the **certain interval**

    C(G) = [G.end, G.start + L - slack)

where ``slack`` covers the server clock's millisecond resolution and any rate or offset
difference between the clocks (default 5 ms on one machine; add the clocks' worst offset
when the histories come from several machines). C(G) may be empty: an answer slower than
the lease promises nothing for certain. An attempt is held for certain over the union of
its grants' intervals, each cut at the ``start`` of the first 2xx result or release of that
lease (the host gave the attempt up then, at the latest), or, for a session, of the first 2xx
end of the session (``POST /v1/tasks/{id}/end``: the protocol lets its caller end the attempt
before the lease's term). A 4xx answer to a renewal does
not cut what earlier grants promised: a server that ends a lease before the term it granted
has broken the promise.

    Rule 1: no two attempts of one task are held for certain at overlapping times.

In particular no two hosts. Two intervals of one attempt may overlap (renewals do).

Rule 2: no device held two attempts at once
-------------------------------------------

A claim answer names the device (``device``) of the host the claim was made for. Two
attempts (of any tasks) of one device must not be held for certain at overlapping times,
with the same intervals as rule 1.

Rule 3: every acknowledged command is in the final state
--------------------------------------------------------

Read over HTTP once every client has stopped (`amc.check.final`):

- a 2xx submit: its task exists, with the tenant the answer named;
- a 2xx claim: the task has that attempt, of that host and device;
- a 2xx start: that attempt was dispatched (``dispatched_at`` set);
- 2xx renewals: the attempt's ``renewals`` is at least the number acknowledged;
- a 2xx result: the attempt's outcome and the task's status are the reported status;
- a 2xx release: the attempt's outcome is ``released``;
- a 200 cancel: the task is ``cancelled``; a 202 cancel: the task has a cancellation;
- a 201 message: the task lists that message.

Rule 4: each task's statuses follow its lifecycle
-------------------------------------------------

Every 2xx answer that shows a task's status is an observation ``(status, n)`` of the task
at some instant of the request's window, where ``n`` is its number of attempts (a claim's
or a grant's attempt; a task document's ``attempts``; unknown for a 202 cancel), and the
final state is the last one. For every two observations A and B of one task where A's
answer was in before B was sent (A.end < B.start, so A's instant came first), B must be
reachable from A by the moves of ``amc.core.lifecycle.TASK``, where a ``claim`` adds an
attempt and no other move does. A terminal status is reachable only from itself, and the
number of attempts never goes down.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Iterator
from typing import Any

import attrs

from amc.core.lifecycle import TASK, TaskStatus

from .final import FinalState
from .operations import History, Operation

DEFAULT_SLACK = 0.005


@attrs.frozen
class Violation:
    rule: str  # "one holder", "one attempt per device", "acknowledged", "lifecycle"
    detail: str


@attrs.frozen
class Held:
    """One attempt's lease as a client believed it, with its certain intervals."""

    task: str
    attempt: int
    lease_id: str
    host: str
    device: str
    intervals: tuple[tuple[float, float], ...]


@attrs.define
class Report:
    operations: int = 0
    acknowledged: int = 0
    unknown: int = 0
    attempts: int = 0
    checked: collections.Counter[str] = attrs.Factory(collections.Counter)  # rule -> facts checked
    violations: list[Violation] = attrs.Factory(list)

    @property
    def ok(self) -> bool:
        return not self.violations

    def summary(self) -> str:
        checked = ", ".join(f"{rule} {count}" for rule, count in sorted(self.checked.items()))
        return (
            f"{self.operations} operations ({self.acknowledged} acknowledged, {self.unknown} without an answer), "
            f"{self.attempts} attempts held; checked: {checked}; violations: {len(self.violations)}"
        )


def check(history: History, final: FinalState | None, slack: float = DEFAULT_SLACK) -> Report:
    """Run every rule over `history` (rule 3 only with a `final` state)."""
    operations = history.operations
    report = Report(len(operations), sum(op.ok for op in operations), history.unknown)
    held = holdings(operations, slack)
    report.attempts = len(held)
    report.violations += one_holder_per_task(held, report)
    report.violations += one_attempt_per_device(held, report)
    if final is not None:
        report.violations += acknowledged_in_final(operations, final, report)
    report.violations += statuses_follow_lifecycle(operations, final, report)
    return report


# --- rules 1 and 2 ------------------------------------------------------------------------


def holdings(operations: Iterable[Operation], slack: float = DEFAULT_SLACK) -> list[Held]:
    """Each claimed attempt with the intervals its client held it for certain."""
    claims: dict[str, Operation] = {}  # lease id -> its claim
    grants: dict[str, list[Operation]] = collections.defaultdict(list)
    ends: dict[str, float] = {}  # lease id -> the start of its first acknowledged result or release
    session_ends: dict[str, float] = {}  # task -> the start of its first acknowledged end (a session)
    for op in operations:
        if not op.ok:
            continue
        if op.kind == "claim" and "lease_id" in op.answer:
            claims[op.answer["lease_id"]] = op
            grants[op.answer["lease_id"]].append(op)
        elif op.kind in ("start", "renew") and "lease_id" in op.request:
            grants[op.request["lease_id"]].append(op)
        elif op.kind in ("result", "release") and "lease_id" in op.request:
            lease = op.request["lease_id"]
            ends[lease] = min(ends.get(lease, op.start), op.start)
        elif op.kind == "end" and op.task is not None:
            session_ends[op.task] = min(session_ends.get(op.task, op.start), op.start)
    held = []
    for lease_id, claim in claims.items():
        length = float(claim.answer["lease_seconds"])
        end = min(ends.get(lease_id, float("inf")), session_ends.get(claim.answer["task_id"], float("inf")))
        intervals = []
        for grant in grants[lease_id]:
            low, high = grant.end, min(grant.start + length - slack, end)
            if low < high:
                intervals.append((low, high))
        held.append(
            Held(
                task=claim.answer["task_id"],
                attempt=int(claim.answer["attempt"]),
                lease_id=lease_id,
                host=claim.host or claim.client,
                device=str(claim.answer.get("device", "")),
                intervals=tuple(sorted(intervals)),
            )
        )
    return held


def _overlap(a: Held, b: Held) -> tuple[float, float] | None:
    """The first stretch of time both held for certain, if any."""
    for low_a, high_a in a.intervals:
        for low_b, high_b in b.intervals:
            low, high = max(low_a, low_b), min(high_a, high_b)
            if low < high:
                return low, high
    return None


def _pairs(groups: dict[str, list[Held]]) -> Iterator[tuple[str, Held, Held]]:
    for key, members in groups.items():
        members.sort(key=lambda h: h.intervals[0][0] if h.intervals else 0.0)
        for i, a in enumerate(members):
            for b in members[i + 1 :]:
                if a.lease_id != b.lease_id:
                    yield key, a, b


def _describe(h: Held) -> str:
    return f"attempt {h.attempt} of {h.task} (host {h.host}, device {h.device}, lease {h.lease_id})"


def one_holder_per_task(held: list[Held], report: Report) -> list[Violation]:
    by_task: dict[str, list[Held]] = collections.defaultdict(list)
    for h in held:
        by_task[h.task].append(h)
    found = []
    for task, a, b in _pairs(by_task):
        report.checked["one holder"] += 1
        if (both := _overlap(a, b)) is not None:
            found.append(
                Violation(
                    "one holder",
                    f"task {task}: {_describe(a)} and {_describe(b)} were both held for certain "
                    f"for {both[1] - both[0]:.3f} s (from {both[0]:.3f})",
                )
            )
    return found


def one_attempt_per_device(held: list[Held], report: Report) -> list[Violation]:
    by_device: dict[str, list[Held]] = collections.defaultdict(list)
    for h in held:
        by_device[f"{h.host}/{h.device}"].append(h)
    found = []
    for device, a, b in _pairs(by_device):
        report.checked["one attempt per device"] += 1
        if (both := _overlap(a, b)) is not None:
            found.append(
                Violation(
                    "one attempt per device",
                    f"device {device}: {_describe(a)} and {_describe(b)} were both held for certain "
                    f"for {both[1] - both[0]:.3f} s (from {both[0]:.3f})",
                )
            )
    return found


# --- rule 3 -------------------------------------------------------------------------------


def acknowledged_in_final(operations: Iterable[Operation], final: FinalState, report: Report) -> list[Violation]:
    found: list[Violation] = []
    renewals: collections.Counter[tuple[str, int]] = collections.Counter()

    def expect(holds: bool, what: str, op: Operation) -> None:
        report.checked["acknowledged"] += 1
        if not holds:
            found.append(Violation("acknowledged", f"{what} ({op.kind} by {op.client}, {op.source})"))

    def attempt_of(task_id: str | None, number: int | None) -> dict[str, Any] | None:
        task = final.tasks.get(task_id or "")
        if task is None or number is None or not 1 <= number <= len(task["attempts"]):
            return None
        attempt: dict[str, Any] = task["attempts"][number - 1]
        return attempt

    for op in operations:
        if not op.ok:
            continue
        task_id = op.task_id
        task = final.tasks.get(task_id or "")
        if op.kind == "submit":
            tenant = op.answer.get("tenant")
            expect(task is not None and tenant in (None, task["tenant"]), f"submitted task {task_id} is missing", op)
        elif op.kind == "claim" and "lease_id" in op.answer:  # a 204 assigned nothing
            number = op.answer.get("attempt")
            got = attempt_of(task_id, number)
            same = got is not None and got["host_id"] == (op.host or got["host_id"])
            same = same and got is not None and got["device"] == op.answer.get("device", got["device"])
            expect(same, f"the claim of {task_id}/{number} is not in the final state: {got}", op)
        elif op.kind == "start":
            got = attempt_of(task_id, op.attempt)
            expect(got is not None and got["dispatched_at"] is not None, f"start of {task_id}/{op.attempt}: {got}", op)
        elif op.kind == "renew" and task_id is not None and op.attempt is not None:
            renewals[(task_id, op.attempt)] += 1
        elif op.kind == "result":
            status = op.request.get("status")
            got = attempt_of(task_id, op.attempt)
            ended = got is not None and got["outcome"] == status and task is not None and task["status"] == status
            expect(ended, f"result {status} of {task_id}/{op.attempt}: task {task and task['status']}, {got}", op)
        elif op.kind == "release":
            got = attempt_of(task_id, op.attempt)
            expect(got is not None and got["outcome"] == "released", f"release of {task_id}/{op.attempt}: {got}", op)
        elif op.kind == "cancel":
            if op.status == 200:
                expect(
                    task is not None and task["status"] == "cancelled", f"cancel (200) of {task_id}: not cancelled", op
                )
            else:
                cancelled = task is not None and task["cancellation"] is not None
                expect(cancelled, f"cancel (202) of {task_id}: no cancellation", op)
        elif op.kind == "message" and op.status == 201:
            listed = final.messages.get(task_id or "")
            if listed is not None:
                expect(op.answer.get("id") in listed, f"message {op.answer.get('id')} of {task_id} is missing", op)
    for (task_id, number), count in renewals.items():
        report.checked["acknowledged"] += 1
        got = attempt_of(task_id, number)
        if got is None or got["renewals"] < count:
            found.append(Violation("acknowledged", f"{count} renewals of {task_id}/{number} acknowledged: {got}"))
    return found


def message_tasks(operations: Iterable[Operation]) -> set[str]:
    """The tasks whose messages the final state must list (for `read_final_state`)."""
    return {op.task_id for op in operations if op.kind == "message" and op.status == 201 and op.task_id}


# --- rule 4 -------------------------------------------------------------------------------

Observation = tuple[float, float, TaskStatus, int | None, str]  # start, end, status, attempts, where


def observations(operations: Iterable[Operation], final: FinalState | None) -> dict[str, list[Observation]]:
    """Each task's observed statuses, with the window of the request that saw each."""
    seen: dict[str, list[Observation]] = collections.defaultdict(list)
    for op in operations:
        status = TaskStatus.assigned if op.kind == "claim" and "lease_id" in op.answer else op.answer.get("status")
        if not op.ok or op.task_id is None or status not in TaskStatus.__members__:
            continue
        if op.kind == "claim":
            count = op.answer.get("attempt")
        elif op.kind in ("start", "renew"):
            count = op.attempt
        elif op.kind == "cancel" and op.status == 202:
            count = None  # the answer is the task, but a pending cancel says no more than "in flight"
        else:
            count = op.answer.get("attempts")
        if op.kind == "result" and op.request.get("status") in TaskStatus.__members__:
            status = op.request["status"]
        seen[op.task_id].append(
            (op.start, op.end, TaskStatus(str(status)), count, f"{op.kind} by {op.client}, {op.source}")
        )
    if final is not None:
        for task_id, task in final.tasks.items():
            if task_id in seen:
                end = float("inf")
                seen[task_id].append((end, end, TaskStatus(task["status"]), len(task["attempts"]), "the final state"))
    return seen


def _moves() -> dict[TaskStatus, set[tuple[TaskStatus, int]]]:
    """Status -> (status, attempts added) one move away, whatever the guards."""
    moves: dict[TaskStatus, set[tuple[TaskStatus, int]]] = collections.defaultdict(set)
    for (state, event), targets in TASK.items():
        for _guards, destination in targets:
            moves[TaskStatus(state)].add((destination, 1 if event == "claim" else 0))
    return moves


MOVES = _moves()


def reachable(a: TaskStatus, a_count: int | None, b: TaskStatus, b_count: int | None) -> bool:
    """Whether a task seen as (a, a_count) can later be seen as (b, b_count)."""
    if a_count is not None and b_count is not None:
        if b_count < a_count:
            return False
        budget: int | None = b_count - a_count
    else:
        budget = None  # the attempts are not known on both sides: statuses only
    frontier = [(a, 0)]
    visited = {(a, 0)}
    while frontier:
        status, added = frontier.pop()
        if status == b and (budget is None or added == budget):
            return True
        for destination, more in MOVES.get(status, ()):
            step = (destination, added + more if budget is not None else 0)
            if (budget is None or step[1] <= budget) and step not in visited:
                visited.add(step)
                frontier.append(step)
    return False


def statuses_follow_lifecycle(
    operations: Iterable[Operation], final: FinalState | None, report: Report
) -> list[Violation]:
    """Rule 4. Observations of one (status, attempts) form a group; group A comes before group
    B when some A's answer was in before some B was sent: the earliest end of A before the
    latest start of B. So each pair of groups is checked once, however many renewals."""
    found = []
    for task_id, seen in observations(operations, final).items():
        groups: dict[tuple[TaskStatus, int | None], tuple[Observation, Observation]] = {}
        for obs in seen:
            key = (obs[2], obs[3])
            first_end, last_start = groups.get(key, (obs, obs))
            groups[key] = (min(first_end, obs, key=lambda o: o[1]), max(last_start, obs, key=lambda o: o[0]))
        for (a, a_count), (a_first, _) in groups.items():
            for (b, b_count), (_, b_last) in groups.items():
                if (a, a_count) == (b, b_count) or not a_first[1] < b_last[0]:
                    continue
                report.checked["lifecycle"] += 1
                if not reachable(a, a_count, b, b_count):
                    found.append(
                        Violation(
                            "lifecycle",
                            f"task {task_id}: seen {a} with {a_count} attempt(s) ({a_first[4]}), then {b} with "
                            f"{b_count} attempt(s) ({b_last[4]}): no move of the lifecycle leads there",
                        )
                    )
    return found
