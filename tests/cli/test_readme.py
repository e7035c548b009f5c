"""The shell commands of the README and the docs pages, checked or run as written, so no
page can drift from the `amc` it describes.

Every ```sh block of README.md and docs/*.md carries, on the line before its fence, an
HTML comment (which a rendered page does not show) that says how this test treats it:

- ``<!-- test: runs -->``: the block runs here in one `bash`, in an empty directory, as a
  new user would paste it, and must exit 0. Only the ports change (another server of the
  machine may hold 8000); its background jobs are stopped when it ends. Some blocks are
  also held to what they promise (`EXPECTED`).
- ``<!-- test: runs: PREFIX -->``: only the block's lines that start with PREFIX run, as
  above. The conformance tokens are made so: the file they make must hold what `amc
  conformance --tokens` needs, and the suite itself runs against our own server in
  tests/conformance.
- ``<!-- test: runs on postgresql: VARIABLE -->``: the block runs as above, with VARIABLE set
  in its environment to the URL of a new database of a throwaway PostgreSQL cluster (skipped,
  like the other PostgreSQL tests, where none can run); the block names its own default for
  a reader who has not set it. Its output is held to what the block's comments promise
  (`EXPECTED`).
- ``<!-- test: parsed: REASON -->``: the block cannot run here, and REASON says why (it
  needs a PostgreSQL server or another control plane at an address of the reader's, real
  phones, a task id that a command printed, or it runs in the foreground until Ctrl-C).

Every block, whatever its marker, is also parsed: each `amc ...` command in it must name a
real command and only options it has, with no more arguments than it takes (the real CLI's
parser decides, without running anything), and each `make TARGET` a target of the Makefile.
"""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from amc.cli import main as amc_cli
from amc.conformance.target import Tokens
from tests.support.postgres import pg_cluster, pg_url  # noqa: F401  (fixtures)

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent  # where `amc` is installed, beside this interpreter
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PORTS = ("8000", "8001", "15037")  # the ports the blocks that run name; each gets a free one

MARKER = re.compile(
    r"^<!-- test: (runs|runs on postgresql: (?P<variable>\w+)|runs: (?P<prefix>.+?)|parsed: (?P<reason>.+?)) -->$"
)


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository root
    line: int  # of the opening fence
    section: str  # the heading the block stands under
    kind: str  # "runs", "runs lines", "runs on postgresql" or "parsed"
    detail: str  # the prefix of the lines that run, the database's variable, or why the block is only parsed
    body: str

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def marker_of(line: str) -> tuple[str, str]:
    """The kind and detail of a block whose fence follows `line`."""
    marker = MARKER.match(line)
    if marker is None:
        return "unmarked", ""
    if marker.group("variable"):
        return "runs on postgresql", marker.group("variable")
    if marker.group("prefix"):
        return "runs lines", marker.group("prefix")
    if marker.group("reason"):
        return "parsed", marker.group("reason")
    return "runs", ""


def blocks(path: Path) -> list[Block]:
    """The ```sh blocks of a page, each with its marker read (kind "unmarked" without one)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found = []
    section, opened = "", 0  # the latest heading; the line number of an open fence (0: none)
    for number, line in enumerate(lines, 1):
        if not opened and line.startswith("#"):
            section = line.lstrip("#").strip()
        elif line.startswith("```") and not opened:
            opened = number
        elif line.startswith("```"):
            if lines[opened - 1] == "```sh":
                kind, detail = marker_of(lines[opened - 2] if opened >= 2 else "")
                body = "".join(f"{text}\n" for text in lines[opened : number - 1])
                found.append(Block(str(path.relative_to(ROOT)), opened, section, kind, detail, body))
            opened = 0
    return found


ALL_BLOCKS = [block for page in PAGES for block in blocks(page)]


def find(page: str, section: str) -> list[Block]:
    return [b for b in ALL_BLOCKS if b.page == page and b.section == section]


# -- parsing the commands of a block ----------------------------------------------------

HEREDOC = re.compile(r"<<-?\s*'?\"?(\w+)'?\"?")
# Where a command starts: after these tokens (or at the start), a word is a command name.
COMMAND_START = {";", "&", "&&", "|", "||", "(", "$(", "until", "while", "if", "then", "do", "else", "!", "time"}


def logical_lines(body: str) -> Iterator[str]:
    """The block's lines with continuations joined and here-document bodies left out."""
    pending, heredoc_end = "", None
    for line in body.splitlines():
        if heredoc_end is not None:
            if line.strip() == heredoc_end:
                heredoc_end = None
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        opened = HEREDOC.search(line)
        if opened:
            heredoc_end = opened.group(1)
        yield line


def commands(body: str, program: Callable[[str], bool]) -> Iterator[list[str]]:
    """The argument lists of every command of the block whose name `program` accepts."""
    for line in logical_lines(body):
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        tokens = list(lexer)
        previous = ";"  # the line starts a command
        for index, token in enumerate(tokens):
            # after an operator or a keyword, or after an assignment (`X=1 cmd`, `X=$(cmd ...)`)
            at_start = previous in COMMAND_START or re.fullmatch(r"\w+=.*", previous) is not None
            if at_start and program(token):
                arguments = []
                for word in tokens[index + 1 :]:
                    if set(word) <= set("();&|<>"):
                        break
                    arguments.append(word)
                yield arguments
            previous = token


def is_amc(word: str) -> bool:
    return word == "amc" or word.endswith("/bin/amc")


def amc_usage_problem(arguments: list[str]) -> str | None:
    """Why `amc ARGUMENTS` would be refused before it ran, or None if the CLI takes it."""
    command: click.Command = amc_cli
    path = ["amc"]
    rest = list(arguments)
    while isinstance(command, click.Group):
        if not rest or rest[0].startswith("-"):
            return None if rest[:1] in ([], ["--help"], ["-h"], ["--version"]) else f"{' '.join(path)}: no command"
        name = rest.pop(0)
        sub = command.get_command(click.Context(command, info_name=path[-1]), name)
        if sub is None:
            return f"{' '.join(path)} has no command {name!r}"
        command, path = sub, [*path, name]
    context = click.Context(command, info_name=" ".join(path), **command.context_settings)
    try:
        _, extra, _ = command.make_parser(context).parse_args(rest)
    except click.UsageError as refused:
        return f"{' '.join(path)}: {refused.format_message()}"
    if extra and not context.allow_extra_args:
        return f"{' '.join(path)}: unexpected arguments {extra}"
    return None


def make_targets() -> set[str]:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    return {m.group(1) for m in re.finditer(r"^([\w.-]+):", makefile, re.M)}


def usage_problems(block: Block) -> list[str]:
    problems = [
        f"amc {' '.join(arguments)}: {problem}"
        for arguments in commands(block.body, is_amc)
        if (problem := amc_usage_problem(arguments))
    ]
    targets = make_targets()
    for arguments in commands(block.body, lambda word: word == "make"):
        for target in (a for a in arguments if not a.startswith("-") and "=" not in a):
            if target not in targets:
                problems.append(f"make {target}: the Makefile has no such target")
    return problems


# -- running a block ---------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def shell(
    script: str, cwd: Path, timeout: float, extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`script` in bash, with `amc` on the PATH, no AMC_* setting of the developer's and
    `extra` set; background jobs are stopped when it ends, however it ends."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("AMC_")}
    env.update(extra or {})
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    wrapped = "set -e\ntrap 'jobs -p | xargs -r kill 2>/dev/null || true; wait' EXIT\n" + script
    return subprocess.run(
        ["bash", "-c", wrapped], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def script_of(block: Block) -> str:
    """What of the block runs, with each port the blocks name moved to a free one."""
    if block.kind == "runs lines":
        script = "\n".join(line for line in block.body.splitlines() if line.startswith(block.detail)) + "\n"
    else:
        script = block.body
    for port in PORTS:
        script = script.replace(port, str(free_port()))
    return script


def the_stack_ran(block: Block, done: subprocess.CompletedProcess[str], where: Path) -> None:
    """operating.md's "Running it": lab-1 ran the task, and lists its four phones."""
    output = done.stdout + done.stderr
    assert "ended done (reported) on lab-1/" in done.stdout, output
    listed = done.stdout[done.stdout.rindex("HOST") :].splitlines()
    devices = [" ".join(line.split()) for line in listed[2:] if "amc-sim-" in line]
    assert devices[0].startswith("lab-1 ") and " s ago " in devices[0], output
    assert len(devices) == 4 and all(" yes " in row for row in devices), output


def the_conformance_tokens_were_made(block: Block, done: subprocess.CompletedProcess[str], where: Path) -> None:
    """operating.md's conformance tokens: what `amc conformance --tokens` needs, and the
    suite's line uses that file."""
    tokens = Tokens.load(where / "conformance-tokens.json")  # raises, saying what is missing
    assert tokens.tenant_a != tokens.tenant_b and tokens.host_1_id != tokens.host_2_id and tokens.admin
    assert "--tokens conformance-tokens.json" in block.body.splitlines()[-1]


def the_standby_took_over(block: Block, done: subprocess.CompletedProcess[str], where: Path) -> None:
    """deploying.md's PostgreSQL script: migrated before serving, the first server led, the
    second stood by and then led, the migrated task listed by the new leader (LEADER/s1)."""
    output = done.stdout + done.stderr
    assert "migrated .amc into " in done.stdout and "1 tasks" in done.stdout, output
    assert "amc serve: now leading (epoch 1)" in done.stdout, output
    assert "; standing by (another server leads); listening on " in done.stdout, output
    assert "amc serve: now leading (epoch 2)" in done.stdout, output
    assert done.stdout.index("now leading (epoch 2)") > done.stdout.index("standing by"), output
    assert "queued" in done.stdout[done.stdout.index("now leading (epoch 2)") :], output


# (page, section, the text the block holds) -> what else it must show when it runs
EXPECTED: dict[tuple[str, str, str], Callable[[Block, subprocess.CompletedProcess[str], Path], None]] = {
    ("docs/operating.md", "Running it", "amc host run"): the_stack_ran,
    ("docs/operating.md", "Running it", "amc conformance"): the_conformance_tokens_were_made,
    ("docs/deploying.md", "Starting servers on one database", "kill -9 $LEADER"): the_standby_took_over,
}
RUNNING = [block for block in ALL_BLOCKS if block.kind in ("runs", "runs lines")]
ON_POSTGRESQL = [block for block in ALL_BLOCKS if block.kind == "runs on postgresql"]


# -- the checks ----------------------------------------------------------------------------


@pytest.mark.parametrize("block", ALL_BLOCKS, ids=lambda b: b.id)
def test_every_block_says_how_it_is_tested(block: Block) -> None:
    assert block.kind != "unmarked", (
        f"{block.id}: mark this ```sh block with <!-- test: runs -->, <!-- test: runs: PREFIX --> "
        "or <!-- test: parsed: WHY IT CANNOT RUN --> on the line before it (see tests/cli/test_readme.py)"
    )


@pytest.mark.parametrize("block", ALL_BLOCKS, ids=lambda b: b.id)
def test_every_command_parses(block: Block) -> None:
    problems = usage_problems(block)
    assert not problems, f"{block.id} ({block.section}):\n" + "\n".join(f"  {p}" for p in problems)


@pytest.mark.parametrize("block", RUNNING, ids=lambda b: b.id)
def test_blocks_marked_to_run_work_word_for_word(block: Block, tmp_path: Path) -> None:
    done = shell(script_of(block), tmp_path, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    for (page, section, holds), expected in EXPECTED.items():
        if block.page == page and block.section == section and holds in block.body:
            expected(block, done, tmp_path)


@pytest.mark.req("LEADER/s1")
@pytest.mark.parametrize("block", ON_POSTGRESQL, ids=lambda b: b.id)
def test_blocks_marked_to_run_on_postgresql_work_word_for_word(block: Block, tmp_path: Path, request) -> None:
    database = request.getfixturevalue("pg_url")  # skips where no cluster can run
    done = shell(script_of(block), tmp_path, timeout=120, extra={block.detail: database})
    assert done.returncode == 0, done.stdout + done.stderr
    for (page, section, holds), expected in EXPECTED.items():
        if block.page == page and block.section == section and holds in block.body:
            expected(block, done, tmp_path)


def test_the_blocks_this_test_holds_to_more_are_there_and_run() -> None:
    for page, section, holds in EXPECTED:
        assert [b for b in find(page, section) if holds in b.body and b in RUNNING + ON_POSTGRESQL], (
            page,
            section,
            holds,
        )
    stack = next(b for b in find("docs/operating.md", "Running it") if "amc host run" in b.body)
    assert "amc tokens add --role host --host-id lab-1" in stack.body and "amc task submit" in stack.body
    assert "amc host list" in stack.body


def test_the_readme_has_the_newcomers_commands() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quick = find("README.md", "Quick start")
    assert len(quick) == 1 and [line.split()[:2] for line in quick[0].body.splitlines()] == [
        ["make", "demo"],
        ["make", "test"],
    ]
    assert "amc up" in readme and "amc task submit" in readme and "amc mcp" in readme
    assert len(readme.splitlines()) <= 260, "the README is the newcomer's page: move detail to docs/"


# -- the checker itself ---------------------------------------------------------------------


def test_commands_are_found_where_a_shell_would_run_them() -> None:
    body = (
        "amc serve --data ./.amc --port 8000 &          # the control plane\n"
        "until amc host list > /dev/null 2>&1; do sleep 0.2; done\n"
        "export AMC_HOST_TOKEN=$(amc tokens add --role host --host-id lab-1)\n"
        "cat > plan.json <<'PLAN'\n"
        "amc this is a here-document, not a command\n"
        "PLAN\n"
        "AMC_URL=http://x amc task list && echo 'amc not-a-command'\n"
        'amc task steer t_... --steps \'[{"id": "a"}]\' \\\n'
        "    --skip b\n"
    )
    assert list(commands(body, is_amc)) == [
        ["serve", "--data", "./.amc", "--port", "8000"],
        ["host", "list"],
        ["tokens", "add", "--role", "host", "--host-id", "lab-1"],
        ["task", "list"],
        ["task", "steer", "t_...", "--steps", '[{"id": "a"}]', "--skip", "b"],
    ]


@pytest.mark.parametrize(
    "arguments, problem",
    [
        (["task", "submit", "plan.json", "--watch"], None),
        (["conformance", "URL", "--tokens", "t.json", "--", "-v"], None),
        (["task", "sumbit", "plan.json"], "amc task has no command 'sumbit'"),
        (["task", "submit", "plan.json", "--wacth"], "No such option"),
        (["task", "cancel", "t_1", "t_2"], "unexpected arguments"),
        (["serve", "--port"], "requires an argument"),
    ],
)
def test_the_parser_refuses_what_the_cli_would(arguments: list[str], problem: str | None) -> None:
    found = amc_usage_problem(arguments)
    assert (found is None) if problem is None else (found is not None and problem in found), found


def test_a_block_without_a_marker_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    page = tmp_path / "page.markdown"
    page.write_text(
        "# Title\n\n## Here\n\n```sh\namc up\n```\n\n<!-- test: parsed: needs phones -->\n```sh\namc up\n```\n"
        "\n<!-- test: runs: amc tokens -->\n```sh\namc tokens list\n```\n"
    )
    kinds = [(b.section, b.kind, b.detail) for b in blocks(page)]
    assert kinds == [("Here", "unmarked", ""), ("Here", "parsed", "needs phones"), ("Here", "runs lines", "amc tokens")]
