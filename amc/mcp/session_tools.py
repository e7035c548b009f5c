"""The tools of an interactive session: one phone, one action at a time (specs/protocol.md Part D).

A model starts a session, observes (the screenshot and the indexed element list together), acts
on an element by its index, by a selector or at a point (tap, double_tap, long_press, scroll,
type, wait_for, back, home, ...), observes again, and ends the session. Each action is posted
to the control plane, which hands it to the phone's Host Agent; the Host Agent finds the element
on a fresh UI dump as the action runs. The tool waits for the outcome (bounded by
`wait_seconds`) and says exactly what the server recorded, as text and as structured content.
"""

from __future__ import annotations

import base64
import secrets
import time
import uuid
from pathlib import Path
from typing import Annotated, Literal

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, ImageContent, TextContent, ToolAnnotations
from pydantic import Field

from amc.core.lifecycle import StepStatus, TaskStatus

from . import describe, targets
from .api import Api, ApiFailure, Json, artifact_path
from .errors import tool_error
from .targets import ClassName, Description, Index, Nth, ResourceId, Text, TextContains

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
Direction = Annotated[
    Literal["up", "down", "left", "right"],
    Field(description="Which way the content moves into view: down shows what is below (the finger moves up)."),
]
DEFAULT_WAIT = 60.0
# Tools that only look: they change nothing on the phone or in the control plane (a client may run
# them without asking its user).
LOOKS = ToolAnnotations(read_only_hint=True)
ASSIGN_POLL_SECONDS = 0.25
# wait_for waits on the phone for up to its timeout; the tool waits this much longer for the outcome.
WAIT_FOR_MARGIN_SECONDS = 30.0

# Why a queued session has no phone (specs/protocol.md, Why a queued task waits), for a model.
_WAITING = {
    "no_device_matches": "no registered phone meets its requirements",
    "matching_devices_offline": "every phone that meets its requirements is offline",
    "matching_devices_busy": "every online phone that meets its requirements is busy with another task",
    "ready": "a free phone meets its requirements but its host has not taken the session yet",
    "held": "it is paused while queued",
}


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

    def outcome(action: Json, *extra: TextContent | ImageContent, text: str | None = None) -> CallToolResult:
        """The action's outcome, as text and as structured content (`describe.action_summary`); an error
        result (isError) unless it completed or is still pending."""
        failed = describe.is_final(action) and action["status"] != StepStatus.completed
        return CallToolResult(
            content=[TextContent(type="text", text=text or describe.action_text(action)), *extra],
            structured_content=describe.action_summary(action),
            is_error=failed,
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
        keep_waiting: Annotated[
            bool,
            Field(
                description="If no phone is assigned within wait_seconds (or none matches), leave the session "
                "queued so that it starts when a phone frees up, instead of withdrawing it."
            ),
        ] = False,
    ) -> CallToolResult:
        """Start an interactive session: the control plane reserves one phone of its fleet for you alone, and
        you drive it one action at a time (observe to look; tap, type, scroll, back... to act) until you call
        end_session. Reports progress while it waits for a free phone. Returns the session_id that every other
        session tool needs, and the phone it got. If no phone can be had (none matches the requirements, or
        none is free within wait_seconds) it says why and withdraws the request, unless keep_waiting is true.
        Call end_session when you are done, so that the phone goes back to the fleet."""
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
                waiting = task.get("waiting") or {}
                # No phone meets the requirements: waiting would only hold the request (unless asked to).
                hopeless = waiting.get("reason") == "no_device_matches" and not keep_waiting
                if hopeless or waited >= wait_seconds:
                    return await unmet(task, requirements, waited, keep_waiting)
                await ctx.report_progress(waited, wait_seconds, f"session {task['id']} queued: waiting for a phone")
                await anyio.sleep(ASSIGN_POLL_SECONDS)
                task = await api.task(task["id"])
        except ApiFailure as failure:
            raise tool_error(failure, "start a session") from None
        if task["status"] not in describe.ON_A_DEVICE:
            raise ToolError(f"The session ended before it could be used.\n{describe.task_text(task)}")
        attempt = task["attempts"][-1]
        await ctx.report_progress(wait_seconds, wait_seconds, f"phone {attempt['device']} assigned")
        text = (
            f"Session started: session_id={task['id']}, on phone {attempt['device']} (host {attempt['host_id']}). "
            f"It ends by itself after {idle_timeout_seconds:g} s without an action. Call observe to see the screen."
        )
        structured = {
            "session_id": task["id"],
            "status": task["status"],
            "device": attempt["device"],
            "host": attempt["host_id"],
        }
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured)

    async def unmet(task: Json, requirements: Json, waited: float, keep_waiting: bool) -> CallToolResult:
        """A session that got no phone: why, in the server's words; withdrawn unless asked to keep waiting."""
        waiting = task.get("waiting") or {}
        reason = waiting.get("reason")
        why = (
            f"{_WAITING.get(str(reason), 'the server gave no reason')} "
            f"(waiting: {reason}, matching_devices: {waiting.get('matching_devices')}, "
            f"requirements: {_requirements_text(requirements)})"
        )
        structured = {"session_id": task["id"], "status": task["status"], "waiting": waiting or None}
        if keep_waiting:
            text = (
                f"No phone was assigned within {waited:.0f} s: {why}. The session stays queued, as asked, and "
                f"starts when a phone frees up: session_id={task['id']}. Actions sent meanwhile wait for the phone; "
                "task_status shows when it starts, cancel_task withdraws it."
            )
            return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured)
        try:
            # Cancelled even if a phone was assigned since the last read: the caller was told there is none.
            await api.cancel(task["id"], "amc mcp: no phone for the session")
        except ApiFailure as failure:
            raise tool_error(failure, f"withdraw the session {task['id']} that got no phone ({why})") from None
        after = "at once" if reason == "no_device_matches" else f"after waiting {waited:.0f} s"
        raise ToolError(
            f"No session: {why}, {after}. The request ({task['id']}) was cancelled, so nothing is left queued. "
            "list_devices shows the phones there are; call start_session again with other requirements, or with "
            "keep_waiting: true to wait in the queue for a phone."
        )

    @server.tool(annotations=LOOKS)
    async def observe(
        session_id: SessionId,
        scale: Annotated[
            float, Field(ge=0.1, le=1, description="The image's size relative to the screen (0.1..1).")
        ] = 0.5,
        marks: Annotated[
            bool, Field(description="Draw a numbered box on every listed element, labelled with its index.")
        ] = False,
        format: Annotated[Literal["png", "jpeg", "webp"], Field(description="The image's encoding.")] = "png",
        quality: Annotated[
            int | None, Field(ge=1, le=100, description="Quality of jpeg or webp, 1..100 (default 80).")
        ] = None,
        wait_seconds: Wait = DEFAULT_WAIT,
    ) -> CallToolResult:
        """Look at the phone's screen: one screenshot (scaled, with numbered boxes if marks is true) and the
        list of the screen's elements, one line each with its index [n], class, text, resource-id, bounds (in
        screen pixels) and flags such as clickable or scrollable. Both come from the same moment, after the
        screen has settled, so act on an element by its index (tap index=n) right after observing; if the
        screen changes meanwhile the action is refused and you observe again."""
        args: Json = {"scale": scale, "format": format, "marks": marks}
        if quality is not None:
            args["quality"] = quality
        action = await act(session_id, "screenshot", args, wait_seconds)
        if action["status"] != StepStatus.completed:
            return outcome(action)
        observed = describe.output_object(action)
        image = await artifact_of(session_id, action, "image")
        parts: list[TextContent | ImageContent] = []
        notes = []
        if image is None:
            notes.append("The screenshot completed but no image was stored for it.")
        else:
            content_type, data = image
            mime = content_type.split(";")[0]
            parts.append(ImageContent(type="image", data=base64.b64encode(data).decode(), mime_type=mime))
        if observed is None or not isinstance(observed.get("elements"), list):
            notes.append(
                "No element list came with the screenshot (the Host Agent did not report one): act by x,y, "
                "or read the ui_tree."
            )
            text = describe.action_text(action)
        else:
            text = describe.observation_text(action, observed)
        return outcome(action, *parts, text="\n".join([text, *notes]))

    @server.tool(annotations=LOOKS)
    async def ui_tree(
        session_id: SessionId,
        diff: Annotated[
            bool, Field(description="Also say what was added, removed or changed since the previous ui_tree.")
        ] = False,
        wait_seconds: Wait = DEFAULT_WAIT,
    ) -> CallToolResult:
        """Read the phone's screen as text only (no image; cheaper than observe): the same indexed element
        list, one line per element with its index [n], class, text, resource-id, bounds and flags. With diff,
        also what changed since the previous ui_tree of this session. Indexes refer to this reading."""
        action = await act(session_id, "ui_tree", {"diff": diff}, wait_seconds)
        observed = describe.output_object(action)
        if action["status"] != StepStatus.completed or observed is None:
            return outcome(action)
        return outcome(action, text=describe.observation_text(action, observed))

    @server.tool()
    async def tap(
        session_id: SessionId,
        index: Index = None,
        text: Text = None,
        text_contains: TextContains = None,
        resource_id: ResourceId = None,
        description: Description = None,
        class_name: ClassName = None,
        nth: Nth = None,
        x: targets.Coordinate = None,
        y: targets.Coordinate = None,
        wait_seconds: Wait = DEFAULT_WAIT,
    ) -> CallToolResult:
        """Tap an element of the phone's screen: by its index [n] from your last observe, or by a selector
        (text, text_contains, resource_id, description or class, plus nth among several matches), or at the
        point x,y as a fallback. The phone finds the element on the screen as it is when the tap runs. Returns
        the outcome (completed, failed with the reason and what the screen showed, ...) and the element and
        point it tapped."""
        where = targets.element_or_point(
            "tap", x=x, y=y, index=index, text=text, text_contains=text_contains, resource_id=resource_id,
            description=description, class_name=class_name, nth=nth,
        )  # fmt: skip
        return outcome(await act(session_id, "tap", where, wait_seconds))

    @server.tool()
    async def double_tap(
        session_id: SessionId,
        index: Index = None,
        text: Text = None,
        text_contains: TextContains = None,
        resource_id: ResourceId = None,
        description: Description = None,
        class_name: ClassName = None,
        nth: Nth = None,
        x: targets.Coordinate = None,
        y: targets.Coordinate = None,
        wait_seconds: Wait = DEFAULT_WAIT,
    ) -> CallToolResult:
        """Tap an element twice in quick succession (a double tap), chosen as for tap: index, a selector, or
        x,y. Returns the outcome with the element and point."""
        where = targets.element_or_point(
            "double_tap", x=x, y=y, index=index, text=text, text_contains=text_contains, resource_id=resource_id,
            description=description, class_name=class_name, nth=nth,
        )  # fmt: skip
        return outcome(await act(session_id, "double_tap", where, wait_seconds))

    @server.tool()
    async def long_press(
        session_id: SessionId,
        index: Index = None,
        text: Text = None,
        text_contains: TextContains = None,
        resource_id: ResourceId = None,
        description: Description = None,
        class_name: ClassName = None,
        nth: Nth = None,
        x: targets.Coordinate = None,
        y: targets.Coordinate = None,
        duration_ms: Annotated[int, Field(ge=1, le=60000, description="How long to hold, in ms.")] = 1000,
        wait_seconds: Wait = DEFAULT_WAIT,
    ) -> CallToolResult:
        """Press and hold an element (a long press, e.g. to open a context menu), chosen as for tap: index, a
        selector, or x,y. Returns the outcome with the element and point."""
        where = targets.element_or_point(
            "long_press", x=x, y=y, index=index, text=text, text_contains=text_contains, resource_id=resource_id,
            description=description, class_name=class_name, nth=nth,
        )  # fmt: skip
        return outcome(await act(session_id, "long_press", where | {"duration_ms": duration_ms}, wait_seconds))

    @server.tool()
    async def scroll(
        session_id: SessionId,
        direction: Direction,
        index: Index = None,
        text: Text = None,
        text_contains: TextContains = None,
        resource_id: ResourceId = None,
        description: Description = None,
        class_name: ClassName = None,
        nth: Nth = None,
        wait_seconds: Wait = DEFAULT_WAIT,
    ) -> CallToolResult:
        """Scroll the screen, or one scrollable element (by index or a selector, as for tap), by about one
        screenful. direction says which way the content moves into view: down shows what is below, up what
        is above. Observe afterwards to see the new elements."""
        target = targets.selector(
            "scroll", index=index, text=text, text_contains=text_contains, resource_id=resource_id,
            description=description, class_name=class_name, nth=nth,
        )  # fmt: skip
        args: Json = {"direction": direction} | ({} if target is None else {"target": target})
        return outcome(await act(session_id, "scroll", args, wait_seconds))

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
        """Swipe on the phone's screen from (x1, y1) to (x2, y2), in screen pixels. To scroll a list, scroll is
        simpler. Returns the action's outcome."""
        args = {"x1": x1, "y1": y1, "x2": x2, "y2": y2, "duration_ms": duration_ms}
        return outcome(await act(session_id, "swipe", args, wait_seconds))

    @server.tool(name="type")
    async def type_(
        session_id: SessionId,
        text: Annotated[str, Field(description="The text to type; may be empty only with clear.")],
        clear: Annotated[bool, Field(description="Replace the field's content instead of adding to it.")] = False,
        index: Index = None,
        field_text: Annotated[
            str | None,
            Field(description="Type into the element whose text (or hint) is exactly this; it is tapped first."),
        ] = None,
        text_contains: TextContains = None,
        resource_id: ResourceId = None,
        description: Description = None,
        class_name: ClassName = None,
        nth: Nth = None,
        wait_seconds: Wait = DEFAULT_WAIT,
    ) -> CallToolResult:
        """Type text into a field: the element given by index or a selector (resource_id, class, field_text
        for the text or hint the field shows, ...) is tapped first; with none, the text goes to the focused field.
        clear replaces what the field holds. Text other than ASCII needs the ADB keyboard on the phone; without
        it the action fails and says so (nothing else is typed). Returns the outcome with the element."""
        target = targets.selector(
            "type", index=index, text=field_text, text_contains=text_contains, resource_id=resource_id,
            description=description, class_name=class_name, nth=nth,
        )  # fmt: skip
        if not text and not clear:
            raise ToolError("type got an empty text: give the text to type, or clear: true to empty the field.")
        args: Json = {"text": text, "clear": clear} | ({} if target is None else {"target": target})
        return outcome(await act(session_id, "type", args, wait_seconds))

    @server.tool()
    async def wait_for(
        session_id: SessionId,
        text: Text = None,
        text_contains: TextContains = None,
        resource_id: ResourceId = None,
        description: Description = None,
        class_name: ClassName = None,
        nth: Nth = None,
        gone: Annotated[bool, Field(description="Wait for the element to disappear instead.")] = False,
        timeout_seconds: Annotated[
            float, Field(gt=0, le=600, description="Fail if it has not happened within this many seconds.")
        ] = 10,
        wait_seconds: Annotated[
            float | None,
            Field(ge=0, le=900, description="How long this call waits for the outcome (default: the timeout + 30 s)."),
        ] = None,
    ) -> CallToolResult:
        """Wait until an element is on the screen (or, with gone, no longer is), within timeout_seconds: e.g.
        after a tap that loads a page. The element is given by a selector (text, text_contains, resource_id,
        description or class; not an index, since it need not be on the last observation). Fails with the
        reason and what the screen showed if it does not happen in time."""
        target = targets.selector(
            "wait_for", text=text, text_contains=text_contains, resource_id=resource_id, description=description,
            class_name=class_name, nth=nth,
        )  # fmt: skip
        if target is None:
            raise ToolError(
                "wait_for needs the element to wait for: give one of text, text_contains, resource_id, "
                "description or class."
            )
        args = {"target": target, "gone": gone, "timeout_seconds": timeout_seconds}
        wait = timeout_seconds + WAIT_FOR_MARGIN_SECONDS if wait_seconds is None else wait_seconds
        return outcome(await act(session_id, "wait_for", args, wait))

    @server.tool()
    async def back(session_id: SessionId, wait_seconds: Wait = DEFAULT_WAIT) -> CallToolResult:
        """Press the phone's BACK button: go back one screen, or close a menu, a dialog or the keyboard.
        Returns the action's outcome."""
        return outcome(await act(session_id, "back", {}, wait_seconds))

    @server.tool()
    async def home(session_id: SessionId, wait_seconds: Wait = DEFAULT_WAIT) -> CallToolResult:
        """Press the phone's HOME button: leave the app and show the home screen (the app keeps running in the
        background; launch_app brings it back). Returns the action's outcome."""
        return outcome(await act(session_id, "home", {}, wait_seconds))

    @server.tool()
    async def press_key(
        session_id: SessionId,
        key: Annotated[
            str,
            Field(
                min_length=1,
                description="An Android key code name such as KEYCODE_ENTER, KEYCODE_DEL, KEYCODE_APP_SWITCH, "
                "or its number, e.g. '66'.",
            ),
        ],
        wait_seconds: Wait = DEFAULT_WAIT,
    ) -> CallToolResult:
        """Press any key on the phone by its Android key code (back and home have their own tools), e.g.
        KEYCODE_ENTER to submit a field. Returns the action's outcome."""
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
    async def install_app(
        session_id: SessionId,
        input: Annotated[
            str | None,
            Field(
                pattern="^sha256:[0-9a-f]{64}$",
                description="An uploaded APK, as `amc input upload` printed it: sha256:<64 hex digits>.",
            ),
        ] = None,
        path: Annotated[
            str | None,
            Field(min_length=1, description="An APK file on the machine running amc mcp, uploaded first."),
        ] = None,
        replace: Annotated[bool, Field(description="Replace an installed version (pm install -r).")] = True,
        grant_permissions: Annotated[
            bool, Field(description="Grant the app's runtime permissions (pm install -g).")
        ] = False,
        wait_seconds: Wait = DEFAULT_WAIT,
    ) -> CallToolResult:
        """Install an app (one APK) on the phone: give either input (an uploaded APK's reference) or path (a local
        APK file, uploaded first). The outcome's output names the package and version code read from the APK
        (use the package with launch_app); installing the version already there does nothing and says so."""
        if (input is None) == (path is None):
            raise ToolError("install_app takes exactly one of input (sha256:...) or path (a local APK file)")
        ref = input
        if path is not None:
            try:
                ref = (await api.upload_input(Path(path).expanduser()))["ref"]
            except OSError as error:
                raise ToolError(f"cannot read {path}: {error.strerror or error}") from None
            except ApiFailure as failure:
                raise tool_error(failure, f"upload {path}") from None
        args: Json = {"input": {"input": ref}, "replace": replace, "grant_permissions": grant_permissions}
        return outcome(await act(session_id, "install", args, wait_seconds))

    @server.tool()
    async def list_apps(
        session_id: SessionId,
        third_party: Annotated[bool, Field(description="Only the apps not shipped with the system.")] = False,
        wait_seconds: Wait = DEFAULT_WAIT,
    ) -> CallToolResult:
        """List the packages installed on the phone (each flagged third-party or not), as the outcome's output."""
        return outcome(await act(session_id, "list_apps", {"third_party": third_party}, wait_seconds))

    @server.tool()
    async def start_recording(session_id: SessionId, wait_seconds: Wait = DEFAULT_WAIT) -> CallToolResult:
        """Start recording the phone's screen as video: the recording runs beside the next actions until
        stop_recording, which stores it and returns it. Starting while the session records fails the action
        (already recording). A session ended or cancelled while recording keeps the video among its artifacts."""
        return outcome(await act(session_id, "record", {"mode": "start"}, wait_seconds))

    @server.tool()
    async def stop_recording(session_id: SessionId, wait_seconds: Wait = DEFAULT_WAIT) -> CallToolResult:
        """Stop the session's screen recording and store it: returns each mp4 (one per 3 minutes of recording)
        with its artifact id, size and the path to download it from the control plane; the video itself is not
        sent. Stopping when nothing records fails the action (not recording)."""
        action = await act(session_id, "record", {"mode": "stop"}, wait_seconds)
        if action["status"] != StepStatus.completed:
            return outcome(action)
        recordings = await recordings_of(session_id, action)
        lines = [describe.action_text(action)]
        for video in recordings:
            lines.append(
                f"Recording {video['artifact_id']}: {video['name']} ({video['content_type']}, {video['size']} bytes), "
                f"download: GET {video['url']}"
            )
        if not recordings:
            lines.append("The recording stopped but no video was stored for it.")
        return CallToolResult(
            content=[TextContent(type="text", text="\n".join(lines))],
            structured_content=describe.action_summary(action) | {"recordings": recordings},
        )

    async def recordings_of(session_id: str, action: Json) -> list[Json]:
        """The videos a completed `record` stop stored, as the task's artifact list describes them (id, name,
        type, size), each with the path of its bytes: a video is too big to hand to a model inline."""
        stored = set(action.get("artifacts") or [])
        if not stored:
            return []
        try:
            listed = await api.artifacts(session_id)
        except ApiFailure as failure:
            raise tool_error(failure, f"list the artifacts of session {session_id}") from None
        return [
            {
                "artifact_id": artifact["id"],
                "name": artifact.get("name"),
                "content_type": artifact.get("content_type"),
                "size": artifact.get("size"),
                "url": artifact_path(session_id, artifact["id"]),
            }
            for artifact in listed
            if artifact["id"] in stored
        ]

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


def _requirements_text(requirements: Json) -> str:
    said = [f"{key}={value}" for key, value in (requirements.get("attributes") or {}).items()]
    if requirements.get("serial"):
        said.insert(0, f"serial={requirements['serial']}")
    return ", ".join(said) or "any phone"
