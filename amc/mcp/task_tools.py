"""The tools for tasks as a whole: plans submitted up front, and what every task has (status, cancel,
pause, resume, steer, follow-up, artifacts); sessions are tasks too, so these work on them.
"""

from __future__ import annotations

import base64
import time
import uuid
from typing import Annotated

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, ImageContent, TextContent, ToolAnnotations
from pydantic import Field

from . import describe
from .api import Api, ApiFailure, Json
from .errors import tool_error

TaskId = Annotated[str, Field(description="The task's id (a session's session_id is its task id).")]
Steps = Annotated[
    list[Json],
    Field(
        min_length=1,
        description='Steps run in order, each {"id": "a unique name", "action": ..., "args": {...}}. A target '
        'selects an element: {"text": s}, {"text_contains": s}, {"resource_id": s}, {"description": s} or '
        '{"class": s}, each with an optional "nth" (0 = first match). Actions and their args: '
        "shell {command, timeout_seconds?}; tap, double_tap {x, y | target}; long_press {x, y | target, "
        "duration_ms?}; swipe {x1, y1, x2, y2, duration_ms? | direction, target?}; scroll {direction, target?}; "
        "scroll_until_visible {target, direction?, max_swipes?}; back, home, enter {}; type {text, target?, "
        "clear?}; text {text}; keyevent {key}; wait_for {target, gone?, timeout_seconds?}; assert_visible, "
        "assert_not_visible {target}; wait_for_idle {quiet_ms?, timeout_seconds?}; launch {package, activity?}; "
        "stop_app, clear_app_data {package}; open_url {url}; set_orientation {orientation}; list_apps "
        "{third_party?}; screenshot {scale?, format?, quality?, marks?}; ui_tree {diff?}; ui_dump {}; "
        "wait {seconds}; logcat {lines?}.",
    ),
]
TEXT_CHARS = 20000  # how much of a text artifact one call returns
POLL_SECONDS = 0.25
LOOKS = ToolAnnotations(read_only_hint=True)  # tools that only read


def register(server: MCPServer, api: Api) -> None:
    """Add the task tools to `server`; each one talks to the control plane through `api`."""

    @server.tool()
    async def submit_plan(
        steps: Steps,
        serial: Annotated[str | None, Field(description="Run on this phone only (a serial from list_devices).")] = None,
        model: Annotated[str | None, Field(description="Run on a phone of this model, e.g. 'Pixel 7'.")] = None,
        priority: Annotated[int, Field(ge=-1000, le=1000, description="Higher runs first among waiting tasks.")] = 0,
        max_attempts: Annotated[int, Field(ge=1, le=100, description="How many phones may try it in turn.")] = 3,
    ) -> str:
        """Submit a fixed plan of steps that a phone of the fleet runs from start to end without you, e.g. a smoke
        test. Returns the task id at once; task_status follows it, cancel_task stops it, steer_task changes
        the steps not yet run. To decide each action while looking at the screen, use start_session instead."""
        requirements: Json = {"attributes": {} if model is None else {"model": model}}
        if serial is not None:
            requirements["serial"] = serial
        body = {
            "plan": {"steps": steps},
            "requirements": requirements,
            "priority": priority,
            "max_attempts": max_attempts,
            "idempotency_key": f"mcp-{uuid.uuid4()}",
            "labels": {"via": "amc-mcp"},
        }
        try:
            task = await api.submit(body)
        except ApiFailure as failure:
            raise tool_error(failure, "submit the plan") from None
        return f"Submitted: task_id={task['id']}.\n{describe.task_text(task)}"

    @server.tool(annotations=LOOKS)
    async def task_status(task_id: TaskId) -> str:
        """Read a task or a session as the control plane has it: its status (queued, assigned, dispatched, then
        done, failed or cancelled), the phone it runs on, a pending cancel or pause, its result, and each
        step's or action's outcome with its reason."""
        try:
            return describe.task_text(await api.task(task_id))
        except ApiFailure as failure:
            raise tool_error(failure, f"read task {task_id}") from None

    @server.tool()
    async def cancel_task(
        task_id: TaskId,
        reason: Annotated[str | None, Field(description="Why, kept in the task's record.")] = None,
        wait_seconds: Annotated[
            float, Field(ge=0, le=600, description="How long to wait for the phone to confirm the stop.")
        ] = 30,
    ) -> str:
        """Cancel a task or a session: a queued one ends at once; on a phone, the running step or action is
        stopped (it ends `interrupted`, or with its true outcome if it finished first) and nothing more runs.
        Returns the task after the phone confirmed, with every step's or action's outcome."""
        try:
            task = await api.cancel(task_id, reason)
            deadline = time.monotonic() + wait_seconds
            while task["status"] not in describe.FINAL_TASK and time.monotonic() < deadline:
                await anyio.sleep(POLL_SECONDS)
                task = await api.task(task_id)
        except ApiFailure as failure:
            raise tool_error(failure, f"cancel task {task_id}") from None
        if task["status"] not in describe.FINAL_TASK:
            return f"Cancellation requested; the phone has not confirmed the stop yet.\n{describe.task_text(task)}"
        return describe.task_text(task)

    async def post(task_id: str, intent: str, text: str | None = None, data: Json | None = None) -> str:
        try:
            message = await api.message(task_id, intent, text, data)
        except ApiFailure as failure:
            raise tool_error(failure, f"send {intent} to task {task_id}") from None
        return describe.message_text(message, task_id)

    @server.tool()
    async def pause_task(task_id: TaskId) -> str:
        """Pause a task or a session: the step or action running now finishes, and no new one starts until
        resume_task. Returns the pause message's state (queued, delivered, then admitted or completed)."""
        return await post(task_id, "pause")

    @server.tool()
    async def resume_task(task_id: TaskId) -> str:
        """Resume a paused task or session: its next step or action starts. Returns the message's state."""
        return await post(task_id, "resume")

    @server.tool()
    async def steer_task(
        task_id: TaskId,
        text: Annotated[str | None, Field(description="Free-form guidance for the task.")] = None,
        skip: Annotated[list[str] | None, Field(description="Ids of steps not to run.")] = None,
        replace_remaining: Annotated[
            list[Json] | None,
            Field(description="New steps to run instead of every step not yet started (same form as submit_plan)."),
        ] = None,
    ) -> str:
        """Change a running plan's remaining steps: skip some, or replace all that have not started. A step
        already started is never recalled. (A session takes no steer: send it the next action instead.)
        Returns the steer message's state; task_status shows when the phone applied it."""
        edits = [edit for edit in (skip is not None, replace_remaining is not None) if edit]
        if len(edits) > 1:
            raise ToolError("Give either skip or replace_remaining, not both: one steer carries one edit.")
        if text is None and not edits:
            raise ToolError("Give text, skip or replace_remaining: a steer must say something.")
        data: Json | None = {"skip": skip} if skip is not None else None
        if replace_remaining is not None:
            data = {"replace_remaining": replace_remaining}
        return await post(task_id, "steer", text, data)

    @server.tool()
    async def follow_up(
        task_id: TaskId,
        steps: Annotated[
            list[Json] | None,
            Field(description="Steps for a follow-up task on the same kind of phone (same form as submit_plan)."),
        ] = None,
        text: Annotated[str | None, Field(description="What the follow-up is for.")] = None,
    ) -> str:
        """Ask for more work after a task: the steps run as a new follow-up task once this one ends done (at once
        if it already has). Returns the message's state and, once made, the follow-up task's id."""
        if steps is None and text is None:
            raise ToolError("Give steps or text for the follow-up.")
        return await post(task_id, "follow_up", text, None if steps is None else {"steps": steps})

    @server.tool(annotations=LOOKS)
    async def list_artifacts(task_id: TaskId) -> str:
        """List the evidence stored for a task or session: screenshots, UI dumps, logs and long outputs, each
        with its id, the step or action that made it, its type and size. get_artifact reads one."""
        try:
            found = await api.artifacts(task_id)
        except ApiFailure as failure:
            raise tool_error(failure, f"list the artifacts of task {task_id}") from None
        if not found:
            return f"Task {task_id} has no artifacts."
        return f"Artifacts of task {task_id} ({len(found)}):\n" + "\n".join(describe.artifact_line(a) for a in found)

    @server.tool(annotations=LOOKS)
    async def get_artifact(
        task_id: TaskId,
        artifact_id: Annotated[str, Field(description="The artifact's id, from list_artifacts or an action's result.")],
    ) -> CallToolResult:
        """Read one stored artifact: an image (a screenshot) is returned as an image, text (a log, an output, a UI
        dump's XML) as text (at most the first 20000 characters); other bytes are described, not shown."""
        try:
            content_type, data = await api.artifact(task_id, artifact_id)
        except ApiFailure as failure:
            raise tool_error(failure, f"read artifact {artifact_id} of task {task_id}") from None
        media = content_type.split(";")[0].strip()
        head = f"Artifact {artifact_id} of task {task_id}: {media}, {len(data)} bytes."
        if media.startswith("image/"):
            picture = ImageContent(type="image", data=base64.b64encode(data).decode(), mime_type=media)
            return CallToolResult(content=[TextContent(type="text", text=head), picture])
        if media.startswith("text/") or media.endswith(("xml", "json")):
            text = data.decode("utf-8", errors="replace")
            if len(text) > TEXT_CHARS:
                head += f" The first {TEXT_CHARS} of {len(text)} characters:"
                text = text[:TEXT_CHARS]
            return CallToolResult(content=[TextContent(type="text", text=f"{head}\n{text}")])
        return CallToolResult(content=[TextContent(type="text", text=head + " Not text or an image: not shown.")])
