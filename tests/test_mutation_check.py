"""The mutation check stays armed: every named mutant still finds its target, and one that
does not (or that would change nothing) stops the run instead of passing.

Running the mutants against the tests takes minutes (`make mutation`); this only applies them.
"""

from __future__ import annotations

import ast
import random

import pytest

from tools import mutation_check
from tools.mutation_check import MUTANTS, Edit, MutantNotFound, apply_edit, mutant_files, sampled_mutant, sites

KERNEL = (mutation_check.ROOT / "amc/core/kernel.py").read_text()


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_every_named_mutant_applies_and_changes_the_code(name):
    for path, mutated in mutant_files(name).items():
        original = (mutation_check.ROOT / path).read_text()
        assert ast.dump(ast.parse(mutated)) != ast.dump(ast.parse(original))


@pytest.mark.parametrize(
    "edit, message",
    [
        (Edit("amc.core.kernel", "no_such_function", "x", "y"), "no function or class 'no_such_function'"),
        (Edit("amc.core.kernel", "_cancel", "this text is nowhere", "y"), "occurs 0 times"),
        (Edit("amc.core.kernel", "_cancel", "task", "job"), "times, not once"),
        (Edit("amc.core.kernel", "_cancel", "if task.status", "if  task.status"), "does not change the code"),
        (Edit("amc.core.kernel", "_cancel", "if task.status", "if task.status ="), "invalid Python"),
    ],
)
def test_a_mutant_that_does_not_apply_fails_loudly(edit, message):
    with pytest.raises(MutantNotFound, match=message):
        apply_edit(KERNEL, edit)


def test_a_mutant_of_a_missing_module_fails_loudly(monkeypatch):
    monkeypatch.setitem(MUTANTS, "gone", [Edit("amc.core.no_such_module", "f", "a", "b")])
    with pytest.raises(MutantNotFound, match=r"no module amc\.core\.no_such_module"):
        mutant_files("gone")


def test_an_edit_finds_its_function_wherever_it_moved_and_however_it_is_indented():
    edit = MUTANTS["cancel-of-done-task-succeeds"][0]
    moved = "def before():\n    return 1\n\n\nclass Wrapper:\n    @staticmethod\n" + "\n".join(
        "    " + line if line else line for line in _source_of(KERNEL, "_cancel").splitlines()
    )
    with pytest.raises(MutantNotFound, match="no function or class '_cancel'"):
        apply_edit(moved, edit)  # moved into a class, it is another function: say so
    mutated = apply_edit(moved, edit._replace(function="Wrapper._cancel"))
    assert "        if task.status in (TaskStatus.cancelled, TaskStatus.done) or task.cancellation_pending:" in mutated


def test_a_multi_line_replacement_is_indented_under_the_snippet():
    text = "def f(x):\n    if x:\n        y = 1\n        return y\n    return 0\n"
    edit = Edit(
        "m",
        "f",
        """
        y = 1
        return y
        """,
        """
        if x > 1:
            return 2
        return 3
        """,
    )
    assert apply_edit(text, edit) == (
        "def f(x):\n    if x:\n        if x > 1:\n            return 2\n        return 3\n    return 0\n"
    )


def test_sampled_mutants_compile_and_change_one_thing():
    found = sites()
    assert {site.kind for site in found} == set(mutation_check.KINDS)
    for site in random.Random(7).sample(found, 60):
        text, change = sampled_mutant(site)
        compile(text, site.path, "exec")
        original = (mutation_check.ROOT / site.path).read_text()
        assert ast.dump(ast.parse(text)) != ast.dump(ast.parse(original)), site
        assert "->" in change


def _source_of(text: str, function: str) -> str:
    node = next(n for n in ast.parse(text).body if getattr(n, "name", None) == function)
    return "\n".join(text.splitlines()[node.lineno - 1 : node.end_lineno]) + "\n"
