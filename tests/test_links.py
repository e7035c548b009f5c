"""No document points at a file that is not in the repository.

Two checks over the whole checkout:

- every relative link of every Markdown file (``[text](target)`` and ``[label]: target``)
  names an existing file or directory, and its ``#anchor``, if any, names a heading (or an
  ``<a id>``) of the target;
- every ``*.md`` file name that code, help text or documentation mentions (in prose, code
  spans, docstrings, strings) names a file of the repository: relative to the mentioning
  file, relative to the repository root, or, for a bare name such as ``README.md``, a file of
  that exact name somewhere in the repository. A document that lives elsewhere (a source
  document the project was written from) must be restated under ``specs/`` and cited there.

Links are read outside code (fences and spans), since code shows text, not links; mentions
are read everywhere, since a file name in a code span still tells the reader to open it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Directories that hold no project text: tooling, caches, virtualenvs, build output.
SKIPPED_DIRS = {"__pycache__", "build", "dist", "node_modules"}
# Files whose text may mention Markdown names: code, help text (in the code), docs, config.
MENTIONING_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".txt", ".cfg", ".ini", ".sh"}
MENTIONING_NAMES = {"Makefile"}
# Modules that name missing files on purpose: this one in its own tests below, and the
# catalogue's test, which writes requirement files of its own into a temporary directory.
ON_PURPOSE = {Path(__file__).resolve(), ROOT / "tests" / "conformance" / "test_catalogue.py"}


# -- reading the repository ---------------------------------------------------------------


def project_files(root: Path) -> Iterator[Path]:
    """Every file of the project under `root`: hidden directories and build output left out."""
    for path in sorted(root.iterdir()):
        if path.name.startswith(".") or path.name in SKIPPED_DIRS or path.name.endswith(".egg-info"):
            continue
        if path.is_dir():
            yield from project_files(path)
        elif path.is_file():
            yield path


def markdown_files(root: Path) -> list[Path]:
    return [p for p in project_files(root) if p.suffix == ".md"]


def mentioning_files(root: Path) -> list[Path]:
    return [
        p
        for p in project_files(root)
        if (p.suffix in MENTIONING_SUFFIXES or p.name in MENTIONING_NAMES) and p.resolve() not in ON_PURPOSE
    ]


# -- Markdown -----------------------------------------------------------------------------

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)", re.S)
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.M)
HTML_ANCHOR = re.compile(r"<a\s+(?:[^>]*\s)?(?:id|name)=\"([^\"]+)\"", re.I)
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def without_fences(text: str) -> str:
    """`text` with every fenced code block blanked out (line numbers kept)."""
    lines, fence = [], None
    for line in text.splitlines():
        opened = FENCE.match(line)
        if fence is None and opened:
            fence = opened.group(1)[0] * len(opened.group(1))
            lines.append("")
        elif fence is not None:
            if line.strip().startswith(fence) and set(line.strip()) <= {fence[0]}:
                fence = None
            lines.append("")
        else:
            lines.append(line)
    return "\n".join(lines)


def prose(text: str) -> str:
    """`text` without fenced blocks and code spans: where links and headings can be."""
    return CODE_SPAN.sub("", without_fences(text))


def links(text: str) -> list[str]:
    """The targets of every inline link and reference definition outside code."""
    outside = prose(text)
    return [m.group(1) for m in INLINE_LINK.finditer(outside)] + [
        m.group(1) for m in REFERENCE_DEFINITION.finditer(outside)
    ]


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: its rendered text, lower-cased, punctuation dropped,
    spaces turned into hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link renders as its text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML renders as nothing here
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every anchor a Markdown file offers: its headings' slugs (numbered like GitHub's when a
    heading repeats) and its explicit ``<a id>`` / ``<a name>``."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in without_fences(text).splitlines():
        heading = HEADING.match(line)
        if heading:
            base = slug(heading.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    found.update(HTML_ANCHOR.findall(without_fences(text)))
    return found


def broken_links(path: Path, root: Path) -> list[str]:
    """What is wrong with the relative links of the Markdown file `path`."""
    problems = []
    text = path.read_text(encoding="utf-8")
    for target in links(text):
        if not target or SCHEME.match(target) or target.startswith("//"):
            continue  # a URL, or an empty link: not a file of ours
        file_part, _, anchor = target.partition("#")
        if file_part.startswith("/"):
            problems.append(f"{target}: an absolute path; link relative to this file")
            continue
        linked = (path.parent / file_part).resolve() if file_part else path.resolve()
        if not linked.exists():
            problems.append(f"{target}: no such file")
            continue
        if not linked.is_relative_to(root.resolve()):
            problems.append(f"{target}: outside the repository")
            continue
        if (
            anchor
            and linked.is_file()
            and linked.suffix == ".md"
            and anchor not in anchors(linked.read_text(encoding="utf-8"))
        ):
            problems.append(f"{target}: {linked.name} has no heading or anchor #{anchor}")
    return problems


# -- mentions of Markdown files -----------------------------------------------------------

# A file name ending in .md, with its directories. It may not start right after a word
# character, a slash, a colon or a dot, so a URL (https://host/x.md) or a longer name never
# yields a piece of itself; a glob such as RESULTS-*.md is not a file name and is skipped.
MENTION = re.compile(r"(?<![\w/:.*-])((?:\.{1,2}/|/)?(?:[\w.-]+/)*[\w-][\w.-]*\.md)(?![\w-])")


def mentions(text: str) -> list[str]:
    return MENTION.findall(text)


def unresolved_mentions(path: Path, root: Path, names: set[str]) -> list[str]:
    """The ``*.md`` names that `path` mentions and that no file of the repository answers to.

    A mention resolves relative to the mentioning file, or to the repository root, or (a bare
    name without a directory) to any file of exactly that name in the repository.
    """
    problems = []
    for mention in sorted(set(mentions(path.read_text(encoding="utf-8", errors="replace")))):
        if mention.startswith("/"):
            problems.append(f"{mention}: an absolute path, not a file of the repository")
            continue
        candidates = [(path.parent / mention).resolve(), (root / mention).resolve()]
        inside = [c for c in candidates if c.is_relative_to(root.resolve())]
        if any(c.is_file() for c in inside):
            continue
        if "/" not in mention and mention in names:
            continue
        problems.append(f"{mention}: no such file in the repository")
    return problems


# -- the checks ---------------------------------------------------------------------------


@pytest.mark.parametrize("doc", markdown_files(ROOT), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(doc):
    problems = broken_links(doc, ROOT)
    assert not problems, f"{doc.relative_to(ROOT)} has broken links:\n" + "\n".join(f"  {p}" for p in problems)


def test_markdown_file_names_mentioned_anywhere_resolve():
    names = {p.name for p in markdown_files(ROOT)}
    problems = {
        str(path.relative_to(ROOT)): found
        for path in mentioning_files(ROOT)
        if (found := unresolved_mentions(path, ROOT, names))
    }
    listing = "\n".join(f"  {name}: {problem}" for name, found in problems.items() for problem in found)
    assert not problems, f"files mention Markdown files that are not in the repository:\n{listing}"


def test_the_scan_covers_code_help_text_and_docs():
    # A guard against a scan that silently reads nothing.
    scanned = {str(p.relative_to(ROOT)) for p in mentioning_files(ROOT)}
    for expected in (
        "README.md",
        "amc/cli/serve.py",
        "tools/mutation_check.py",
        "bench/kernel.py",
        "specs/protocol.md",
        "specs/design.md",
        "docs/conformance.md",
        "Makefile",
    ):
        assert expected in scanned


# -- the checker itself, on a small repository of its own ---------------------------------


@pytest.fixture
def repo(tmp_path):
    (tmp_path / "specs").mkdir()
    (tmp_path / "README.md").write_text("# Title\n\n## Quick start\n")
    (tmp_path / "specs" / "protocol.md").write_text(
        "# Protocol\n\n## Part B: steering\n\n### Resolved points (v1.1)\n\n"
        '<a id="invariant-1"></a>\n1. one\n\n## Notes\n\n## Notes\n'
    )
    return tmp_path


def check_links(repo: Path, text: str, where: str = "docs/page.md") -> list[str]:
    page = repo / where
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(text)
    return broken_links(page, repo)


def check_mentions(repo: Path, text: str, where: str = "amc/module.py") -> list[str]:
    source = repo / where
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text(text)
    return unresolved_mentions(source, repo, {p.name for p in markdown_files(repo)})


def test_links_to_existing_files_and_headings_pass(repo):
    text = (
        "See [the protocol](../specs/protocol.md#part-b-steering), "
        "[resolved](../specs/protocol.md#resolved-points-v11), [inv](../specs/protocol.md#invariant-1), "
        "[notes again](../specs/protocol.md#notes-1), [the start](../README.md#quick-start), "
        "[specs](../specs/), [here](#local), [web](https://example.org/x.md), [mail](mailto:a@b.c).\n\n"
        "## Local\n\n[ref]: ../README.md\n"
    )
    assert check_links(repo, text) == []


@pytest.mark.parametrize(
    "text, problem",
    [
        ("[p](../PROTOCOL.md)", "../PROTOCOL.md: no such file"),
        ("[p](../specs/protocol.md#part-z)", "protocol.md has no heading or anchor #part-z"),
        ("[p](#nowhere)\n# Here\n", "page.md has no heading or anchor #nowhere"),
        ("[p]: ../specs/design.md\n", "../specs/design.md: no such file"),
        ("[p](/specs/protocol.md)", "an absolute path"),
    ],
)
def test_broken_links_are_reported(repo, text, problem):
    found = check_links(repo, text)
    assert len(found) == 1 and problem in found[0], found


def test_links_inside_code_are_not_links(repo):
    text = "Write `[x](missing.md)` to link.\n\n```md\n[y](also-missing.md)\n```\n"
    assert check_links(repo, text) == []


def test_mentions_that_resolve_pass(repo):
    text = (
        '"""See specs/protocol.md, Part B, and the README.md (any README.md will do).\n'
        "Also `../specs/protocol.md` from here, bench/RESULTS-*.md (a glob) and\n"
        'https://example.org/docs/PROTOCOL.md (a URL)."""\n'
    )
    assert check_mentions(repo, text, "amc/module.py") == []
    assert check_mentions(repo, "the protocol: protocol.md", "specs/other.md") == []


@pytest.mark.parametrize(
    "text",
    [
        '"""The invariants of DESIGN.md."""',
        'help="Tokens file (JSON list, see PROTOCOL.md)."',
        "# cites `PROTOCOL.md` in a code span",
        '"""read ../shared/PROTOCOL.md"""',
        '"""docs/missing.md"""',
        '"""the spec (specs/Protocol.md)"""',  # names are compared exactly
        '"""/somewhere/else/notes.md"""',
    ],
)
def test_mentions_of_missing_files_are_reported(repo, text):
    assert len(check_mentions(repo, text)) == 1
