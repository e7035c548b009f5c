"""How tasks, histories and hosts look to people: rich tables built from the wire's JSON.

These functions only format; they decide nothing about what a status means (the server
says it). Times are shown as the server wrote them, in UTC, shortened to what is useful.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

STATUS_STYLE = {
    "queued": "cyan", "assigned": "blue", "dispatched": "bold blue",
    "done": "green", "failed": "red", "cancelled": "yellow",
}
STEP_STYLE = {"completed": "green", "failed": "red", "interrupted": "magenta", "not_started": "dim", "refused": "red"}
TERMINAL = ("done", "failed", "cancelled")


def _row(table: Table, *cells: Any) -> None:
    """Add a row whose plain strings are never read as rich markup (labels, serials, reasons
    are whatever their authors wrote)."""
    table.add_row(*(Text(cell) if isinstance(cell, str) else cell for cell in cells))


def status_text(status: str | None) -> Text:
    return Text(status or "-", style=STATUS_STYLE.get(status or "", ""))


def when(text: str | None, *, date: bool = False) -> str:
    """``2026-11-30T01:45:12.345Z`` -> ``01:45:12.345`` (or with the date)."""
    if not text:
        return "-"
    day, _, clock = text.partition("T")
    return f"{day} {clock.rstrip('Z')}Z" if date else clock.rstrip("Z")


def parse_time(text: str) -> float:
    """A wire time as seconds since the epoch."""
    return _dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def where(task: dict) -> str:
    """``host/device`` of the current attempt, or ``-``."""
    attempts = task.get("attempts") or []
    if not attempts:
        return "-"
    last = attempts[-1]
    return f"{last['host_id']}/{last['device']}"


def _pairs(mapping: dict | None) -> str:
    return ", ".join(f"{k}={v}" for k, v in (mapping or {}).items()) or "-"


def requirement_text(task: dict) -> str:
    requirements = task.get("requirements") or {}
    parts = []
    if requirements.get("serial"):
        parts.append(f"serial={requirements['serial']}")
    parts.extend(f"{k}={v}" for k, v in (requirements.get("attributes") or {}).items())
    return ", ".join(parts) or "any device"


# -- tasks ------------------------------------------------------------------------------------


def tasks_table(tasks: list[dict]) -> Table:
    table = Table(title=None, show_edge=False, pad_edge=False)
    for column in ("ID", "STATUS", "ATTEMPT", "WHERE", "PRIORITY", "CREATED", "UPDATED", "LABELS"):
        table.add_column(column, no_wrap=column in ("ID", "STATUS", "WHERE"))
    for task in tasks:
        _row(table, task["id"], status_text(task["status"]), str(task.get("attempt") or "-"), where(task),
                      str(task["priority"]), when(task["created_at"]), when(task["updated_at"]), _pairs(task["labels"]))
    return table


def task_detail(task: dict) -> Group:
    """Everything about one task: the summary, its attempts, its cancellation and its result."""
    summary = Table.grid(padding=(0, 2))
    summary.add_column(style="bold")
    summary.add_column()
    _row(summary, "task", task["id"])
    _row(summary, "status", status_text(task["status"]))
    _row(summary, "tenant", task["tenant"])
    _row(summary, "priority", f"{task['priority']} (max attempts {task['max_attempts']})")
    _row(summary, "needs", requirement_text(task))
    if task.get("labels"):
        _row(summary, "labels", _pairs(task["labels"]))
    _row(summary, "plan", plan_summary(task["plan"]))
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
    if task.get("attempts"):
        parts.append(attempts_table(task["attempts"]))
    if result and result.get("steps"):
        parts.append(steps_table(result["steps"]))
    return Group(*parts)


def plan_summary(plan: dict) -> str:
    if "stages" in plan:
        steps = [step for stage in plan["stages"] for step in stage["steps"]]
        return f"{len(plan['stages'])} stages, {len(steps)} steps: " + ", ".join(s["action"] for s in steps)
    return f"{len(plan['steps'])} steps: " + ", ".join(s["action"] for s in plan["steps"])


def attempts_table(attempts: list[dict]) -> Table:
    table = Table(title="attempts", title_justify="left", show_edge=False, pad_edge=False)
    for column in ("#", "HOST/DEVICE", "ASSIGNED", "DISPATCHED", "ENDED", "RENEWALS", "OUTCOME"):
        table.add_column(column, no_wrap=True)
    for attempt in attempts:
        outcome = attempt.get("outcome")
        _row(table, str(attempt["number"]), f"{attempt['host_id']}/{attempt['device']}",
                      when(attempt["assigned_at"]), when(attempt.get("dispatched_at")),
                      when(attempt.get("ended_at")), str(attempt.get("renewals", 0)),
                      Text(outcome or "active", style=STATUS_STYLE.get(outcome or "", "bold blue")))
    return table


def steps_table(steps: list[dict]) -> Table:
    table = Table(title="steps", title_justify="left", show_edge=False, pad_edge=False)
    for column in ("STEP", "OUTCOME", "REASON", "STARTED", "ENDED"):
        table.add_column(column, no_wrap=column != "REASON")
    for step in steps:
        _row(table, step["id"], Text(step["status"], style=STEP_STYLE.get(step["status"], "")),
                      step.get("reason") or "", when(step.get("started_at")), when(step.get("ended_at")))
    return table


# -- history ----------------------------------------------------------------------------------


def event_text(event: dict) -> str:
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
    return f"{kind} {data}"


def history_table(events: list[dict]) -> Table:
    table = Table(show_edge=False, pad_edge=False)
    for column in ("SEQ", "AT", "EVENT"):
        table.add_column(column, no_wrap=column != "EVENT")
    for event in events:
        _row(table, str(event["seq"]), when(event["at"]), event_text(event))
    return table


# -- hosts ------------------------------------------------------------------------------------


def hosts_table(hosts: list[dict]) -> Table:
    table = Table(show_edge=False, pad_edge=False)
    for column in ("HOST", "DEVICE", "MODEL", "ONLINE", "RUNNING", "UPDATED"):
        table.add_column(column, no_wrap=True)
    for host in hosts:
        devices = host["devices"] or [None]
        for index, device in enumerate(devices):
            first = index == 0
            if device is None:
                _row(table, host["id"], "(no devices)", "", "", "", when(host["updated_at"], date=True))
                continue
            reservation = device.get("reservation")
            running = f"{reservation['task_id']} #{reservation['attempt']}" if reservation else "-"
            _row(table, host["id"] if first else "", device["serial"], device["attributes"].get("model", "-"),
                          Text("yes", style="green") if device["online"] else Text("no", style="red"),
                          running, when(host["updated_at"], date=True) if first else "")
    return table
