"""Documentation that shows code runs it: the embedding example and the docs' snippets."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_embedding_example_runs(capsys):
    runpy.run_path(str(ROOT / "examples" / "embed.py"), run_name="__main__")
    assert capsys.readouterr().out.startswith("cancelled completed")


@pytest.mark.parametrize("doc", ["docs/embedding.md", "README.md"])
def test_python_snippets_in_docs_run(doc):
    snippets = re.findall(r"```python\n(.*?)```", (ROOT / doc).read_text(), re.S)
    for snippet in snippets:
        exec(compile(snippet, doc, "exec"), {"__name__": "__doc__"})
