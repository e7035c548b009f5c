"""The tools of an interactive session: one phone, one action at a time (specs/protocol.md Part D).

A model starts a session, looks (screenshot, ui_tree), acts (tap, swipe, type_text, press_key,
launch_app, shell, tap_element), looks again, and ends the session. Each action is posted to
the control plane, which hands it to the phone's Host Agent; the tool waits for its outcome
(bounded by `wait_seconds`) and says exactly what the server recorded.
"""

from __future__ import annotations

import base64
import secrets
import time
import uuid
from typing import Annotated

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, ImageContent, TextContent, ToolAnnotations
from pydantic import Field

from amc.core.lifecycle import StepStatus, TaskStatus

from . import describe, uitree
from .api import Api, ApiFailure, Json
from .errors import tool_error

SessionId = Annotated[str, Field(description="The session_id that start_session returned.")]
Coordinate = Annotated[int, Field(ge=0, le=100000, description="Pixels from the left (x) or top (y) of the screen.")]
Wait = Annotated[
    float,
    Field(
        ge=0,
        le=600,
        description="How long to wait for the action's outcome, in seconds (0..600). If it has not ended by "
        "then, the result says it is still queued or running; action_status waits again.",
    ),
]
DEFAULT_WAIT = 60.0
# Tools that only look: they change nothing on the phone or in the control plane (a client may run
# them without asking its user).
LOOKS = ToolAnnotations(read_only_hint=True)
ASSIGN_POLL_SECONDS = 0.25


def register(server: MCPServer, api: Api) -> None:
    """Add the session tools to `server`; each one talks to the control plane through `api`."""

    async def act(session_id: str, action: str, args: Json, wait_seconds: float) -> Json:
        """Post one action and wait (bounded) for its outcome; the action as the server has it then."""
        action_id = f"{action}-{secrets.token_hex(4)}"
        step = {"id": action_id, "action": action, "args": args}
        deadline = time.monotonic() + wait_seconds
        try:
            found = await api.post_action(session_id, step, wait_seconds)
            while not describe.is_final(found) and (left := deadline - time.monotonic()) > 0:
                found = await api.action(session_id, action_id, left)
        except ApiFailure as failure:
            raise tool_error(failure, f"send {action} to session {session_id}") from None
        return found

    def outcome(action: Json, *extra: TextContent | ImageContent) -> CallToolResult:
        """The action's outcome; an error result (isError) unless it completed or is still pending."""
        failed = describe.is_final(action) and action["status"] != StepStatus.completed
        return CallToolResult(
            content=[TextContent(type="text", text=describe.action_text(action)), *extra], is_error=failed
        )

    async def artifact_of(session_id: str, action: Json, kind: str) -> tuple[str, bytes] | None:
        """The first artifact of a completed action whose content type contains `kind` ("image", "xml")."""
        for artifact_id in action.get("artifacts") or []:
            try:
                content_type, data = await api.artifact(session_id, artifact_id)
            except ApiFailure as failure:
                raise tool_error(failure, f"read artifact {artifact_id} of action {action['id']}") from None
            if kind in content_type:
                return content_type, data
        return None

    @server.tool(annotations=LOOKS)
    async def list_devices() -> str:
        """List the phones of the fleet: every host (a machine with phones attached), each phone's serial,
        its attributes (model, manufacturer, Android version...), whether it is online, and whether it is free
        or busy with a task. Use it before start_session to choose requirements (a serial or a model)."""
        try:
            return describe.devices_text(await api.hosts())
        except ApiFailure as failure:
            raise tool_error(failure, "list the devices") from None

    @server.tool()
    async def start_session(
        ctx: Context,
        serial: Annotated[str | None, Field(description="Run on this phone only (a serial from list_devices).")] = None,
        model: Annotated[str | None, Field(description="Run on a phone of this model, e.g. 'Pixel 7'.")] = None,
        attributes: Annotated[
            dict[str, str] | None,
            Field(description="Other device attributes the phone must have, e.g. {'sdk': '34'}."),
        ] = None,
        idle_timeout_seconds: Annotated[
            float,
            Field(
                gt=0,
                le=86400,
                description="The session ends by itself (and frees the phone) after this many seconds without an action.",
            ),
        ] = 300,
        wait_seconds: Annotated[
            float, Field(ge=0, le=3600, description="How long to wait for a phone to be assigned.")
        ] = 120,
    ) -> str:
        """Start an interactive session: the control plane reserves one phone of its fleet for you alone, and
        you drive it one action at a time (screenshot and ui_tree to look; tap, tap_element, swipe, type_text,
        press_key, launch_app, shell to act) until you call end_session. Reports progress while it waits for a
        free phone. Returns the session_id that every other session tool needs, and the phone it got. Call
        end_session when you are done, so that the phone goes back to the fleet."""
        requirements: Json = {"attributes": dict(attributes or {})}
        if model is not None:
            requirements["attributes"]["model"] = model
        if serial is not None:
            requirements["serial"] = serial
        body = {
            "session": {"idle_timeout_seconds": idle_timeout_seconds},
            "requirements": requirements,
            # A key makes the submit safe to send again if its answer is lost (SUBMIT-IDEMPOTENT).
            "idempotency_key": f"mcp-{uuid.uuid4()}",
            "labels": {"via": "amc-mcp"},
        }
        try:
            task = await api.submit(body)
            started = time.monotonic()
            while task["status"] == TaskStatus.queued.value:
                waited = time.monotonic() - started
                if waited >= wait_seconds:
                    return (
                        f"Session {task['id']} is submitted but no phone was assigned within {wait_seconds:g} s "
                        "(none is free, or none matches the requirements). It stays queued and starts when a phone "
                        f"frees up: session_id={task['id']}. Actions sent meanwhile wait for the phone. "
                        "task_status shows when it starts; cancel_task withdraws it."
                    )
                await ctx.report_progress(waited, wait_seconds, f"session {task['id']} queued: waiting for a phone")
                await anyio.sleep(ASSIGN_POLL_SECONDS)
                task = await api.task(task["id"])
        except ApiFailure as failure:
            raise tool_error(failure, "start a session") from None
        if task["status"] not in describe.ON_A_DEVICE:
            raise ToolError(f"The session ended before it could be used.\n{describe.task_text(task)}")
        attempt = task["attempts"][-1]
        await ctx.report_progress(wait_seconds, wait_seconds, f"phone {attempt['device']} assigned")
        return (
            f"Session started: session_id={task['id']}, on phone {attempt['device']} (host {attempt['host_id']}). "
            f"It ends by itself after {idle_timeout_seconds:g} s without an action. Take a screenshot or read "
            "the ui_tree to see the screen."
        )

    @server.tool()
    async def tap(
        session_id: SessionId, x: Coordinate, y: Coordinate, wait_seconds: Wait = DEFAULT_WAIT
    ) -> CallToolResult:
        """Tap the screen of the session's phone at pixel (x, y). To tap a button or a row by its label,
        tap_element is easier: it finds the element in the current screen for you. Returns the action's
        outcome as the phone reported it: completed, failed, interrupted, refused or not_started, with a reason."""
        return outcome(await act(session_id, "tap", {"x": x, "y": y}, wait_seconds))

    @server.tool()
    async def swipe(
        session_id: SessionId,
        x1: Coordinate,
        y1: Coordinate,
        x2: Coordinate,
        y2: Coordinate,
        duration_ms: Annotated[int, Field(ge=0, le=600000, description="How long the swipe takes.")] = 300,
        wait_seconds: Wait = DEFAULT_WAIT,
    ) -> CallToolResult:
        """Swipe on the phone's screen from (x1, y1) to (x2, y2), e.g. to scroll a list (swipe up to see what is
        below). Returns the action's outcome."""
        args = {"x1": x1, "y1": y1, "x2": x2, "y2": y2, "duration_ms": duration_ms}
        return outcome(await act(session_id, "swipe", args, wait_seconds))

    @server.tool()
    async def type_text(
        session_id: SessionId,
        text: Annotated[str, Field(description="The text to type, as if on the keyboard.")],
        wait_seconds: Wait = DEFAULT_WAIT,
    ) -> CallToolResult:
        """Type text into the focused field of the phone (tap the field first). Returns the action's outcome."""
        return outcome(await act(session_id, "text", {"text": text}, wait_seconds))

    @server.tool()
    async def press_key(
        session_id: SessionId,
        key: Annotated[
            str,
            Field(
                min_length=1,
                description="An Android key code name such as KEYCODE_BACK, KEYCODE_HOME, KEYCODE_ENTER, "
                "or its number, e.g. '4'.",
            ),
        ],
        wait_seconds: Wait = DEFAULT_WAIT,
    ) -> CallToolResult:
        """Press a key on the phone: BACK (KEYCODE_BACK) goes back one screen, HOME (KEYCODE_HOME) shows the
        home screen. Returns the action's outcome."""
        value: str | int = int(key) if key.isdigit() else key
        return outcome(await act(session_id, "keyevent", {"key": value}, wait_seconds))

    @server.tool()
    async def launch_app(
        session_id: SessionId,
        package: Annotated[str, Field(min_length=1, description="The app's package, e.g. com.android.settings.")],
        activity: Annotated[
            str | None, Field(min_length=1, description="An activity to open instead of the app's launcher one.")
        ] = None,
        wait_seconds: Wait = DEFAULT_WAIT,
    ) -> CallToolResult:
        """Start an app on the phone by its package name (and, optionally, a given activity of it). Returns the
        action's outcome."""
        args = {"package": package} if activity is None else {"package": package, "activity": activity}
        return outcome(await act(session_id, "launch", args, wait_seconds))

    @server.tool()
    async def shell(
        session_id: SessionId,
        command: Annotated[str, Field(min_length=1, description="The shell command line, run on the phone.")],
        timeout_seconds: Annotated[
            float | None, Field(gt=0, le=86400, description="The phone stops the command after this long.")
        ] = None,
        wait_seconds: Wait = DEFAULT_WAIT,
    ) -> CallToolResult:
        """Run a shell command on the phone (adb shell) and return its outcome and output. A long command can be
        left running: pass a small wait_seconds, then call action_status to wait for it, or cancel_task to stop
        it (it then ends interrupted). The host's policy may refuse a command: that is reported `refused`."""
        args: Json = {"command": command}
        if timeout_seconds is not None:
            args["timeout_seconds"] = timeout_seconds
        return outcome(await act(session_id, "shell", args, wait_seconds))

    @server.tool(annotations=LOOKS)
    async def screenshot(session_id: SessionId, wait_seconds: Wait = DEFAULT_WAIT) -> CallToolResult:
        """Capture the phone's screen now and return it as a PNG image, with the action's outcome. Use it to see
        what is on the screen before you decide the next action; ui_tree gives the same screen as text with
        exact coordinates."""
        action = await act(session_id, "screenshot", {}, wait_seconds)
        if action["status"] != StepStatus.completed:
            return outcome(action)
        image = await artifact_of(session_id, action, "image")
        if image is None:
            return CallToolResult(
                content=[
                    TextContent(
                        type="text",
                        text=describe.action_text(action)
                        + "\nThe screenshot completed but no image was stored for it.",
                    )
                ],
                is_error=True,
            )
        content_type, data = image
        picture = ImageContent(type="image", data=base64.b64encode(data).decode(), mime_type=content_type.split(";")[0])
        return outcome(action, picture)

    async def dump(session_id: str, wait_seconds: float) -> tuple[Json, list[uitree.Element] | None]:
        action = await act(session_id, "ui_dump", {}, wait_seconds)
        if action["status"] != StepStatus.completed:
            return action, None
        found = await artifact_of(session_id, action, "xml")
        if found is None:
            raise ToolError(describe.action_text(action) + "\nThe UI dump completed but no XML was stored for it.")
        try:
            return action, uitree.compact(found[1])
        except uitree.UiTreeError as error:
            raise ToolError(f"{describe.action_text(action)}\n{error}") from None

    @server.tool(annotations=LOOKS)
    async def ui_tree(session_id: SessionId, wait_seconds: Wait = DEFAULT_WAIT) -> CallToolResult:
        """Read what is on the phone's screen now as text: one line per element that has a text, a description,
        a resource-id or a click handler, with its class, its bounds [left,top][right,bottom] and the centre to
        tap. Use it to find what to tap (tap_element taps an element by its text or resource-id)."""
        action, elements = await dump(session_id, wait_seconds)
        if elements is None:
            return outcome(action)
        text = f"Screen elements (from action {action['id']}, {len(elements)} elements):\n{uitree.render(elements)}"
        return CallToolResult(content=[TextContent(type="text", text=text)])

    @server.tool()
    async def tap_element(
        session_id: SessionId,
        text: Annotated[
            str | None, Field(description="The element's text or content description, exactly as ui_tree shows it.")
        ] = None,
        resource_id: Annotated[
            str | None, Field(description="The element's resource-id, e.g. android:id/title.")
        ] = None,
        index: Annotated[
            int | None,
            Field(ge=0, description="When several elements match: which of them, counting from 0 in screen order."),
        ] = None,
        wait_seconds: Wait = DEFAULT_WAIT,
    ) -> CallToolResult:
        """Tap an element of the current screen by its text (or content description) and/or resource-id: reads
        the screen afresh (a UI dump), finds the element and taps the centre of its bounds. If nothing matches,
        or several elements match and no index is given, nothing is tapped and the result lists what is there."""
        if text is None and resource_id is None:
            raise ToolError("Give text or resource_id (or both) to say which element to tap.")
        dumped, elements = await dump(session_id, wait_seconds)
        if elements is None:
            return outcome(dumped)
        found = uitree.matching(elements, text=text, resource_id=resource_id)
        wanted = " and ".join(
            part
            for part in (f"text {text!r}" if text else "", f"resource-id {resource_id!r}" if resource_id else "")
            if part
        )
        if not found:
            raise ToolError(
                f"Nothing tapped: no element on the screen has {wanted}. The screen has:\n{uitree.render(elements)}"
            )
        if len(found) > 1 and index is None:
            raise ToolError(
                f"Nothing tapped: {len(found)} elements have {wanted}; pass index (0..{len(found) - 1}) to choose one:\n"
                + uitree.render(found)
            )
        if index is not None and index >= len(found):
            raise ToolError(
                f"Nothing tapped: only {len(found)} element(s) have {wanted}; index {index} is out of range."
            )
        element = found[index or 0]
        x, y = element.centre
        action = await act(session_id, "tap", {"x": x, "y": y}, wait_seconds)
        result = outcome(action)
        found_in = f"found in a fresh UI dump, action {dumped['id']}"
        result.content.insert(
            0, TextContent(type="text", text=f"Tapped the centre ({x}, {y}) of {element.line()} ({found_in})")
        )
        return result

    @server.tool(annotations=LOOKS)
    async def action_status(
        session_id: SessionId,
        action_id: Annotated[str, Field(description="The action's id, as a tool result showed it.")],
        wait_seconds: Wait = 0,
    ) -> CallToolResult:
        """Read one action of the session, waiting up to wait_seconds for it to end if it is still queued or
        running. Returns its outcome (completed, failed, interrupted, refused, not_started, with a reason)."""
        deadline = time.monotonic() + wait_seconds
        try:
            action = await api.action(session_id, action_id, wait_seconds)
            while not describe.is_final(action) and (left := deadline - time.monotonic()) > 0:
                action = await api.action(session_id, action_id, left)
        except ApiFailure as failure:
            raise tool_error(failure, f"read action {action_id} of session {session_id}") from None
        return outcome(action)

    @server.tool()
    async def end_session(session_id: SessionId) -> str:
        """End the session: the actions already sent still run, then the phone goes back to the fleet and the
        session ends `done`. Call it when you have finished. Returns the session's final state and its actions."""
        try:
            task = await api.end(session_id)
            deadline = time.monotonic() + DEFAULT_WAIT
            while task["status"] not in describe.FINAL_TASK and time.monotonic() < deadline:
                await anyio.sleep(ASSIGN_POLL_SECONDS)
                task = await api.task(session_id)
        except ApiFailure as failure:
            raise tool_error(failure, f"end session {session_id}") from None
        if task["status"] not in describe.FINAL_TASK:
            return (
                f"The end is requested; the session waits for its last actions to finish.\n{describe.task_text(task)}"
            )
        if not (task.get("session") or {}).get("end_requested_at"):
            return f"The session had already ended before this call; nothing was changed.\n{describe.task_text(task)}"
        return describe.task_text(task)
