"""Failed requests as tool errors a model can act on.

A refusal of the server becomes a `ToolError` (the MCP result `isError: true`) carrying the
server's own words and code, and, where the code has an obvious next step, that step. The
tool call itself never crashes: the model reads what went wrong and decides.
"""

from __future__ import annotations

from mcp.server.mcpserver.exceptions import ToolError

from .api import ApiFailure

_NEXT_STEP = {
    "task_terminal": "the task or session has ended; task_status says how. Start a new session to go on.",
    "session_ended": "end_session was already called for this session: it takes no more actions.",
    "not_a_session": "this task runs a plan, not a session; use the plan tools (steer_task, cancel_task) on it.",
    "action_conflict": "that action id was used before with other arguments.",
    "unreachable": "the control plane did not answer; it may or may not have done what was asked. Check with "
    "task_status before sending it again.",
}


def tool_error(failure: ApiFailure, doing: str) -> ToolError:
    """`doing` says what was attempted, e.g. "tap in session t_1"."""
    said = f"Could not {doing}: {failure.message}"
    if failure.status in (401, 403):
        said += " (the token given to amc mcp, AMC_TOKEN, is not accepted for this)"
    elif failure.status == 404:
        said += " (no such task, action or artifact visible to this token: check the id)"
    hint = _NEXT_STEP.get(failure.code)
    return ToolError(f"{said}. {hint}" if hint else said)
