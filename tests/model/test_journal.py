"""The state's journal: `apply` changes records only through `State.put_task`/`put_host`,
which note each replaced record while a journal is open (the store writes what it names).
The property that the journal names exactly the records a command replaced is checked
after every command of `test_kernel_model`."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from amc.core import kernel
from amc.core.commands import RegisterHost, SubmitTask
from amc.core.records import DeviceSpec
from amc.core.state import State
from tests.model.world import PLAN

CORE = Path(kernel.__file__).parent


def test_the_core_assigns_records_only_through_the_state():
    """An item assignment into `tasks` or `hosts` would bypass the journal."""
    found = []
    for path in sorted(CORE.glob("*.py")):
        if path.name == "state.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AugAssign)
                else []
            )
            targets += [t for t in node.targets] if isinstance(node, ast.Delete) else []
            for target in targets:
                if (
                    isinstance(target, ast.Subscript)
                    and isinstance(target.value, ast.Attribute)
                    and target.value.attr in ("tasks", "hosts")
                ):
                    found.append(f"{path.name}:{node.lineno}")
    assert not found, f"records assigned around State.put_task/put_host: {found}"


def test_a_journal_names_the_records_of_its_commands_with_their_earlier_values():
    state = State()
    kernel.execute(state, RegisterHost(now=1, host_id="h", devices=(DeviceSpec(serial="d"),)))
    host_before = state.hosts["h"]
    state.open_journal()
    kernel.execute(state, SubmitTask(now=2, task_id="t", tenant="a", plan=PLAN))
    kernel.execute(state, RegisterHost(now=3, host_id="h", devices=(DeviceSpec(serial="e"),)))
    journal = state.close_journal()
    assert journal.tasks == {"t": None}  # new
    assert journal.hosts["h"] is host_before
    assert state.journal is None
    kernel.execute(state, SubmitTask(now=4, task_id="u", tenant="a", plan=PLAN))  # no journal: nothing noted
    with pytest.raises(RuntimeError):
        state.close_journal()
