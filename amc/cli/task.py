"""`amc task`: submit, inspect, cancel and follow tasks (the caller's endpoints of PROTOCOL.md).

Each command is one request or a short loop of them; what a status or a refusal means is
the server's to say, so the commands print its answer (for people, or with --json as the
server's own JSON) and turn its refusals into one line and an exit code (`amc.cli.app`).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click

from amc.cli.app import EXIT_HELP, Application, Exit, caller_command

STATUSES = ("queued", "assigned", "dispatched", "done", "failed", "cancelled")


@click.group(epilog=EXIT_HELP)
def task() -> None:
    """Submit tasks and follow them: submit, list, show, watch, history, cancel.

    Every command takes --url (AMC_URL) and --token (AMC_TOKEN); without a token, the
    client token of .amc/tokens.json (what `amc up` writes) is used.
    """


# -- submit -----------------------------------------------------------------------------------


def _pairs(values: tuple[str, ...], option: str) -> dict[str, str]:
    found = {}
    for value in values:
        key, sep, item = value.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{value!r} is not KEY=VALUE", param_hint=option)
        found[key] = item
    return found


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def read_submission(source: str, app: Application) -> dict:
    """The submit body in FILE (or stdin for '-'): a whole body with "plan", or a bare plan."""
    where = "stdin" if source == "-" else source
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    except OSError as error:
        app.abort(f"cannot read {where}: {error.strerror or error}", Exit.INVALID)
    try:
        data = json.loads(text, parse_constant=_refuse_constant)
    except ValueError as error:
        app.abort(f"{where} is not valid JSON: {error}", Exit.INVALID)
    if isinstance(data, dict) and "plan" in data:
        return data
    if isinstance(data, dict) and ("steps" in data or "stages" in data):
        return {"plan": data}
    app.abort(f'{where} holds neither a plan ({{"steps": [...]}} or {{"stages": [...]}}) '
              f'nor a submission ({{"plan": ..., "priority": ...}})', Exit.INVALID)


@task.command()
@click.argument("file", metavar="FILE|-")
@click.option("--priority", type=click.IntRange(-1000, 1000), help="Higher runs first (default 0).")
@click.option("--max-attempts", type=click.IntRange(1, 100), help="Attempts before a lapsing task fails (default 3).")
@click.option("--serial", help="Run only on the device with this serial.")
@click.option("--attr", "attributes", multiple=True, metavar="KEY=VALUE",
              help="Run only on a device with this attribute (model, manufacturer, sdk, screen_size); repeatable.")
@click.option("--label", "labels", multiple=True, metavar="KEY=VALUE", help="A label to attach; repeatable.")
@click.option("--idempotency-key", help="Makes the submission safe to retry: the same key and body return the same task.")
@click.option("--tenant", help="The tenant to submit to (admin tokens only).")
@click.option("--watch", "follow", is_flag=True, help="Follow the task until it ends, as `amc task watch` does.")
@caller_command
def submit(app: Application, file, priority, max_attempts, serial, attributes, labels, idempotency_key,
           tenant, follow) -> None:
    """Submit the plan in FILE (or stdin for '-').

    FILE holds a plan, {"steps": [{"id": "open", "action": "launch", "args":
    {"package": "com.android.settings"}}]}, or a whole submission, {"plan": ...,
    "priority": 5, ...}; the options override the submission's members.
    """
    body = read_submission(file, app)
    overrides = {"priority": priority, "max_attempts": max_attempts, "idempotency_key": idempotency_key,
                 "tenant": tenant}
    body.update({key: value for key, value in overrides.items() if value is not None})
    if serial or attributes:
        requirements = dict(body.get("requirements") or {})
        if serial:
            requirements["serial"] = serial
        if attributes:
            requirements["attributes"] = {**(requirements.get("attributes") or {}), **_pairs(attributes, "--attr")}
        body["requirements"] = requirements
    if labels:
        body["labels"] = {**(body.get("labels") or {}), **_pairs(labels, "--label")}
    found, created = app.client.submit(body)
    if follow:
        if not app.as_json:
            app.display(f"Submitted [bold]{found['id']}[/bold]." if created else
                        f"Already submitted with this idempotency key: [bold]{found['id']}[/bold].")
        _watch(app, found["id"], interval=0.5, timeout=None)
        return
    from rich.markup import escape

    from amc.cli.views import plan_summary, requirement_text

    app.display_result(found, lambda: (
        f"Submitted [bold]{found['id']}[/bold]: {found['status']}, {escape(plan_summary(found['plan']))}; "
        f"runs on {escape(requirement_text(found))}." if created else
        f"Already submitted with this idempotency key: [bold]{found['id']}[/bold] ({found['status']})."))
    app.display_info(f"Follow it with: amc task watch {found['id']}")


# -- reading ----------------------------------------------------------------------------------


@task.command()
@click.argument("task_id", metavar="ID")
@caller_command
def show(app: Application, task_id: str) -> None:
    """Show one task: its status, attempts, cancellation and step outcomes."""
    from amc.cli.views import task_detail

    found = app.client.task(task_id)
    app.display_result(found, lambda: task_detail(found))


@task.command(name="list")
@click.option("--status", type=click.Choice(STATUSES), help="Only tasks with this status.")
@click.option("--limit", type=click.IntRange(1, 100_000), default=100, show_default=True,
              help="At most this many tasks (oldest first).")
@click.option("--after", metavar="CURSOR", help="Continue after a previous listing (its `next`).")
@caller_command
def list_tasks(app: Application, status: str | None, limit: int, after: str | None) -> None:
    """List tasks, oldest first (all tenants' for an admin token)."""
    from amc.cli.views import tasks_table

    page = app.client.all_tasks(status, limit, after)
    if app.as_json:
        app.display_json(page)
        return
    if not page["tasks"]:
        app.display("No tasks" + (f" with status {status}." if status else "."))
        return
    app.display(tasks_table(page["tasks"]))
    app.display_info(f"{len(page['tasks'])} task(s)" + (f"; more with --after {page['next']}" if page["next"] else ""))


@task.command()
@click.argument("task_id", metavar="ID")
@caller_command
def history(app: Application, task_id: str) -> None:
    """Every recorded event of a task, in order."""
    from amc.cli.views import history_table

    events = app.client.history(task_id)
    app.display_result(events, lambda: history_table(events["events"]))


# -- cancel -----------------------------------------------------------------------------------


@task.command()
@click.argument("task_id", metavar="ID")
@click.option("--reason", help="Why; recorded on the cancellation.")
@caller_command
def cancel(app: Application, task_id: str, reason: str | None) -> None:
    """Cancel a task: at once if it is queued, else at its next step boundary.

    A running task keeps its status until its Host Agent stops and reports; `amc task
    watch ID` follows it. Cancelling a task that already ended done or failed is refused
    (409 task_terminal, exit code 6).
    """
    from rich.markup import escape

    from amc.cli.views import where

    found, pending = app.client.cancel(task_id, reason)
    if app.as_json:
        app.display_json(found)
    elif pending:
        app.display(f"Cancellation of [bold]{found['id']}[/bold] requested: attempt {found['attempt']} on "
                    f"{escape(where(found))} stops at its next step boundary.")
        app.display_info(f"Follow it with: amc task watch {found['id']}")
    else:
        result = found.get("result") or {}
        how = " (it was still queued; nothing ran)" if result.get("reason") == "cancelled_while_queued" else ""
        app.display(f"[bold]{found['id']}[/bold] is cancelled{how}.")


# -- watch ------------------------------------------------------------------------------------


@task.command()
@click.argument("task_id", metavar="ID")
@click.option("--interval", type=click.FloatRange(0.05, 60), default=0.5, show_default=True,
              help="Seconds between two looks at the task.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True),
              help="Give up (exit 1) if the task has not ended after this many seconds.")
@caller_command
def watch(app: Application, task_id: str, interval: float, timeout: float | None) -> None:
    """Follow a task until it ends, printing its events as they happen.

    Exits 0 when the task ends done, 1 when it ends failed or cancelled. With --json,
    prints the ended task.
    """
    _watch(app, task_id, interval, timeout)


def _watch(app: Application, task_id: str, interval: float, timeout: float | None) -> None:
    from contextlib import nullcontext

    from rich.markup import escape
    from rich.text import Text

    from amc.cli.views import TERMINAL, event_text, steps_table, when, where

    client = app.client
    began = time.monotonic()
    seen = 0
    found = client.task(task_id)  # a 404 ends the watch before anything is printed
    # A spinner line only on a terminal; in a pipe or a CI log the event lines say it all.
    spinner = app.out.status("") if app.out.is_terminal and not app.as_json else nullcontext()
    with spinner as status:
        while True:
            events = client.history(task_id)["events"]
            for event in events[seen:]:
                app.display(Text(f"{when(event['at'])}  {event_text(event)}"))
            seen = max(seen, len(events))
            if any(event["type"] == "ended" for event in events):
                found = client.task(task_id)
                break
            elapsed = time.monotonic() - began
            if timeout is not None and elapsed >= timeout:
                found = client.task(task_id)
                app.abort(f"{task_id} is still {found['status']} after {timeout:g} s", Exit.FAILED)
            if status is not None:
                last = events[-1]["type"] if events else "submitted"
                status.update(f"{task_id}: {last} ({elapsed:.0f} s)")
            time.sleep(interval)
    if found["status"] not in TERMINAL:  # cannot happen with an `ended` event; stay truthful anyway
        found = client.task(task_id)
    if app.as_json:
        app.display_json(found)
    else:
        result = found.get("result") or {}
        if result.get("steps"):
            app.display(steps_table(result["steps"]))
        app.display(f"[bold]{task_id}[/bold] ended [bold]{found['status']}[/bold] ({result.get('reason')})"
                    + (f" on {escape(where(found))}" if found.get("attempts") else "") + ".")
    if found["status"] != "done":
        raise click.exceptions.Exit(Exit.FAILED)
