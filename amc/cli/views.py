"""How tasks, histories and hosts look to people: rich tables built from the wire's JSON.

These functions only format; they decide nothing about what a status means (the server
says it). Times are shown as the server wrote them, in UTC, shortened to what is useful.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from typing import Any

from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.table import Table
from rich.text import Text

from amc.core.lifecycle import MessageState, StepStatus, TaskStatus

STATUS_STYLE: dict[str, str] = {
    TaskStatus.queued: "cyan",
    TaskStatus.assigned: "blue",
    TaskStatus.dispatched: "bold blue",
    TaskStatus.done: "green",
    TaskStatus.failed: "red",
    TaskStatus.cancelled: "yellow",
}
STEP_STYLE: dict[str, str] = {
    StepStatus.completed: "green",
    StepStatus.failed: "red",
    StepStatus.interrupted: "magenta",
    StepStatus.not_started: "dim",
    StepStatus.refused: "red",
}


def _row(table: Table | Fitted, *cells: Any) -> None:
    """Add a row whose plain strings are never read as rich markup (labels, serials, reasons
    are whatever their authors wrote)."""
    table.add_row(*(Text(cell) if isinstance(cell, str) else cell for cell in cells))


def status_text(status: str | None) -> Text:
    return Text(status or "-", style=STATUS_STYLE.get(status or "", ""))


def task_status_text(task: dict[str, Any]) -> Text:
    """The status, and whether a pause holds the task: ``dispatched (paused)``, ``queued (held)``."""
    text = status_text(task["status"])
    if task.get("held"):
        text.append(" (held)", style="bold yellow")
    elif task.get("paused"):
        text.append(" (paused)", style="bold yellow")
    return text


def when(text: str | None, *, date: bool = False, today: _dt.date | None = None) -> str:
    """A wire time, as short as it can be without being ambiguous.

    ``2026-11-30T01:45:12.345Z`` reads ``01:45:12`` on 2026-11-30 (UTC, as the server
    writes it), ``Nov 30 01:45`` on another day of 2026, and ``2026-11-30`` in another
    year; with `date`, always whole: ``2026-11-30 01:45:12.345Z``.
    """
    if not text:
        return "-"
    day, _, clock = text.partition("T")
    if date:
        return f"{day} {clock.rstrip('Z')}Z"
    today = today or _dt.datetime.now(_dt.UTC).date()
    if day == today.isoformat():
        return clock[:8]
    if day[:4] != str(today.year):
        return day
    return f"{_dt.date.fromisoformat(day):%b %d} {clock[:5]}"


def parse_time(text: str) -> float:
    """A wire time as seconds since the epoch."""
    return _dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def ago(text: str | None, now: float | None = None) -> str:
    """How long ago a wire time was: ``3 s ago``, ``4 min ago``, ``2 h ago``, ``5 d ago``; ``never`` for null."""
    if not text:
        return "never"
    import time

    seconds = max(0.0, (time.time() if now is None else now) - parse_time(text))
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit} ago"
    return f"{int(seconds)} s ago"


def duration(seconds: float) -> str:
    """``42 s``, ``3 min 05 s``, ``1 h 02 min``."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


def where(task: dict[str, Any]) -> str:
    """``host/device`` of the current attempt, or ``-``."""
    attempts = task.get("attempts") or []
    if not attempts:
        return "-"
    last = attempts[-1]
    return f"{last['host_id']}/{last['device']}"


def _pairs(mapping: dict[str, Any] | None) -> str:
    return ", ".join(f"{k}={v}" for k, v in (mapping or {}).items()) or "-"


def requirement_text(task: dict[str, Any]) -> str:
    requirements = task.get("requirements") or {}
    parts = []
    if requirements.get("serial"):
        parts.append(f"serial={requirements['serial']}")
    parts.extend(f"{k}={v}" for k, v in (requirements.get("attributes") or {}).items())
    return ", ".join(parts) or "any device"


def requirement_phrase(task: dict[str, Any]) -> str | None:
    """The requirements in words, ``serial 'x' and model 'Pixel 7'``; None when any device will do."""
    requirements = task.get("requirements") or {}
    parts = [f"serial {requirements['serial']!r}"] if requirements.get("serial") else []
    parts.extend(f"{key} {value!r}" for key, value in (requirements.get("attributes") or {}).items())
    return " and ".join(parts) or None


def waiting_text(task: dict[str, Any]) -> str | None:
    """Why a queued task waits, in words (the server's `waiting`, specs/protocol.md "Why a
    queued task waits"); None for a task that is not waiting, or a server that does not say."""
    waiting = task.get("waiting")
    if not isinstance(waiting, dict):
        return None
    needs = requirement_phrase(task)
    count = waiting.get("matching_devices") or 0
    devices = f"{count} device{'s' if count != 1 else ''}"
    matching = f"the {devices} matching {needs}" if needs else f"all {devices}"
    match waiting.get("reason"):
        case "held":
            return f"held by a pause: no host claims it until `amc task resume {task['id']}`"
        case "no_device_matches":
            return f"no registered device matches {needs}" if needs else "no device is registered yet"
        case "matching_devices_offline":
            return f"{matching} {'is' if count == 1 else 'are'} offline"
        case "matching_devices_busy":
            return f"{matching} {'is' if count == 1 else 'are'} busy with other tasks"
        case "ready":
            return "a matching device is idle: its host's next claim takes the task, in claim order"
    return str(waiting.get("reason"))


def progress_text(task: dict[str, Any], steered: Sequence[Any] | None = None) -> str:
    """Where a task stands, in words: ``queued: ...``, ``paused, 1 of 3 steps ended``,
    ``step sync running, 1 of 3 steps ended``. `steered` is the plan as steered (its live
    steps are the total); without it, the submitted plan's steps count."""
    status = task["status"]
    if status == TaskStatus.queued:
        why = waiting_text(task)
        return f"queued: {why}" if why else ("queued (held by a pause)" if task.get("held") else "queued")
    attempts = task.get("attempts") or []
    if status not in (TaskStatus.assigned, TaskStatus.dispatched) or not attempts:
        return str(status)
    attempt = attempts[-1]
    place = f"attempt {attempt['number']} on {attempt['host_id']}/{attempt['device']}"
    progress = attempt.get("progress")
    total = len(steered) if steered is not None else len(_all_steps(task["plan"]))
    parts = ["paused" if task.get("paused") else str(status), place]
    if isinstance(progress, dict):
        if progress.get("step") and not task.get("paused"):
            parts.append(f"step {progress['step']} running")
        parts.append(f"{progress.get('ended', 0)} of {total} steps ended")
    if (task.get("cancellation") or {}).get("state") == "pending":
        parts.append("cancellation pending")
    return ", ".join(parts)


def _all_steps(plan: dict[str, Any] | None) -> list[dict[str, Any]]:
    if plan is None:  # a session (Part D): its steps are its actions
        return []
    if "stages" in plan:
        return [step for stage in plan["stages"] for step in stage["steps"]]
    return list(plan.get("steps") or [])


# -- tasks ------------------------------------------------------------------------------------


MIN_LAST = 16  # the right-most column gets at least this many cells, before optional columns go
FOLD_WIDTH = 14  # the widest a `fold` column gets before it wraps
GAP = 2  # cells between two columns: the right padding and the (blank) separator


class Fitted:
    """A table that fits the console width, decided when it is printed (so at the width of
    the console it is printed on, COLUMNS included).

    Every column keeps its cells whole, on one line (an id, a status, a time is never
    wrapped or cut), except the right-most column, which takes the width that is left and
    wraps, and the `fold` columns, which may wrap where they must. When the right-most
    column would get less than MIN_LAST cells, the `optional` columns are left out, last
    first, until it gets them.
    """

    def __init__(self, *columns: str, title: str | None = None, fold: Sequence[str] = (), optional: Sequence[str] = ()):
        self.columns = columns
        self.title = title
        self.fold = set(fold)
        self.optional = list(optional)
        self.rows: list[list[Text]] = []

    @property
    def row_count(self) -> int:
        return len(self.rows)

    def add_row(self, *cells: str | Text) -> None:
        self.rows.append([cell if isinstance(cell, Text) else Text(cell) for cell in cells])

    def natural(self, index: int) -> int:
        """The width of column `index` when nothing in it wraps."""
        texts = [Text(self.columns[index])] + [row[index] for row in self.rows]
        return max(cell_len(line) for text in texts for line in text.plain.split("\n"))

    def width(self, index: int) -> int:
        """The width column `index` takes when it is not the right-most one."""
        natural = self.natural(index)
        return min(natural, FOLD_WIDTH) if self.columns[index] in self.fold else natural

    def shown(self, width: int) -> list[int]:
        """The columns shown at `width`: all, unless the right-most one would be too narrow."""
        shown = list(range(len(self.columns)))
        for name in reversed(self.optional):
            fixed = sum(self.width(i) for i in shown[:-1]) + GAP * (len(shown) - 1)
            if width - fixed >= min(MIN_LAST, self.natural(shown[-1])):
                break
            shown.remove(self.columns.index(name))
        return shown

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        shown = self.shown(width)
        made = Table(
            title=self.title,
            title_justify="left",
            box=box.SIMPLE_HEAD,
            show_edge=False,
            pad_edge=False,
            padding=(0, 1, 0, 0),
        )
        fixed = 0
        for i in shown[:-1]:
            name = self.columns[i]
            if name in self.fold:
                made.add_column(name, overflow="fold", max_width=self.width(i))
            else:
                made.add_column(name, no_wrap=True, min_width=self.natural(i))
            fixed += self.width(i) + GAP
        last = shown[-1]
        # What is left, less the one cell rich counts for the right padding pad_edge leaves out.
        made.add_column(self.columns[last], overflow="fold", width=max(8, width - fixed - 1))
        for row in self.rows:
            made.add_row(*(row[i] for i in shown))
        yield made


def table(*columns: str, title: str | None = None, fold: Sequence[str] = (), optional: Sequence[str] = ()) -> Fitted:
    return Fitted(*columns, title=title, fold=fold, optional=optional)


def tasks_table(tasks: list[dict[str, Any]]) -> Fitted:
    made = table("ID", "STATUS", "WHERE", "CREATED", "UPDATED", "NOTE", optional=("WHERE", "CREATED"))
    for task in tasks:
        notes = [waiting_text(task) or ("held by a pause" if task.get("held") else "")]
        if task.get("paused") and not task.get("held"):
            notes.append("paused: no new step starts until a resume")
        if (task.get("attempt") or 0) > 1:
            notes.append(f"attempt {task['attempt']}")
        if task.get("priority"):
            notes.append(f"priority {task['priority']}")
        if task.get("labels"):
            notes.append(_pairs(task["labels"]))
        _row(
            made,
            task["id"],
            status_text(task["status"]),
            where(task),
            when(task["created_at"]),
            when(task["updated_at"]),
            "; ".join(note for note in notes if note),
        )
    return made


def task_detail(
    task: dict[str, Any], messages: Sequence[dict[str, Any]] = (), artifacts: Sequence[dict[str, Any]] = ()
) -> Group:
    """Everything about one task: the summary, its attempts, its cancellation, its messages
    in brief (`messages`, from the task's messages endpoint), its result, and under each
    step the artifacts it stored (`artifacts`, from the task's artifacts endpoint)."""
    summary = Table.grid(padding=(0, 2))
    summary.add_column(style="bold")
    summary.add_column()
    from amc.cli.steered import steered_plan

    steered = steered_plan(task, messages)
    _row(summary, "task", task["id"])
    _row(summary, "status", task_status_text(task))
    if task["status"] == TaskStatus.queued and waiting_text(task):
        _row(summary, "waiting", waiting_text(task) or "")
    elif task["status"] in (TaskStatus.assigned, TaskStatus.dispatched):
        _row(summary, "now", progress_text(task, [s for s in steered or () if s.removed_by is None] or None))
    if task.get("held"):
        _row(summary, "held", "a pause holds it in the queue: no host claims it until a resume")
    elif task.get("paused"):
        _row(summary, "paused", "its host starts no new step until a resume; the lease is kept")
    if task.get("follow_up_of"):
        collected = ", ".join(task.get("collected") or []) or "-"
        _row(summary, "follow-up of", f"{task['follow_up_of']}, collecting {collected}")
        for follow_up in task.get("follow_ups") or []:
            _row(summary, "", f"{follow_up['message_id']}: {_asked(follow_up.get('text'), follow_up.get('data'))}")
    _row(summary, "tenant", task["tenant"])
    _row(summary, "priority", f"{task['priority']} (max attempts {task['max_attempts']})")
    _row(summary, "needs", requirement_text(task))
    if task.get("labels"):
        _row(summary, "labels", _pairs(task["labels"]))
    if steered is None:
        _row(summary, "plan", plan_summary(task["plan"]) if task["plan"] is not None else session_summary(task))
    else:
        live = [step for step in steered if step.removed_by is None]
        _row(summary, "plan", f"as steered, {_step_count(live)}: " + ", ".join(step.action for step in live))
    _row(summary, "created", when(task["created_at"], date=True))
    _row(summary, "updated", when(task["updated_at"], date=True))
    cancellation = task.get("cancellation")
    if cancellation:
        text = f"{cancellation['state']}, requested {when(cancellation['requested_at'])}"
        if cancellation.get("attempt"):
            text += f" against attempt {cancellation['attempt']}"
        if cancellation.get("delivered_at"):
            text += f", delivered {when(cancellation['delivered_at'])}"
        if cancellation.get("reason"):
            text += f" ({cancellation['reason']})"
        _row(summary, "cancellation", text)
    result = task.get("result")
    if result:
        _row(summary, "result", f"{result['status']} ({result['reason']}) at {when(result['recorded_at'])}")
    parts: list[Any] = [summary]
    if steered is not None:
        parts.append(steered_table(steered))
    if task.get("attempts"):
        parts.append(attempts_table(task["attempts"]))
    if messages:
        parts.append(messages_brief(messages))
    if result and result.get("steps"):
        # The outcomes are the last attempt's; so are the artifacts shown under them.
        last = len(task.get("attempts") or [])
        parts.append(steps_table(result["steps"], [a for a in artifacts if a["attempt"] == last]))
    earlier = [a for a in artifacts if not (result and result.get("steps")) or a["attempt"] != len(task["attempts"])]
    if earlier:
        parts.append(
            Text(
                f"{len(earlier)} artifact(s) of {_attempt_words(earlier)} not shown above: amc task artifacts {task['id']}",
                style="dim",
            )
        )
    return Group(*parts)


def _attempt_words(artifacts: Sequence[dict[str, Any]]) -> str:
    numbers = sorted({a["attempt"] for a in artifacts})
    return ("attempt " if len(numbers) == 1 else "attempts ") + ", ".join(map(str, numbers))


def session_summary(task: dict[str, Any]) -> str:
    """A session's line where a plan's would be (Part D)."""
    actions = (task.get("session") or {}).get("actions") or []
    return f"a session: {len(actions)} action(s)" + (": " + ", ".join(a["action"] for a in actions) if actions else "")


def plan_summary(plan: dict[str, Any]) -> str:
    if "stages" in plan:
        steps = [step for stage in plan["stages"] for step in stage["steps"]]
        return f"{len(plan['stages'])} stages, {len(steps)} steps: " + ", ".join(s["action"] for s in steps)
    if not plan["steps"]:  # a successor of follow-ups that asked in words only
        return "no steps"
    return _step_count(plan["steps"]) + ": " + ", ".join(s["action"] for s in plan["steps"])


def steered_table(steps: Sequence[Any]) -> Fitted:
    """The plan as steered: every step, with the steer that added or removed it."""
    made = table("STEP", "ACTION", "STEERED", title="plan as steered")
    for step in steps:
        notes = []
        if step.inserted_by:
            notes.append(f"added by {step.inserted_by}")
        if step.removed_by:
            notes.append(f"removed by {step.removed_by} (not_started, steered)")
        _row(made, step.id, step.action, "; ".join(notes))
    return made


def attempts_table(attempts: list[dict[str, Any]]) -> Fitted:
    made = table("#", "OUTCOME", "HOST/DEVICE", "ASSIGNED", "DISPATCHED", "ENDED", "RENEWED", title="attempts")
    for attempt in attempts:
        outcome = attempt.get("outcome")
        _row(
            made,
            str(attempt["number"]),
            Text(outcome or "active", style=STATUS_STYLE.get(outcome or "", "bold blue")),
            f"{attempt['host_id']}/{attempt['device']}",
            when(attempt["assigned_at"]),
            when(attempt.get("dispatched_at")),
            when(attempt.get("ended_at")),
            str(attempt.get("renewals", 0)),
        )
    return made


def steps_table(steps: list[dict[str, Any]], artifacts: Sequence[dict[str, Any]] = ()) -> Fitted:
    """The step outcomes; under each step's reason, the artifacts it stored (`artifacts`:
    those of the attempt whose outcomes these are)."""
    made = table("STEP", "OUTCOME", "STARTED", "ENDED", "REASON / ARTIFACTS" if artifacts else "REASON", title="steps")
    for step in steps:
        note = Text(step.get("reason") or "")
        for artifact in (a for a in artifacts if a["step"] == step["id"]):
            note.append("\n" if note else "")
            note.append(f"{artifact['name']} ({artifact['content_type']}, {size_text(artifact['size'])})", style="cyan")
        _row(
            made,
            step["id"],
            Text(step["status"], style=STEP_STYLE.get(step["status"], "")),
            when(step.get("started_at")),
            when(step.get("ended_at")),
            note,
        )
    return made


# -- artifacts --------------------------------------------------------------------------------


def size_text(size: int) -> str:
    """Bytes for people, in binary units: ``812 B``, ``195.3 KiB``, ``2.0 MiB``."""
    if size < 1024:
        return f"{size} B"
    value = size / 1024
    for unit in ("KiB", "MiB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def artifacts_table(artifacts: list[dict[str, Any]]) -> Fitted:
    """Every artifact of a task: its step, type, size, when it was stored, and its name (the
    right-most column, which wraps: a name may be long); the attempt (#) too when more than
    one attempt stored some."""
    several = len({artifact["attempt"] for artifact in artifacts}) > 1
    made = table(*(("#",) if several else ()), "STEP", "TYPE", "SIZE", "STORED", "NAME", fold=("TYPE",))
    for artifact in artifacts:
        _row(
            made,
            *((str(artifact["attempt"]),) if several else ()),
            artifact["step"],
            artifact["content_type"],
            size_text(artifact["size"]),
            when(artifact["created_at"]),
            artifact["name"],
        )
    return made


# -- messages ---------------------------------------------------------------------------------

MESSAGE_STYLE: dict[str, str] = {
    MessageState.queued: "cyan",
    MessageState.delivered: "blue",
    MessageState.admitted: "bold blue",
    MessageState.completed: "green",
    MessageState.rejected: "red",
    MessageState.not_admitted: "yellow",
}


def _step_count(steps: list[Any]) -> str:
    return f"{len(steps)} step{'s' if len(steps) != 1 else ''}"


def _step_ids(steps: Any) -> str:
    ids = [step.get("id", "?") for step in steps if isinstance(step, dict)] if isinstance(steps, list) else []
    return f"{_step_count(ids)} ({', '.join(ids)})"


def edit_text(data: dict[str, Any] | None) -> str:
    """A steer's structured edit as a phrase: ``skip d``, ``insert 1 step (a2) after a``."""
    data = data or {}
    if "skip" in data:
        return "skip " + ", ".join(map(str, data["skip"]))
    if "insert_after" in data:
        where_to = "at the next boundary" if data["insert_after"] is None else f"after {data['insert_after']}"
        return f"insert {_step_ids(data.get('steps'))} {where_to}"
    if "replace_remaining" in data:
        return f"replace the remaining steps with {_step_ids(data['replace_remaining'])}"
    return ""


def _asked(text: str | None, data: dict[str, Any] | None, *, steer: bool = False) -> str:
    """What a message asks for: its edit or steps, and its words, quoted."""
    parts = []
    if steer:
        parts.append(edit_text(data))
    elif data and "steps" in data:
        parts.append(_step_ids(data["steps"]))
    if text:
        parts.append(f'"{text}"')
    return "; ".join(part for part in parts if part) or "-"


def asked_text(message: dict[str, Any]) -> str:
    """What a message asks for: ``skip d; "the report is not needed"``, ``1 step (shot)``."""
    return _asked(message.get("text"), message.get("data"), steer=message["intent"] == "steer")


def request_text(message: dict[str, Any]) -> str:
    """``steer: skip d``, ``pause``, ``follow_up: 1 step (shot)``."""
    intent: str = message["intent"]
    if intent in ("pause", "resume") and not message.get("text"):
        return intent
    return f"{intent}: {asked_text(message)}"


def boundary_text(boundary: dict[str, Any] | None) -> str:
    if boundary is None:
        return "-"
    step = boundary.get("before_step")
    return "after the last step" if step is None else f"before {step}"


def message_note(message: dict[str, Any]) -> str:
    """What became of a message beyond its state: the host's or server's detail, the successor."""
    notes = [message.get("detail") or ""]
    if message.get("successor"):
        notes.append(f"collected into {message['successor']}")
    return "; ".join(note for note in notes if note)


def message_state_text(state: str) -> Text:
    return Text(state, style=MESSAGE_STYLE.get(state, ""))


def message_times(message: dict[str, Any]) -> str:
    """Each state the message reached, with its time: ``posted 01:45:12, delivered 01:45:13``."""
    times = (
        ("posted", message.get("created_at")),
        ("delivered", message.get("delivered_at")),
        ("admitted", message.get("admitted_at")),
        ("completed", message.get("completed_at")),
    )
    return ", ".join(f"{label} {when(at)}" for label, at in times if at)


def messages_table(messages: list[dict[str, Any]]) -> Fitted:
    made = table("MESSAGE", "STATE", "ATT", "BOUNDARY", "INTENT / DETAIL", fold=("BOUNDARY",))
    for message in messages:
        asked = Text(request_text(message))
        note = message_note(message)
        if note:
            asked.append(f"\n{note}")
        asked.append(f"\n{message_times(message)}", style="dim")
        _row(
            made,
            message["id"],
            message_state_text(message["state"]),
            str(message.get("attempt") or "-"),
            boundary_text(message.get("boundary")),
            asked,
        )
    return made


def messages_brief(messages: Sequence[dict[str, Any]]) -> Fitted:
    """The messages of a task in one line each, for `amc task show`."""
    made = table("MESSAGE", "STATE", "INTENT / NOTE", title="messages")
    for message in messages:
        boundary = message.get("boundary")
        note = "; ".join(part for part in (boundary_text(boundary) if boundary else "", message_note(message)) if part)
        asked = Text(request_text(message))
        if note:
            asked.append(f"\n{note}", style="dim")
        _row(made, message["id"], message_state_text(message["state"]), asked)
    return made


# -- history ----------------------------------------------------------------------------------


def event_text(event: dict[str, Any]) -> str:
    """One history event as a phrase: ``assigned attempt 1 to h1/amc-sim-01``."""
    data = event.get("data") or {}
    kind = event["type"]
    attempt = data.get("attempt")
    match kind:
        case "submitted":
            return f"submitted (tenant {data.get('tenant')}, priority {data.get('priority')})"
        case "assigned":
            return f"assigned attempt {attempt} to {data.get('host_id')}/{data.get('device')}"
        case "dispatched":
            return f"dispatched: attempt {attempt} started on the device"
        case "cancellation_requested":
            target = f"attempt {attempt}" if attempt else "the queued task"
            return f"cancellation requested for {target}" + (f" ({data['reason']})" if data.get("reason") else "")
        case "cancellation_delivered":
            return f"cancellation delivered to attempt {attempt}'s host"
        case "lease_expired":
            return f"lease of attempt {attempt} expired"
        case "requeued":
            return "requeued"
        case "ended":
            return f"ended {data.get('status')} ({data.get('reason')})"
        case "message_posted":
            return f"{data.get('intent')} message {data.get('message_id')} posted"
        case "message_delivered":
            return (
                f"message{'s' if len(data.get('message_ids') or []) != 1 else ''} "
                f"{', '.join(data.get('message_ids') or [])} delivered to attempt {attempt}'s host"
            )
        case "message_acknowledged":
            return _acknowledged_text(data)
        case "follow_ups_collected":
            return f"follow-ups {', '.join(data.get('message_ids') or [])} collected into {data.get('successor')}"
    return f"{kind} {data}"


def _acknowledged_text(data: dict[str, Any]) -> str:
    """``message m_1 admitted before c by attempt 1's host``, or applied by the server itself."""
    text = f"message {data.get('message_id')} {data.get('state')}"
    if data.get("boundary"):
        text += f" {boundary_text(data['boundary'])}"
    if data.get("by") == "server":
        text += " by the server (the task was queued)"
    else:
        text += f" by attempt {data.get('attempt')}'s host"
    return text + (f": {data['detail']}" if data.get("detail") else "")


def history_table(events: list[dict[str, Any]]) -> Fitted:
    made = table("SEQ", "AT", "EVENT")
    for event in events:
        _row(made, str(event["seq"]), when(event["at"]), event_text(event))
    return made


# -- hosts ------------------------------------------------------------------------------------


def online_text(online: bool | None) -> Text:
    return Text("yes", style="green") if online else Text("no", style="red")


def hosts_table(hosts: list[dict[str, Any]], now: float | None = None) -> Fitted:
    """One row per device. ONLINE is the device's (false whenever its host is not seen within
    the server's host timeout); LAST SEEN is the host's latest request, or, from a server
    without host liveness, `-`."""
    made = table("HOST", "LAST SEEN", "DEVICE", "ONLINE", "RUNNING", "MODEL")
    for host in hosts:
        seen = ago(host.get("last_seen_at"), now) if "last_seen_at" in host else "-"
        devices = host["devices"] or [None]
        for index, device in enumerate(devices):
            first = index == 0
            if device is None:
                _row(made, host["id"], seen, "(no devices)", online_text(host.get("online")), "-", "")
                continue
            reservation = device.get("reservation")
            running = f"{reservation['task_id']} #{reservation['attempt']}" if reservation else "-"
            _row(
                made,
                host["id"] if first else "",
                seen if first else "",
                device["serial"],
                online_text(device["online"] and host.get("online", True)),
                running,
                device["attributes"].get("model", "-"),
            )
    return made
