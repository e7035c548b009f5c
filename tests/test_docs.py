"""Documentation that shows code runs it: the embedding example and the docs' snippets."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_embedding_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    runpy.run_path(str(ROOT / "examples" / "embed.py"), run_name="__main__")
    assert capsys.readouterr().out.startswith("cancelled completed")


def runnable_snippets(text: str) -> list[str]:
    """The python blocks of a markdown text that hold code (not only comments and blank lines)."""
    blocks = re.findall(r"^```python[ \t]*\n(.*?)^```", text, re.S | re.M)
    return [
        block
        for block in blocks
        if any(line.strip() and not line.strip().startswith("#") for line in block.splitlines())
    ]


# The pages that show Python: the README and every docs page with a ```python block.
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHOWING_CODE = [str(p.relative_to(ROOT)) for p in PAGES if runnable_snippets(p.read_text(encoding="utf-8"))]


def test_the_pages_that_show_code_are_found() -> None:
    # embedding.md is there to show code: if the scan finds no block there, it is broken.
    assert "docs/embedding.md" in SHOWING_CODE


@pytest.mark.parametrize("doc", SHOWING_CODE)
def test_python_snippets_in_docs_run(doc: str) -> None:
    snippets = runnable_snippets((ROOT / doc).read_text(encoding="utf-8"))
    assert snippets, f"{doc} has no runnable ```python block"
    for snippet in snippets:
        exec(compile(snippet, doc, "exec"), {"__name__": "__doc__"})


def test_a_document_without_a_runnable_block_has_no_snippets() -> None:
    assert runnable_snippets("# Title\n\n```bash\nmake test\n```\n\n```python\n# only a comment\n```\n") == []
    assert runnable_snippets("```python\nx = 1\n```\n") == ["x = 1\n"]
