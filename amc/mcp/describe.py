"""What a tool tells the model: tasks, actions, messages and devices in plain sentences.

Every sentence is made from what the server answered, nothing else: an action's status and
reason are quoted as the server has them (`completed`, `failed`, `interrupted`, `refused`,
`not_started`, with the reason verbatim), so a model is never told that something ran when
the record says otherwise.
"""

from __future__ import annotations

import json
from typing import Any

from amc.core.lifecycle import StepStatus, TaskStatus
from amc.core.ui.tree import quoted

from .api import Json

OUTPUT_CHARS = 4000  # the tail of an action's output shown inline; the whole of a long one is an artifact
FINAL_ACTION = frozenset(status.value for status in StepStatus)
FINAL_TASK = frozenset({TaskStatus.done.value, TaskStatus.failed.value, TaskStatus.cancelled.value})
ON_A_DEVICE = frozenset({TaskStatus.assigned.value, TaskStatus.dispatched.value})

_PENDING = {
    "queued": "queued: it waits for the device (it runs after the actions before it, and not while the session is paused)",
    "delivered": "delivered to the device and running, with no outcome yet",
}


def is_final(action: Json) -> bool:
    return action.get("status") in FINAL_ACTION


def action_line(action: Json) -> str:
    """`#3 tap {"x": 540, "y": 300} (id tap-1a2b3c): completed`, with the reason when there is one."""
    args = json.dumps(action.get("args") or {}, ensure_ascii=False)
    line = f"#{action.get('seq')} {action.get('action')} {args} (id {action.get('id')}): {action.get('status')}"
    if action.get("reason"):
        line += f", reason: {action['reason']}"
    return line


def action_text(action: Json) -> str:
    """The whole outcome of one action: status, reason, output, artifacts, and what to do while it runs."""
    lines = [f"Action {action_line(action)}"]
    status = action.get("status")
    if status in _PENDING:
        lines.append(
            f"Not finished yet: it is {_PENDING[status]}. Call action_status with this session_id and "
            f"action_id={action.get('id')} to wait for its outcome, or cancel_task to stop the session."
        )
    took = _duration(action.get("started_at"), action.get("ended_at"))
    if took:
        lines.append(f"Ran for {took} on the device.")
    output = action.get("output")
    observed = output_object(action)
    if observed is not None and ("element" in observed or "gone" in observed):
        lines.extend(outcome_lines(observed))
    elif observed is not None and isinstance(observed.get("elements"), list):
        # An observation read back later (action_status): its elements as lines, not as JSON.
        lines.append(f"Elements ({len(observed['elements'])}):\n{elements_text(observed['elements'])}")
    elif output:
        shown = output if len(output) <= OUTPUT_CHARS else "…" + output[-OUTPUT_CHARS:]
        lines.append(f"Output ({len(output)} characters{', the last ones shown' if shown is not output else ''}):")
        lines.append(shown)
    if action.get("artifacts"):
        lines.append("Artifacts: " + ", ".join(action["artifacts"]) + " (get_artifact reads one).")
    return "\n".join(lines)


def output_object(action: Json) -> Json | None:
    """The action's output when it is a JSON object, as the actions of protocol v1.2 report theirs
    (the matched element and the point, an observation's element list); None for other output."""
    output = action.get("output")
    if not isinstance(output, str) or not output.startswith("{"):
        return None
    try:
        found = json.loads(output)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def outcome_lines(observed: Json) -> list[str]:
    """What an element action acted on: `Element: [3] Button "Log in" ...`, `Point: (540, 1210)`."""
    lines = []
    if isinstance(observed.get("element"), dict):
        lines.append(f"Element: {element_line(observed['element'])}")
    if isinstance(observed.get("point"), list):
        lines.append("Point: ({}, {})".format(*observed["point"]))
    if observed.get("gone"):
        lines.append(f"Gone after {observed.get('waited_ms')} ms.")
    return lines


_FLAGS = ("clickable", "long_clickable", "checkable", "checked", "focused", "scrollable", "editable")


def element_line(element: Json) -> str:
    """One element of an observation on one line, as `amc.core.ui.tree.Element.line` writes it, from
    its wire form: `[3] Button "Log in" id=com.example.app:id/login bounds=[40,600][1040,720] clickable`."""
    parts = [f"[{element.get('index')}]", str(element.get("class") or "?").rpartition(".")[2]]
    if element.get("text"):
        parts.append(quoted(element["text"]))
    if element.get("description"):
        parts.append(f"desc={quoted(element['description'])}")
    if element.get("resource_id"):
        parts.append(f"id={element['resource_id']}")
    bounds = element.get("bounds")
    if isinstance(bounds, list) and len(bounds) == 4:
        parts.append("bounds=[{},{}][{},{}]".format(*bounds))
    parts.extend(flag.replace("_", "-") for flag in _FLAGS if element.get(flag))
    if element.get("enabled") is False:
        parts.append("disabled")
    return " ".join(parts)


def elements_text(elements: list[Json]) -> str:
    """The elements one per line, or a sentence when the screen shows none."""
    if not elements:
        return "(the screen shows no element with a text, a description, an id or a flag such as clickable)"
    return "\n".join(element_line(element) for element in elements)


def observation_text(action: Json, observed: Json) -> str:
    """An observation (screenshot or ui_tree) as a model reads it: the screen, then one line per element."""
    screen = observed.get("screen") or {}
    elements = observed.get("elements") or []
    head = (
        f"Screen from action {action.get('id')}: {screen.get('width')}x{screen.get('height')}, "
        f"rotation {screen.get('rotation')}, {len(elements)} elements"
    )
    image = observed.get("image")
    if isinstance(image, dict):
        head += (
            f"; image {image.get('width')}x{image.get('height')} {image.get('format')}, scale {image.get('scale')}"
            + (", numbered boxes drawn" if image.get("marks") else "")
        )
    lines = [head + ". Act on an element by its index [n] while the screen stays as it is."]
    if observed.get("settled") is False:
        lines.append("The screen was still changing when it was read (it did not settle in time); observe again.")
    lines.append(elements_text(elements))
    diff = observed.get("diff")
    if isinstance(diff, dict):
        lines.append(diff_text(diff))
    return "\n".join(lines)


def diff_text(diff: Json) -> str:
    """What changed since the previous ui_tree, one line per element."""
    added, removed, changed = diff.get("added") or [], diff.get("removed") or [], diff.get("changed") or []
    if not (added or removed or changed):
        return "Since the previous ui_tree: nothing changed."
    lines = [f"Since the previous ui_tree: {len(added)} added, {len(removed)} removed, {len(changed)} changed."]
    lines.extend(f"+ {element_line(element)}" for element in added)
    lines.extend(f"- {element_line(element)}" for element in removed)
    lines.extend(f"~ {element_line(pair['before'])} -> {element_line(pair['after'])}" for pair in changed)
    return "\n".join(lines)


def action_summary(action: Json) -> Json:
    """The structured content of an action's result: its id, status and reason; the element and point
    it acted on; an observation's members; other output as it is."""
    summary: Json = {
        "action_id": action.get("id"),
        "action": action.get("action"),
        "status": action.get("status"),
        "reason": action.get("reason"),
    }
    observed = output_object(action)
    if observed is not None:
        summary = {**observed, **summary}  # the action's own members win over an output's
    elif action.get("output"):
        summary["output"] = action["output"]
    if action.get("artifacts"):
        summary["artifacts"] = action["artifacts"]
    return summary


def task_text(task: Json, actions: list[Json] | None = None, shown_actions: int = 20) -> str:
    """A task (a plan's or a session's) as the server shows it: status, device, result, cancel, pause."""
    kind = "Session" if task.get("session") is not None else "Task"
    lines = [f"{kind} {task['id']}: {task['status']}."]
    attempt = (task.get("attempts") or [None])[-1]
    if attempt:
        where = f"device {attempt.get('device')} on host {attempt.get('host_id')}, attempt {attempt.get('number')}"
        if attempt.get("outcome"):
            lines.append(f"Last attempt: {where}, ended {attempt['outcome']}.")
        else:
            lines.append(f"Running on {where}.")
    elif task.get("status") == TaskStatus.queued.value:
        lines.append("No device has been assigned yet (waiting for a free device that matches its requirements).")
    if task.get("paused"):
        lines.append("Paused: no new step or action starts until resume_task.")
    cancellation = task.get("cancellation")
    if cancellation:
        lines.append(
            f"Cancellation {cancellation.get('state')}"
            + (f" (reason: {cancellation['reason']})" if cancellation.get("reason") else "")
            + ("; delivered to the host." if cancellation.get("delivered_at") else ".")
        )
    result = task.get("result")
    if result:
        lines.append(
            f"Result: {result.get('status')}" + (f", reason: {result['reason']}" if result.get("reason") else "")
        )
        for step in result.get("steps") or []:
            lines.append("  step " + _step_line(step))
    session = task.get("session")
    if session is not None:
        if session.get("idle_expires_at"):
            lines.append(f"Ends for idleness at {session['idle_expires_at']} unless an action is sent before.")
        listed = actions if actions is not None else session.get("actions") or []
        if listed:
            skipped = max(0, len(listed) - shown_actions)
            lines.append(f"Actions ({len(listed)}{f', the last {shown_actions} shown' if skipped else ''}):")
            lines.extend("  " + action_line(action) for action in listed[skipped:])
    return "\n".join(lines)


def message_text(message: Json, task_id: str) -> str:
    text = f"Message {message.get('id')} ({message.get('intent')}) to task {task_id}: {message.get('state')}"
    if message.get("detail"):
        text += f", {message['detail']}"
    if message.get("successor"):
        text += f"; its work runs in the follow-up task {message['successor']}"
    return text + "."


def devices_text(hosts: list[Json]) -> str:
    if not hosts:
        return "No host has registered with the control plane, so there is no device."
    lines = []
    for host in hosts:
        state = "online" if host.get("online", True) else "offline"
        lines.append(f"Host {host['id']} ({state}):")
        for device in host.get("devices") or []:
            attributes = ", ".join(f"{key}={value}" for key, value in (device.get("attributes") or {}).items())
            reservation = device.get("reservation")
            busy = f"busy with task {reservation['task_id']}" if reservation else "free"
            online = "online" if device.get("online") else "offline"
            lines.append(f"  {device['serial']} ({attributes or 'no attributes'}): {online}, {busy}")
        if not host.get("devices"):
            lines.append("  (no devices)")
    return "\n".join(lines)


def artifact_line(artifact: Json) -> str:
    return (
        f"{artifact['id']}: {artifact.get('name')} ({artifact.get('content_type')}, {artifact.get('size')} bytes), "
        f"attempt {artifact.get('attempt')}, step/action {artifact.get('step')}"
    )


def _step_line(step: Json) -> str:
    line = f"{step.get('id')}: {step.get('status')}"
    if step.get("reason"):
        line += f", reason: {step['reason']}"
    if step.get("artifacts"):
        line += f", artifacts: {', '.join(step['artifacts'])}"
    return line


def _duration(started: Any, ended: Any) -> str | None:
    from datetime import datetime

    if not (isinstance(started, str) and isinstance(ended, str)):
        return None
    try:
        seconds = (datetime.fromisoformat(ended) - datetime.fromisoformat(started)).total_seconds()
    except ValueError:
        return None
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"
