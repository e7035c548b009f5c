"""Failures as tool errors a model can act on: one sentence saying what to change.

A refusal of the server becomes a `ToolError` (the MCP result `isError: true`) carrying the
server's own words and code, and, where the code has an obvious next step, that step. Arguments
that do not fit a tool's input schema are told the same way: which argument, what it must be,
what was given (the SDK's own report is pydantic's multi-line dump, which a model reads badly).
The tool call itself never crashes: the model reads what went wrong and decides.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import ValidationError

from .api import ApiFailure

_NEXT_STEP = {
    "task_terminal": "the task or session has ended; task_status says how. Start a new session to go on.",
    "session_ended": "end_session was already called for this session: it takes no more actions.",
    "not_a_session": "this task runs a plan, not a session; use the plan tools (steer_task, cancel_task) on it.",
    "action_conflict": "that action id was used before with other arguments.",
    "unreachable": "the control plane did not answer; it may or may not have done what was asked. Check with "
    "task_status before sending it again.",
}
# The words pydantic's messages start with for the value itself.
_SUBJECTS = frozenset({"Input", "String", "List", "Dictionary", "Tuple", "Set", "Value", "Object"})
SHOWN_INPUT_CHARS = 40  # how much of a rejected value an argument error quotes


def tool_error(failure: ApiFailure, doing: str) -> ToolError:
    """`doing` says what was attempted, e.g. "tap in session t_1"."""
    said = f"Could not {doing}: {failure.message}"
    if failure.status in (401, 403):
        said += " (the token given to amc mcp, AMC_TOKEN, is not accepted for this)"
    elif failure.status == 404:
        said += " (no such task, action or artifact visible to this token: check the id)"
    hint = _NEXT_STEP.get(failure.code)
    return ToolError(f"{said}. {hint}" if hint else said)


def argument_error(tool: str, invalid: ValidationError) -> ToolError:
    """`tap was called with bad arguments: x should be greater than or equal to 0 (got -5). Fix it and
    call tap again.` One clause per argument, the first complaint about each."""
    said: dict[str, str] = {}
    for error in invalid.errors():
        name = _argument_name(error["loc"])
        if name not in said:
            said[name] = _complaint(name, error)
    return _sentence(tool, said.values())


def unknown_arguments(tool: str, unknown: Iterable[str], known: Iterable[str]) -> ToolError:
    """An argument the tool does not have is refused rather than ignored: a misspelt `wait_second` or
    `text_contain` would otherwise silently change what the call does."""
    names = ", ".join(repr(name) for name in sorted(unknown))
    return ToolError(
        f"{tool} has no argument {names}; its arguments are {', '.join(sorted(known))}. Call {tool} again with those."
    )


def _sentence(tool: str, clauses: Iterable[str]) -> ToolError:
    listed = list(clauses)
    them = "it" if len(listed) == 1 else "them"
    return ToolError(f"{tool} was called with bad arguments: {'; '.join(listed)}. Fix {them} and call {tool} again.")


def _argument_name(loc: tuple[int | str, ...]) -> str:
    """The argument and, inside a list, the position: `steps.2`. A union's member tags (`str`,
    `function-after[...]`) that pydantic puts in `loc` are not the caller's names and are dropped."""
    name = str(loc[0]) if loc else "arguments"
    for part in loc[1:]:
        if isinstance(part, int):
            name += f".{part}"
    return name


def _complaint(name: str, error: Any) -> str:
    if error["type"] == "missing":
        return f"{name} is required"
    message = str(error["msg"]).removeprefix("Value error, ")
    subject, _, rest = message.partition(" ")
    if subject in _SUBJECTS and rest.startswith("should"):
        message = f"{name} {rest}"  # "Input should be ...", "String should have ..." name the argument instead
    else:
        message = f"{name}: {message[:1].lower()}{message[1:]}"
    shown = repr(error.get("input"))
    if len(shown) > SHOWN_INPUT_CHARS:
        shown = shown[: SHOWN_INPUT_CHARS - 1] + "…"
    return f"{message} (got {shown})"
