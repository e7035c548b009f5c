"""Break the kernel on purpose, one rule at a time, and show which tests catch it.

Each mutant is a textual edit of one file in amc/core. For each, this script applies the
edit in a scratch copy of the repository, runs the model tests there, and lists the
tests that failed. A mutant that no test catches is a hole in the tests: the script
exits 1. The working tree is never touched.

Run: python tools/mutation_check.py [--only NAME] [-- extra pytest args]
"""

from __future__ import annotations

import argparse
import contextlib
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# name -> edits, each (file, text to find, replacement); each `find` must occur exactly once.
MUTANTS: dict[str, list[tuple[str, str, str]]] = {
    "expiry-with-pending-cancel-requeues": [(
        "amc/core/lifecycle.py",
        '''        _.assigned.to(_.cancelled, cond="cancellation_pending")
        | _.assigned.to(_.queued, cond="attempts_left")''',
        '''        _.assigned.to(_.queued, cond="attempts_left")''',
    )],
    "cancel-of-done-task-succeeds": [(
        "amc/core/kernel.py",
        '''    if task.status == TaskStatus.cancelled or task.cancellation_pending:''',
        '''    if task.status in (TaskStatus.cancelled, TaskStatus.done) or task.cancellation_pending:''',
    )],
    "stale-attempt-report-accepted": [(
        "amc/core/kernel.py",
        '''    refusal = check_ownership(task, attempt, c)
    if refusal is not None:
        return refusal
    if attempt.outcome''',
        '''    refusal = check_ownership(task, attempt, c)
    if refusal is not None and refusal.rejection.code is not Code.lease_replaced:
        return refusal
    if attempt.outcome''',
    )],
    "renewal-at-expiry-succeeds": [
        # Both layers: the lease check itself, and the expiry that runs before every command.
        ("amc/core/decisions.py",
         '''    if attempt.outcome == AttemptState.expired or now >= attempt.lease_expires_at:''',
         '''    if attempt.outcome == AttemptState.expired or now > attempt.lease_expires_at:'''),
        ("amc/core/kernel.py",
         '''    if (next_expiry := state.leases.next_expiry()) is None or next_expiry > now:''',
         '''    if (next_expiry := state.leases.next_expiry()) is None or next_expiry >= now:'''),
        ("amc/core/state.py",
         '''            if entry[0] > now:''',
         '''            if entry[0] >= now:'''),
    ],
    "queued-cancel-allows-later-attempt": [(
        "amc/core/kernel.py",
        '''    was_queued = task.status == TaskStatus.queued
    task = replace(task, status=e.status, result=result, updated_at=e.at)''',
        '''    was_queued = False
    task = replace(task, status=e.status, result=result, updated_at=e.at)''',
    )],
    "repeated-cancel-records-second-request": [(
        "amc/core/kernel.py",
        '''    if task.status == TaskStatus.cancelled or task.cancellation_pending:
        return Decision(reply=CancelAccepted(task.id, pending=task.cancellation_pending))''',
        '''    if task.status == TaskStatus.cancelled:
        return Decision(reply=CancelAccepted(task.id, pending=task.cancellation_pending))''',
    )],
    "renewal-drops-cancel-requested": [(
        "amc/core/kernel.py",
        '''        cancel_requested=pending,
        messages=carried,
    )''',
        '''        cancel_requested=False,
        messages=carried,
    )''',
    )],
    "claim-ignores-priority": [(
        "amc/core/state.py",
        '''        heapq.heappush(self._heap(task.requirements, task.requirements.key()), (-task.priority, task.seq, task.id))''',
        '''        heapq.heappush(self._heap(task.requirements, task.requirements.key()), (0, task.seq, task.id))''',
    )],
    "agent-reports-cancelled-on-lease-loss": [(
        "amc/core/execution.py",
        '''            elif self.stop is StopReason.cancelled:''',
        '''            elif self.stop in (StopReason.cancelled, StopReason.lease_lost):''',
    )],
    # Part B
    "requeue-forgets-the-pause": [(
        "amc/core/kernel.py",
        '''    if task.claimable:  # a task paused in flight comes back held''',
        '''    if task.status == TaskStatus.queued:''',
    )],
    "skip-recalls-started-steps": [(
        "amc/core/steering.py",
        '''            skipped = {step_id for step_id in ids if index[step_id] >= boundary}''',
        '''            skipped = set(ids)''',
    )],
    "renewal-redelivers-acknowledged-messages": [(
        "amc/core/messages.py",
        '''        elif m.state == MessageState.delivered and m.attempt == number:''',
        '''        elif m.state in (MessageState.delivered, MessageState.admitted) and m.attempt == number:''',
    )],
    "follow-ups-dropped-when-done": [(
        "amc/core/messages.py",
        '''    if follow_ups and status == TaskStatus.done:''',
        '''    if follow_ups and status == "never":''',
    )],
    "agent-applies-a-redelivered-message-again": [(
        "amc/core/execution.py",
        '''            if message.id not in self._taken:''',
        '''            if True:''',
    )],
}


@contextlib.contextmanager
def mutated_copy(name: str) -> Iterator[Path]:
    """A scratch copy of the repository with mutant `name` applied (deleted afterwards).

    Put it first on PYTHONPATH to run anything (tests, `python -m amc serve`) against it.
    """
    with tempfile.TemporaryDirectory(prefix=f"amc-mutant-{name}-") as scratch:
        copy = Path(scratch) / "repo"
        shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".venv", ".git", "__pycache__", ".hypothesis", ".amc"))
        for path, find, replace in MUTANTS[name]:
            target = copy / path
            text = target.read_text()
            assert text.count(find) == 1, f"{name}: the text to mutate occurs {text.count(find)} times in {path}"
            target.write_text(text.replace(find, replace))
        if any(path.endswith("lifecycle.py") for path, _, _ in MUTANTS[name]):
            # Keep the rendered diagrams in step, so that only behaviour differs.
            subprocess.run([sys.executable, "-m", "amc", "model", "render", "--out", "specs/lifecycles"],
                           cwd=copy, capture_output=True, env={"PYTHONPATH": str(copy), "PATH": "/usr/bin:/bin"})
        yield copy


def run(name: str, pytest_args: list[str]) -> list[str]:
    """The model tests that fail with mutant `name` applied."""
    with mutated_copy(name) as copy:
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "tests/model", "-q", "-p", "no:cacheprovider", "--no-header", "-rf",
             *pytest_args],
            cwd=copy, capture_output=True, text=True, env={"PYTHONPATH": str(copy), "PATH": "/usr/bin:/bin"},
        )
        failed = sorted(set(re.findall(r"^(?:FAILED|ERROR) (\S+)", result.stdout, re.M)))
        if result.returncode not in (0, 1) and not failed:
            failed = [f"pytest exited {result.returncode}: {result.stdout[-300:]}{result.stderr[-300:]}"]
        return failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(MUTANTS))
    parser.add_argument("pytest_args", nargs="*")
    args = parser.parse_args()
    survivors = []
    for name in [args.only] if args.only else MUTANTS:
        failed = run(name, args.pytest_args)
        print(f"{name}: caught by {len(failed)} test(s)" if failed else f"{name}: SURVIVED")
        for test in failed:
            print(f"    {test}")
        if not failed:
            survivors.append(name)
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
