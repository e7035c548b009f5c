"""Break the kernel on purpose and show which tests catch it.

Two runs, both in scratch copies of the repository (the working tree is never touched):

- The named mutants (`MUTANTS`): each breaks one rule we know matters. For each, the model
  tests run against the broken copy and the tests that failed are listed. A named mutant
  that no test catches is a hole in the tests: the script exits 1.
- `--sample N`: a mutation score. N mutants drawn at random (a fixed seed, so the score is
  reproducible) from every place in `amc/core` where an operator of a few kinds can be
  broken: a comparison moved across its boundary or negated, a boolean flipped, a
  statement removed, an integer constant changed. Each is run against `tests/model`
  (stopping at the first failure); the score is the share killed, and the survivors are
  listed for a person to judge (some are equivalent: no test could tell them apart).

A named mutant is a list of `Edit`s, each "in function F of module M, replace snippet A
with B" (a snippet of several lines starts with a newline and is dedented, as in MUTANTS).
The function is found with `ast`, so lines moving within the module or the function moving
do not disarm it; the snippet must occur exactly once in that function (whitespace between
tokens and indentation do not matter), and the edit must change the code's syntax tree.
Anything else (a module, function or snippet not found, found twice, or an edit that
changes nothing) stops the run with an error: a mutant never passes silently.

Run: python tools/mutation_check.py [--only NAME] [--sample N [--seed S]] [--jobs J] [-- pytest args]
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import random
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
CORE = "amc/core"
MUTANT_TIMEOUT = 600  # seconds; a mutant that makes the tests hang counts as caught


class Edit(NamedTuple):
    """In `function` (a qualified name: `f`, `Class.method`, or a class body) of `module`
    (dotted), replace the snippet `find` with `replace`."""

    module: str
    function: str
    find: str
    replace: str


class MutantNotFound(Exception):
    """A mutant's target is gone or ambiguous: the mutant must be updated, not skipped."""


MUTANTS: dict[str, list[Edit]] = {
    "expiry-with-pending-cancel-requeues": [
        Edit(
            "amc.core.lifecycle",
            "TaskLifecycle",
            """
        expire = (
            _.assigned.to(_.cancelled, cond="cancellation_pending")
            | _.assigned.to(_.queued, cond="attempts_left")
        """,
            """
        expire = (
            _.assigned.to(_.queued, cond="attempts_left")
        """,
        )
    ],
    "release-ignores-pending-cancel": [
        Edit(
            "amc.core.lifecycle",
            "TaskLifecycle",
            """
        release = (
            _.assigned.to(_.cancelled, cond="cancellation_pending")
            | _.assigned.to(_.queued, cond="attempts_left")
            | _.assigned.to(_.failed)
            | _.dispatched.to(_.cancelled, cond="cancellation_pending")
        """,
            """
        release = (
            _.assigned.to(_.queued, cond="attempts_left")
            | _.assigned.to(_.failed)
        """,
        )
    ],
    "cancel-of-done-task-succeeds": [
        Edit(
            "amc.core.kernel",
            "_cancel",
            """if task.status == TaskStatus.cancelled or task.cancellation_pending:""",
            """if task.status in (TaskStatus.cancelled, TaskStatus.done) or task.cancellation_pending:""",
        )
    ],
    "stale-attempt-report-accepted": [
        Edit(
            "amc.core.kernel",
            "_report",
            """
        refusal = check_ownership(task, attempt, c)
        if refusal is not None:
            return refusal
        """,
            """
        refusal = check_ownership(task, attempt, c)
        if refusal is not None and refusal.rejection.code is not Code.lease_replaced:
            return refusal
        """,
        )
    ],
    "renewal-at-expiry-succeeds": [
        # Both layers: the lease check itself, and the expiry that runs before every command.
        Edit(
            "amc.core.decisions",
            "check_live",
            """if attempt.outcome == AttemptState.expired or now >= attempt.lease_expires_at:""",
            """if attempt.outcome == AttemptState.expired or now > attempt.lease_expires_at:""",
        ),
        Edit(
            "amc.core.kernel",
            "expire_due",
            """if (next_expiry := state.next_deadline()) is None or next_expiry > now:""",
            """if (next_expiry := state.next_deadline()) is None or next_expiry >= now:""",
        ),
        Edit("amc.core.state", "LeaseIndex.due", """if entry[0] > now:""", """if entry[0] >= now:"""),
    ],
    "queued-cancel-allows-later-attempt": [
        Edit(
            "amc.core.kernel",
            "_apply_ended",
            """was_queued = task.status == TaskStatus.queued""",
            """was_queued = False""",
        )
    ],
    "repeated-cancel-records-second-request": [
        Edit(
            "amc.core.kernel",
            "_cancel",
            """
        if task.status == TaskStatus.cancelled or task.cancellation_pending:
            return Decision(reply=CancelAccepted(task.id, pending=task.cancellation_pending))
        """,
            """
        if task.status == TaskStatus.cancelled:
            return Decision(reply=CancelAccepted(task.id, pending=task.cancellation_pending))
        """,
        )
    ],
    "renewal-drops-cancel-requested": [
        Edit(
            "amc.core.leases",
            "_granted",
            """cancel_requested=pending,""",
            """cancel_requested=False,""",
        )
    ],
    "claim-ignores-priority": [
        # Both ways into the queue: one task at a time, and a start-up's backlog in bulk.
        Edit("amc.core.state", "ClaimQueue.push", "(-task.priority, task.seq, task.id)", "(0, task.seq, task.id)"),
        Edit("amc.core.state", "ClaimQueue.of", "(-task.priority, task.seq, task.id)", "(0, task.seq, task.id)"),
    ],
    "agent-reports-cancelled-on-lease-loss": [
        Edit(
            "amc.core.execution",
            "Execution.report",
            """elif self.stop is StopReason.cancelled:""",
            """elif self.stop in (StopReason.cancelled, StopReason.lease_lost):""",
        )
    ],
    # Part B
    "requeue-forgets-the-pause": [
        Edit(
            "amc.core.kernel",
            "_apply_requeued",
            """if task.claimable:""",
            """if task.status == TaskStatus.queued:""",
        )
    ],
    "skip-recalls-started-steps": [
        Edit(
            "amc.core.steering",
            "apply_edit",
            """skipped = {step_id for step_id in ids if index[step_id] >= boundary}""",
            """skipped = set(ids)""",
        )
    ],
    "renewal-redelivers-acknowledged-messages": [
        Edit(
            "amc.core.messages",
            "carried_messages",
            """elif m.state == MessageState.delivered and m.attempt == number:""",
            """elif m.state in (MessageState.delivered, MessageState.admitted) and m.attempt == number:""",
        )
    ],
    "follow-ups-dropped-when-done": [
        Edit(
            "amc.core.messages",
            "settle_messages",
            """if follow_ups and status == TaskStatus.done:""",
            """if follow_ups and status == "never":""",
        )
    ],
    "progress-on-an-unknown-step": [
        Edit(
            "amc.core.leases",
            "_leased_with_progress",
            """if c.progress_step is not None and not steering.is_known_step(task, c.progress_step):""",
            """if False:""",
        )
    ],
    "artifact-from-an-ended-attempt": [
        Edit(
            "amc.core.artifacts",
            "refusal",
            """return check_ownership(task, attempt, c) or check_live(attempt, c.now)""",
            """return check_ownership(task, attempt, c)""",
        )
    ],
    "artifact-name-reused-with-other-bytes": [
        Edit(
            "amc.core.artifacts",
            "store",
            """if existing.sha256 == c.sha256 and existing.step == c.step:""",
            """if True:""",
        )
    ],
    "artifacts-purged-from-a-running-task": [
        Edit(
            "amc.core.artifacts",
            "purge",
            """if task.status not in TERMINAL_STATUSES:""",
            """if False:""",
        )
    ],
    "step-lists-another-steps-artifact": [
        Edit(
            "amc.core.artifacts",
            "listing_problem",
            """if step != outcome.id:""",
            """if step is None:""",
        )
    ],
    "agent-fails-a-task-its-host-stopped": [
        Edit(
            "amc.core.execution",
            "Execution.releases",
            """return self.stop in RELEASE_REASONS and not self._all_completed(self._steps())""",
            """return False""",
        )
    ],
    "agent-drain-interrupts-the-running-step": [
        Edit(
            "amc.core.execution",
            "Execution.should_interrupt",
            """return self.stop is not None and self.stop is not StopReason.drain_timed_out and self.running is not None""",
            """return self.stop is not None and self.running is not None""",
        )
    ],
    "agent-applies-a-redelivered-message-again": [
        Edit(
            "amc.core.execution",
            "Execution.lease_granted",
            """if message.id not in self._taken:""",
            """if True:""",
        )
    ],
    "a-steer-naming-a-step-in-no-plan-is-accepted": [
        Edit(
            "amc.core.messages",
            "_check_message",
            """if unknown is not None:""",
            """if False:""",
        )
    ],
    "not-admitted-messages-say-nothing": [
        Edit(
            "amc.core.messages",
            "settle_messages",
            """details = tuple(_ended_before_applied(m, status) for m in dropped)""",
            """details = ()""",
        )
    ],
    "waiting-counts-a-busy-device-as-idle": [
        Edit(
            "amc.core.waiting",
            "waiting",
            """idle += device.reservation is None""",
            """idle += 1""",
        )
    ],
    "a-lost-session-attempt-keeps-its-actions": [
        Edit(
            "amc.core.sessions",
            "attempt_lost",
            """return settle_actions(task, at, LOST_DELIVERED, LOST_QUEUED)""",
            """return ()""",
        )
    ],
    "a-session-delivers-two-actions-at-once": [
        Edit(
            "amc.core.sessions",
            "poll",
            """if action.status == ActionState.delivered and action.id != c.running:""",
            """if False:""",
        )
    ],
}


# -- named mutants: an edit inside one function --------------------------------------------


_PARSING = threading.Lock()


def parse(text: str) -> ast.Module:
    """`ast.parse`, one thread at a time. Mutants are prepared in threads (the conformance
    tests start their broken servers in parallel), and CPython 3.11 keeps the AST builder's
    recursion depth in state the threads share: parsing in two at once can fail with
    "SystemError: AST constructor recursion depth mismatch" (python/cpython#106905)."""
    with _PARSING:
        return ast.parse(text)


def module_path(module: str) -> str:
    return module.replace(".", "/") + ".py"


def find_definition(tree: ast.Module, qualname: str) -> ast.AST:
    """The function or class `qualname` (`f`, `C`, `C.m`, `f.inner`) defined in `tree`."""
    scope: list[ast.stmt] = tree.body
    node: ast.AST | None = None
    for part in qualname.split("."):
        node = next(
            (
                n
                for n in scope
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == part
            ),
            None,
        )
        if node is None:
            raise MutantNotFound(f"no function or class {qualname!r}")
        scope = node.body
    return node


def snippet_pattern(find: str) -> re.Pattern:
    """`find` as a pattern in which any run of whitespace between its tokens may differ."""
    chunks = textwrap.dedent(find).strip().split()
    return re.compile(r"\s+".join(re.escape(chunk) for chunk in chunks))


def reindented(replace: str, indent: str) -> str:
    """`replace` (dedented) with its lines after the first indented to sit under the matched
    snippet's first line, whose own indentation is `indent`."""
    first, *rest = textwrap.dedent(replace.lstrip("\n").rstrip()).splitlines()
    return "\n".join([first.strip(), *(indent + line if line.strip() else line for line in rest)])


def apply_edit(text: str, edit: Edit) -> str:
    """`text` (the source of `edit.module`) with `edit` applied; MutantNotFound if it cannot be."""
    where = f"{edit.module}, {edit.function}"
    try:
        definition = find_definition(parse(text), edit.function)
    except MutantNotFound as error:
        raise MutantNotFound(f"{edit.module}: {error}") from None
    lines = text.splitlines(keepends=True)
    start = sum(len(line) for line in lines[: definition.lineno - 1])
    end = sum(len(line) for line in lines[: definition.end_lineno])
    matches = list(snippet_pattern(edit.find).finditer(text, start, end))
    if len(matches) != 1:
        raise MutantNotFound(f"{where}: the snippet occurs {len(matches)} times, not once:\n{edit.find}")
    match = matches[0]
    line_start = text.rfind("\n", 0, match.start()) + 1
    indent = re.match(r"[ \t]*", text[line_start:]).group()
    mutated = text[: match.start()] + reindented(edit.replace, indent) + text[match.end() :]
    try:
        changed = ast.dump(parse(mutated)) != ast.dump(parse(text))
    except SyntaxError as error:
        raise MutantNotFound(f"{where}: the edit leaves invalid Python: {error}") from None
    if not changed:
        raise MutantNotFound(f"{where}: the edit does not change the code")
    return mutated


def mutant_files(name: str, root: Path = ROOT) -> dict[str, str]:
    """The files of the repository at `root` that named mutant `name` changes, as they read mutated."""
    files: dict[str, str] = {}
    for edit in MUTANTS[name]:
        path = module_path(edit.module)
        if not (root / path).exists():
            raise MutantNotFound(f"{name}: no module {edit.module} ({path})")
        try:
            files[path] = apply_edit(files.get(path) or (root / path).read_text(), edit)
        except MutantNotFound as error:
            raise MutantNotFound(f"{name}: {error}") from None
    return files


# -- the scratch copy --------------------------------------------------------------------


@contextlib.contextmanager
def scratch_copy(files: dict[str, str], label: str, dest: Path | None = None) -> Iterator[Path]:
    """A copy of the repository with `files` (path -> text) written over it.

    In a temporary directory (deleted afterwards), or at `dest` (a path that does not exist
    yet, left in place). Put the copy first on PYTHONPATH to run anything against it.
    """
    with contextlib.ExitStack() as stack:
        copy = (
            dest
            if dest is not None
            else Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=f"amc-mutant-{label}-"))) / "repo"
        )
        ignored = shutil.ignore_patterns(".venv", ".git", "__pycache__", ".hypothesis", ".amc")
        shutil.copytree(ROOT, copy, ignore=ignored)
        for path, text in files.items():
            (copy / path).write_text(text)
        if any(path.endswith("lifecycle.py") for path in files):
            # Keep the rendered diagrams in step, so that only behaviour differs.
            subprocess.run(
                [sys.executable, "-m", "amc", "model", "render", "--out", "specs/lifecycles"],
                cwd=copy,
                capture_output=True,
                env={"PYTHONPATH": str(copy), "PATH": "/usr/bin:/bin"},
            )
        yield copy


def mutated_copy(name: str, dest: Path | None = None) -> contextlib.AbstractContextManager[Path]:
    """A scratch copy of the repository with named mutant `name` applied (see `scratch_copy`).

    Raises MutantNotFound at once if the mutant no longer applies.
    """
    return scratch_copy(mutant_files(name), name, dest)


def failing_tests(copy: Path, pytest_args: list[str]) -> list[str]:
    """The model tests that fail in `copy`; a crash or a hang is reported as one."""
    try:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "tests/model",
                "-q",
                "-p",
                "no:cacheprovider",
                "--no-header",
                "-rf",
                *pytest_args,
            ],
            cwd=copy,
            capture_output=True,
            text=True,
            env={"PYTHONPATH": str(copy), "PATH": "/usr/bin:/bin"},
            timeout=MUTANT_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        return [f"(the tests did not finish within {MUTANT_TIMEOUT} s)"]
    failed = sorted(set(re.findall(r"^(?:FAILED|ERROR) (\S+)", result.stdout, re.M)))
    if result.returncode not in (0, 1) and not failed:
        failed = [f"pytest exited {result.returncode}: {result.stdout[-300:]}{result.stderr[-300:]}"]
    return failed


def run(name: str, pytest_args: list[str]) -> list[str]:
    """The model tests that fail with named mutant `name` applied."""
    with mutated_copy(name) as copy:
        return failing_tests(copy, pytest_args)


def check_named(names: list[str], pytest_args: list[str], jobs: int) -> int:
    for name in names:
        mutant_files(name)  # every mutant applies, before anything runs
    survivors = []
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for name, failed in zip(names, pool.map(lambda n: run(n, pytest_args), names)):
            print(f"{name}: caught by {len(failed)} test(s)" if failed else f"{name}: SURVIVED", flush=True)
            for test in failed:
                print(f"    {test}")
            if not failed:
                survivors.append(name)
    return 1 if survivors else 0


# -- sampled mutants: operators anywhere in amc/core ---------------------------------------

KINDS = ("comparison", "boolean", "statement", "constant")

# A comparison moves across its boundary (< and <=, > and >=) or is negated.
FLIPPED = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}
REMOVABLE = (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Raise, ast.If, ast.For, ast.Continue, ast.Break)


class Site(NamedTuple):
    """One place a sampled mutant breaks: the `index`-th candidate of the module's walk."""

    path: str
    index: int
    kind: str
    line: int
    function: str


def _is_docstring(node: ast.AST, parent: ast.AST | None) -> bool:
    body = getattr(parent, "body", None)
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
        and isinstance(body, list)
        and body
        and body[0] is node
    )


def _candidates(tree: ast.Module) -> Iterator[tuple[str, ast.AST, str, int]]:
    """(kind, node, qualified function, slot) for every breakable place, in a fixed order.

    `slot` tells apart several mutants of one node (each operator of a chained comparison).
    """

    def walk(node: ast.AST, function: str, parent: ast.AST | None, in_function: bool) -> Iterator:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            function = f"{function}.{node.name}" if function else node.name
            in_function = in_function or not isinstance(node, ast.ClassDef)
            for child in node.body:  # not the decorators, arguments' defaults or annotations
                yield from walk(child, function, node, in_function)
            return
        if isinstance(node, ast.AnnAssign):
            if node.value is not None:
                if in_function:
                    yield "statement", node, function, 0
                yield from walk(node.value, function, node, in_function)
            return
        if isinstance(node, ast.Compare):
            for slot, op in enumerate(node.ops):
                if type(op) in FLIPPED:
                    yield "comparison", node, function, slot
        elif (
            isinstance(node, ast.BoolOp)
            or (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not))
            or (isinstance(node, ast.Constant) and isinstance(node.value, bool))
        ):
            yield "boolean", node, function, 0
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            yield "constant", node, function, 0
        elif in_function and isinstance(node, REMOVABLE) and not _is_docstring(node, parent):
            yield "statement", node, function, 0
        for child in ast.iter_child_nodes(node):
            yield from walk(child, function, node, in_function)

    for statement in tree.body:
        if isinstance(statement, (ast.Import, ast.ImportFrom)) or _is_docstring(statement, tree):
            continue
        yield from walk(statement, "", tree, False)


def sites(root: Path = ROOT) -> list[Site]:
    found = []
    for file in sorted((root / CORE).rglob("*.py")):
        path = file.relative_to(root).as_posix()
        for index, (kind, node, function, _) in enumerate(_candidates(parse(file.read_text()))):
            found.append(Site(path, index, kind, node.lineno, function or "(module)"))
    return found


def _mutated_in_place(node: ast.AST, slot: int) -> None:
    """Break `node` where it stands: a comparison, an and/or, a boolean or an integer."""
    if isinstance(node, ast.Compare):
        node.ops[slot] = FLIPPED[type(node.ops[slot])]()
    elif isinstance(node, ast.BoolOp):
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif isinstance(node, ast.Constant) and isinstance(node.value, bool):
        node.value = not node.value
    elif isinstance(node, ast.Constant):
        node.value = node.value + 1
    else:
        raise AssertionError(f"no in-place mutant of {ast.dump(node)[:80]}")


class _Replace(ast.NodeTransformer):
    def __init__(self, target: ast.AST, replacement: ast.AST):
        self.target, self.replacement = target, replacement

    def generic_visit(self, node: ast.AST) -> ast.AST:
        return self.replacement if node is self.target else super().generic_visit(node)


def sampled_mutant(site: Site, root: Path = ROOT) -> tuple[str, str]:
    """The mutated text of `site.path`, and what changed (before -> after)."""
    tree = parse((root / site.path).read_text())
    kind, node, _, slot = list(_candidates(tree))[site.index]
    before = ast.unparse(node)
    if kind == "statement":
        replacement: ast.AST = ast.Pass()
        after = "(removed)"
    elif isinstance(node, ast.UnaryOp):
        replacement = node.operand
        after = ast.unparse(node.operand)
    else:
        _mutated_in_place(node, slot)
        replacement, after = node, ast.unparse(node)
    if replacement is not node:
        ast.copy_location(replacement, node)
        tree = _Replace(node, replacement).visit(tree)
    text = ast.unparse(ast.fix_missing_locations(tree))
    return text, f"{_first_line(before)}  ->  {_first_line(after)}"


def _first_line(source: str) -> str:
    return source.splitlines()[0][:90]


def sample(count: int, seed: int, kinds: tuple[str, ...]) -> list[Site]:
    """`count` sites drawn at random, taking the kinds in turn so that each is represented."""
    rng = random.Random(seed)
    pools = {kind: [s for s in sites() if s.kind == kind] for kind in kinds}
    for pool in pools.values():
        rng.shuffle(pool)
    chosen: list[Site] = []
    while len(chosen) < count and any(pools.values()):
        for kind in kinds:
            if pools[kind] and len(chosen) < count:
                chosen.append(pools[kind].pop())
    return chosen


def score(count: int, seed: int, kinds: tuple[str, ...], pytest_args: list[str], jobs: int) -> int:
    chosen = sample(count, seed, kinds)
    print(f"{len(chosen)} mutants of {CORE} (seed {seed}; kinds: {', '.join(kinds)}) against tests/model", flush=True)

    def one(site: Site) -> tuple[str, list[str]]:
        text, change = sampled_mutant(site)
        with scratch_copy({site.path: text}, f"{Path(site.path).stem}-{site.index}") as copy:
            return change, failing_tests(copy, ["-x", *pytest_args])

    survivors = []
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for site, (change, failed) in zip(chosen, pool.map(one, chosen)):
            where = f"{site.path}:{site.line} in {site.function} [{site.kind}]"
            print(f"{'killed  ' if failed else 'SURVIVED'} {where}: {change}", flush=True)
            if failed:
                print(f"    by {failed[0]}")
            else:
                survivors.append(f"{where}: {change}")
    killed = len(chosen) - len(survivors)
    print(f"\nmutation score: {killed} of {len(chosen)} killed ({100 * killed / max(1, len(chosen)):.0f}%)")
    if survivors:
        print("survivors:")
        for survivor in survivors:
            print(f"    {survivor}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(MUTANTS), help="run this named mutant only")
    parser.add_argument("--sample", type=int, metavar="N", help="score N sampled mutants instead of the named ones")
    parser.add_argument("--seed", type=int, default=13, help="the sample's seed (default 13)")
    parser.add_argument(
        "--kinds", default=",".join(KINDS), help=f"the sample's operator kinds (default {','.join(KINDS)})"
    )
    parser.add_argument("--jobs", type=int, default=2, help="mutants run at once (default 2)")
    parser.add_argument("pytest_args", nargs="*")
    args = parser.parse_args()
    try:
        if args.sample is not None:
            kinds = tuple(k for k in args.kinds.split(",") if k)
            unknown = set(kinds) - set(KINDS)
            if unknown:
                parser.error(f"unknown kinds: {', '.join(sorted(unknown))}")
            return score(args.sample, args.seed, kinds, args.pytest_args, args.jobs)
        return check_named([args.only] if args.only else list(MUTANTS), args.pytest_args, args.jobs)
    except MutantNotFound as error:
        print(f"a mutant no longer applies: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
