"""The lifecycle diagrams and transition tables of specs/lifecycles/, rendered from the declarations.

Returns text only; `amc model render` writes it, and a test fails when the files are stale.
"""

from __future__ import annotations

from typing import Any

from statemachine import StateMachine
from statemachine.contrib.diagram import formatter

from amc.core.lifecycle import (
    ATTEMPT,
    CANCELLATION,
    MESSAGE,
    TASK,
    AttemptLifecycle,
    CancellationLifecycle,
    MessageLifecycle,
    Table,
    TaskLifecycle,
)

MACHINES: dict[str, tuple[type[StateMachine], Table[Any]]] = {
    "task": (TaskLifecycle, TASK),
    "attempt": (AttemptLifecycle, ATTEMPT),
    "cancellation": (CancellationLifecycle, CANCELLATION),
    "message": (MessageLifecycle, MESSAGE),
}


def _table(table: Table[Any]) -> str:
    """Every move, self-transitions included (the library's table leaves those out)."""
    lines = ["| state | event | guards | target |", "| --- | --- | --- | --- |"]
    for (state, event), moves in table.items():
        for guards, target in moves:
            text = ", ".join(name if value else f"not {name}" for name, value in guards)
            lines.append(f"| {state} | {event} | {text} | {target} |")
    return "\n".join(lines)


def rendered() -> dict[str, str]:
    """File name (relative to specs/lifecycles/) -> content."""
    files = {}
    for name, (machine, table) in MACHINES.items():
        doc = (machine.__doc__ or "").strip()
        files[f"{name}.md"] = (
            f"# {machine.__name__}\n\n{doc}\n\n"
            "Generated from `amc/core/lifecycle.py` by `amc model render`; do not edit.\n\n"
            f"```mermaid\n{formatter.render(machine, 'mermaid').strip()}\n```\n\n"
            f"{_table(table)}\n"
        )
    return files
