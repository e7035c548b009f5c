"""`amc task`: submit, inspect, cancel, steer, pause and follow tasks (the caller's endpoints
of specs/protocol.md, Parts A and B).

Each command is one request or a short loop of them; what a status or a refusal means is
the server's to say, so the commands print its answer (for people, or with --json as the
server's own JSON) and turn its refusals into one line and an exit code (`amc.cli.app`).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from amc.cli.app import EXIT_HELP, Application, Exit, caller_command
from amc.cli.client import Unreachable
from amc.core.lifecycle import MessageState, TaskStatus

if TYPE_CHECKING:
    from amc.cli.events import ServerEvent


@click.group(epilog=EXIT_HELP)
def task() -> None:
    """Submit tasks and follow them: submit, list, show, watch, history, cancel; read their
    evidence: artifacts, logs; talk to them while they run: steer, pause, resume, follow-up,
    messages.

    Every command takes --url or --server (AMC_URL) and --token (AMC_TOKEN); without a
    token, the client token of .amc/tokens.json (what `amc up` writes) is used. Several
    URLs, comma-separated, name servers sharing one store: requests go to the leader.
    """


# -- submit -----------------------------------------------------------------------------------


# While no server answers, a watch tries again for this long, saying so, then exits 3. The
# default keeps what the CLI always did: stop at once when no server answers at all (after up
# to the request timeout while only standbys answer).
give_up_option = click.option(
    "--give-up-after",
    type=click.FloatRange(min=0),
    default=0,
    show_default=True,
    metavar="SECONDS",
    help="While following a task and no server answers, keep trying this long (saying so on stderr), "
    "then exit 3. 0: stop at once, as any command does.",
)


def _pairs(values: tuple[str, ...], option: str) -> dict[str, str]:
    found = {}
    for value in values:
        key, sep, item = value.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{value!r} is not KEY=VALUE", param_hint=option)
        found[key] = item
    return found


def _refuse_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


def read_submission(source: str, app: Application) -> dict[str, Any]:
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
    app.abort(
        f'{where} holds neither a plan ({{"steps": [...]}} or {{"stages": [...]}}) '
        f'nor a submission ({{"plan": ..., "priority": ...}})',
        Exit.INVALID,
    )


def upload_files(plan: Any, base: Path, app: Application) -> Any:
    """`plan` with every argument value ``"@path/to/file"`` (relative to `base`, the plan
    file's directory) replaced by the reference to that file, uploaded first as an input
    (specs/protocol.md Part F). A value that should start with "@" is written "@@"."""
    from amc.cli.inputs import upload

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: walk(item) for key, item in value.items()}
        if isinstance(value, list):
            return [walk(item) for item in value]
        if isinstance(value, str) and value.startswith("@@"):
            return value[1:]
        if isinstance(value, str) and value.startswith("@") and len(value) > 1:
            path = Path(value[1:]).expanduser()
            found = upload(app, path if path.is_absolute() else base / path)
            return {"input": found["ref"]}
        return value

    if not isinstance(plan, dict):
        return plan
    steps = [*plan.get("steps", []), *(s for stage in plan.get("stages", []) for s in stage.get("steps", []))]
    for step in steps:
        if isinstance(step, dict) and isinstance(step.get("args"), dict):
            step["args"] = walk(step["args"])
    return plan


@task.command()
@click.argument("file", metavar="FILE|-")
@click.option("--priority", type=click.IntRange(-1000, 1000), help="Higher runs first (default 0).")
@click.option("--max-attempts", type=click.IntRange(1, 100), help="Attempts before a lapsing task fails (default 3).")
@click.option("--serial", help="Run only on the device with this serial.")
@click.option(
    "--attr",
    "attributes",
    multiple=True,
    metavar="KEY=VALUE",
    help="Run only on a device with this attribute (model, manufacturer, sdk, screen_size); repeatable.",
)
@click.option("--label", "labels", multiple=True, metavar="KEY=VALUE", help="A label to attach; repeatable.")
@click.option(
    "--idempotency-key", help="Makes the submission safe to retry: the same key and body return the same task."
)
@click.option("--tenant", help="The tenant to submit to (admin tokens only).")
@click.option("--watch", "follow", is_flag=True, help="Follow the task until it ends, as `amc task watch` does.")
@give_up_option
@caller_command
def submit(
    app: Application,
    file: str,
    priority: int | None,
    max_attempts: int | None,
    serial: str | None,
    attributes: tuple[str, ...],
    labels: tuple[str, ...],
    idempotency_key: str | None,
    tenant: str | None,
    follow: bool,
    give_up_after: float,
) -> None:
    """Submit the plan in FILE (or stdin for '-').

    FILE holds a plan, {"steps": [{"id": "open", "action": "launch", "args":
    {"package": "com.android.settings"}}]}, or a whole submission, {"plan": ...,
    "priority": 5, ...}; the options override the submission's members. An argument value
    "@path/to/app.apk" (relative to FILE's directory) is uploaded first as an input and
    replaced by its reference, {"input": "sha256:..."}; write "@@" for a leading "@".
    """
    body = read_submission(file, app)
    base = Path.cwd() if file == "-" else Path(file).resolve().parent
    body["plan"] = upload_files(body.get("plan"), base, app)
    overrides = {
        "priority": priority,
        "max_attempts": max_attempts,
        "idempotency_key": idempotency_key,
        "tenant": tenant,
    }
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
            app.display(
                f"Submitted [bold]{found['id']}[/bold]."
                if created
                else f"Already submitted with this idempotency key: [bold]{found['id']}[/bold]."
            )
        _watch(app, found["id"], interval=0.5, timeout=None, give_up_after=give_up_after)
        return
    from rich.markup import escape

    from amc.cli.views import plan_summary, requirement_text, waiting_text

    # A task no device can run says so now, not after a long wait.
    why = waiting_text(found) if (found.get("waiting") or {}).get("reason") not in (None, "ready") else None
    app.display_result(
        found,
        lambda: (
            f"Submitted [bold]{found['id']}[/bold]: {found['status']}, {escape(plan_summary(found['plan']))}; "
            f"runs on {escape(requirement_text(found))}." + (f" It waits: {escape(why)}." if why else "")
            if created
            else f"Already submitted with this idempotency key: [bold]{found['id']}[/bold] ({found['status']})."
        ),
    )
    app.display_info(f"Follow it with: amc task watch {found['id']}")


# -- reading ----------------------------------------------------------------------------------


@task.command()
@click.argument("task_id", metavar="ID")
@caller_command
def show(app: Application, task_id: str) -> None:
    """Show one task: its status, attempts, cancellation, messages and step outcomes, with
    the artifacts each step stored (name, type, size) under it.

    With --json, prints the task resource alone (`amc task messages ID --json` has the messages).
    """
    from amc.cli.views import task_detail

    found = app.client.task(task_id)
    if app.as_json:
        app.display_json(found)
        return
    app.display(task_detail(found, app.client.messages(task_id)["messages"], _artifacts_if_served(app, task_id)))


def _artifacts_if_served(app: Application, task_id: str) -> list[dict[str, Any]]:
    """The task's artifacts; none from a server without Part C (a v1 server answers 404 to
    the route while the task itself is there)."""
    from amc.cli.client import Refused

    try:
        return app.client.artifacts(task_id)
    except Refused as error:
        if error.status == 404:
            return []
        raise


@task.command(name="list")
@click.option("--status", type=click.Choice(tuple(TaskStatus)), help="Only tasks with this status.")
@click.option(
    "--limit",
    type=click.IntRange(1, 100_000),
    default=100,
    show_default=True,
    help="At most this many tasks (oldest first).",
)
@click.option("--after", metavar="CURSOR", help="Continue after a previous listing (its `next`).")
@caller_command
def list_tasks(app: Application, status: str | None, limit: int, after: str | None) -> None:
    """List tasks, oldest first (all tenants' for an admin token).

    NOTE says why a queued task waits, that a running one is paused, its priority and labels.
    """
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


# -- artifacts and logs ---------------------------------------------------------------------


@task.command()
@click.argument("task_id", metavar="ID")
@click.option(
    "--download",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    metavar="DIR",
    help="Download every artifact into DIR/attempt-N/NAME (made if missing), checking each sha256.",
)
@click.option(
    "--overwrite", is_flag=True, help="With --download: replace files in DIR that hold other bytes than the artifact."
)
@caller_command
def artifacts(app: Application, task_id: str, directory: Path | None, overwrite: bool) -> None:
    """List a task's artifacts (the evidence its steps stored: screenshots, UI dumps, logs,
    long outputs), or download them.

    The table shows each artifact's step, name, type, size and when it was stored (and the
    attempt, when several stored some); --json prints the server's listing.

    With --download DIR, each artifact is streamed to DIR/attempt-N/NAME and its sha256
    checked as it arrives. A file already there with the same bytes is kept and not
    downloaded again, so running the command twice is cheap. A file there with other bytes
    is never replaced without --overwrite: the command then stops before it downloads
    anything, naming those files (exit 1). An artifact whose bytes do not match its sha256
    is not kept (no file is left of it); the others are still downloaded, and the command
    ends with exit 1 naming every mismatch.
    """
    from amc.cli.artifacts import download_all

    found = app.client.artifacts(task_id)
    if directory is not None:
        download_all(app, task_id, found, directory, overwrite)
        return
    if app.as_json:
        app.display_json({"artifacts": found})
        return
    from amc.cli.views import artifacts_table, size_text, when

    if not found:
        purges = [e for e in app.client.history(task_id)["events"] if e["type"] == "artifacts_purged"]
        if purges:
            gone = sum(len(e["data"]["ids"]) for e in purges)
            app.display(
                f"{task_id} has no artifacts: {gone} were purged at {when(purges[-1]['at'], date=True)} "
                "(amc store gc --older-than)."
            )
        else:
            app.display(f"{task_id} has no artifacts.")
        return

    app.display(artifacts_table(found))
    total = sum(artifact["size"] for artifact in found)
    app.display_info(
        f"{len(found)} artifact(s), {size_text(total)}; download them with: amc task artifacts {task_id} --download DIR"
    )


@task.command()
@click.argument("task_id", metavar="ID")
@caller_command
def logs(app: Application, task_id: str) -> None:
    """Print each step's output in full, step by step.

    A step's output is its text artifacts (type text/plain: the full output of a shell step
    whose output was longer than the result's inline limit, a logcat), else the output its
    step outcome carries inline. Other artifacts (screenshots, UI dumps) are named, not
    printed: `amc task artifacts ID --download DIR` fetches them. With --json, one document:
    {"steps": [{"id", "status", "output", "artifacts"}]}.
    """
    from amc.cli.artifacts import print_logs

    print_logs(app, task_id)


# -- cancel -----------------------------------------------------------------------------------


@task.command()
@click.argument("task_id", metavar="ID")
@click.option("--reason", help="Why; recorded on the cancellation.")
@caller_command
def cancel(app: Application, task_id: str, reason: str | None) -> None:
    """Cancel a task: at once if it is queued; a running one stops at its host's next renewal.

    A queued task ends cancelled at once (nothing ran). A running task keeps its status until
    its Host Agent learns of the cancellation, at its next lease renewal: the agent then
    interrupts the running step at once, reports the later steps not_started, and the task
    ends cancelled. `amc task watch ID` follows it. Cancelling a task that already ended done
    or failed is refused (409 task_terminal, exit code 6).
    """
    from rich.markup import escape

    from amc.cli.views import where

    found, pending = app.client.cancel(task_id, reason)
    if app.as_json:
        app.display_json(found)
    elif pending:
        app.display(
            f"Cancellation of [bold]{found['id']}[/bold] requested: attempt {found['attempt']} on "
            f"{escape(where(found))} learns of it at its next lease renewal; then its running step is "
            "interrupted at once, the steps after it are reported not_started, and the task ends cancelled."
        )
        app.display_info(f"Follow it with: amc task watch {found['id']}")
    else:
        result = found.get("result") or {}
        if result.get("reason") == "cancelled_while_queued":
            app.display(f"[bold]{found['id']}[/bold] was still queued: it ended cancelled at once, and nothing ran.")
        else:
            app.display(f"[bold]{found['id']}[/bold] is cancelled ({escape(str(result.get('reason')))}).")


# -- messages: steer, pause, resume, follow-up --------------------------------------------------


def read_json_option(value: str, option: str, app: Application) -> Any:
    """The JSON an option carries, inline or as @FILE (@- for stdin); one line and exit 7 if it is not JSON."""
    where = option
    text = value
    if value.startswith("@"):
        source = value[1:]
        where = f"{option} ({'stdin' if source == '-' else source})"
        try:
            text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
        except OSError as error:
            app.abort(f"{where}: cannot read it: {error.strerror or error}", Exit.INVALID)
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except ValueError as error:
        app.abort(f"{where} is not valid JSON: {error}; nothing was sent", Exit.INVALID)


def read_steps(value: str, option: str, app: Application) -> list[Any]:
    """The steps an option carries: a JSON list of steps, or a plan {"steps": [...]}.

    Their actions and arguments are the server's to check, as for a submitted plan.
    """
    data = read_json_option(value, option, app)
    if isinstance(data, dict) and isinstance(data.get("steps"), list):
        steps: list[Any] = data["steps"]
        return steps
    if isinstance(data, list):
        return data
    app.abort(
        f'{option} holds neither a list of steps ([{{"id": ..., "action": ..., "args": ...}}]) '
        f'nor a plan ({{"steps": [...]}}); nothing was sent',
        Exit.INVALID,
    )


def steer_edit(
    app: Application,
    skips: tuple[str, ...],
    insert_after: str | None,
    insert_first: bool,
    steps: str | None,
    replace_remaining: str | None,
) -> dict[str, Any] | None:
    """The one structured edit the steer options ask for (specs/protocol.md Part B), or None for words only."""
    inserting = insert_after is not None or insert_first
    if insert_after is not None and insert_first:
        app.abort("--insert-after and --insert-first: give one of them", Exit.USAGE)
    if steps is not None and not inserting:
        app.abort("--steps needs --insert-after STEP or --insert-first (or use --replace-remaining)", Exit.USAGE)
    if inserting and steps is None:
        app.abort("--insert-after and --insert-first need --steps", Exit.USAGE)
    chosen = [
        name
        for name, given in (
            ("--skip", bool(skips)),
            ("--insert-after/--insert-first", inserting),
            ("--replace-remaining", replace_remaining is not None),
        )
        if given
    ]
    if len(chosen) > 1:
        app.abort(f"one edit per steer, not {' and '.join(chosen)}: send one steer for each", Exit.USAGE)
    if skips:
        ids = [part.strip() for value in skips for part in value.split(",") if part.strip()]
        if not ids:
            app.abort("--skip: name at least one step id", Exit.USAGE)
        return {"skip": ids}
    if inserting:
        assert steps is not None  # refused above
        return {"insert_after": insert_after, "steps": read_steps(steps, "--steps", app)}
    if replace_remaining is not None:
        return {"replace_remaining": read_steps(replace_remaining, "--replace-remaining", app)}
    return None


@task.command()
@click.argument("task_id", metavar="ID")
@click.option(
    "--skip",
    "skips",
    multiple=True,
    metavar="STEP[,STEP...]",
    help="Do not run these steps (each reported not_started, reason steered); repeatable.",
)
@click.option("--insert-after", metavar="STEP", help="Insert the --steps after this step.")
@click.option("--insert-first", is_flag=True, help="Insert the --steps at the next step boundary, so they run next.")
@click.option(
    "--steps",
    metavar="JSON|@FILE",
    help='The steps to insert: a JSON list [{"id", "action", "args"}, ...] or a plan {"steps": [...]}, '
    "inline or @FILE (@- for stdin).",
)
@click.option(
    "--replace-remaining",
    metavar="JSON|@FILE",
    help="Replace every step that has not started with these steps (same forms as --steps).",
)
@click.option(
    "--text",
    help="Guidance in words, for an agent planner. The scripted runners cannot apply words "
    "alone and reject such a steer.",
)
@caller_command
def steer(
    app: Application,
    task_id: str,
    skips: tuple[str, ...],
    insert_after: str | None,
    insert_first: bool,
    steps: str | None,
    replace_remaining: str | None,
    text: str | None,
) -> None:
    """Correct a task's plan while it runs: one edit (skip, insert, replace the rest), words, or both.

    The task's host applies the correction at its next step boundary, before any step it
    affects starts; a step that already started is never recalled, and an edit that would
    touch one is rejected. `amc task messages ID` shows what became of it. Plans of stages
    take words only.

    \b
    Examples:
      amc task steer t_1 --skip share,upload
      amc task steer t_1 --insert-after open --steps '[{"id": "shot", "action": "screenshot", "args": {}}]'
      amc task steer t_1 --replace-remaining @rest.json --text "the cart is already empty"
    """
    from rich.markup import escape

    from amc.cli.views import asked_text

    data = steer_edit(app, skips, insert_after, insert_first, steps, replace_remaining)
    if data is None and not text:
        app.abort(
            "say what to change: --skip, --insert-after/--insert-first with --steps, --replace-remaining, or --text",
            Exit.USAGE,
        )
    message = app.client.post_message(task_id, "steer", text, data)
    app.display_result(
        message,
        lambda: (
            f"Steer [bold]{message['id']}[/bold] posted to [bold]{escape(task_id)}[/bold] ({message['state']}): "
            f"{escape(asked_text(message))}. Its host applies it at its next step boundary."
        ),
    )
    app.display_info(f"Follow it with: amc task messages {task_id}")


@task.command()
@click.argument("task_id", metavar="ID")
@click.option("--text", help="Why; kept on the message.")
@caller_command
def pause(app: Application, task_id: str, text: str | None) -> None:
    """Pause a task: a queued one is held (not claimed), a running one starts no new step.

    A running task's host lets the running step end on its own terms, starts nothing more
    from the next step boundary on, and keeps renewing its lease; the task reads `paused`.
    The pause lasts until `amc task resume ID`. A cancel still works on a paused task.
    """
    _pause_or_resume(app, task_id, "pause", text)


@task.command()
@click.argument("task_id", metavar="ID")
@click.option("--text", help="Why; kept on the message.")
@caller_command
def resume(app: Application, task_id: str, text: str | None) -> None:
    """Lift a pause: a held task can be claimed again (in its old place), a paused one goes on."""
    _pause_or_resume(app, task_id, "resume", text)


def _pause_or_resume(app: Application, task_id: str, intent: str, text: str | None) -> None:
    from rich.markup import escape

    message = app.client.post_message(task_id, intent, text)
    task_name = f"[bold]{escape(task_id)}[/bold]"
    if message["state"] == MessageState.completed:  # the task was queued: the server applied it in the request
        said = f"{task_name} is queued, so the server applied it at once: {escape(message.get('detail') or '')}."
    elif intent == "pause":
        said = (
            f"{task_name}'s host starts no new step from its next step boundary on, and keeps the lease; "
            f"`amc task resume {escape(task_id)}` lets it go on."
        )
    else:
        said = f"{task_name}'s host goes on from where it paused, from its next lease renewal."
    app.display_result(message, lambda: f"{intent.capitalize()} [bold]{message['id']}[/bold]: {said}")


@task.command(name="follow-up")
@click.argument("task_id", metavar="ID")
@click.option("--text", help="What to do next, in words.")
@click.option(
    "--steps",
    metavar="JSON|@FILE",
    help='Steps for the later turn: a JSON list [{"id", "action", "args"}, ...] or a plan '
    '{"steps": [...]}, inline or @FILE (@- for stdin).',
)
@caller_command
def follow_up(app: Application, task_id: str, text: str | None, steps: str | None) -> None:
    """Ask for a later turn: work that runs after the task, as a successor task.

    The follow-up waits on the task. When the task ends done, all its follow-ups become one
    successor task, `ID.N`, with the same device requirements, whose plan is each follow-up's
    steps in posting order (step ids prefixed with the message id). To a task already done,
    the successor starts at once. If the task ends failed or cancelled, its follow-ups are
    not admitted.
    """
    from rich.markup import escape

    if text is None and steps is None:
        app.abort("say what to do next: --text, --steps, or both", Exit.USAGE)
    data = None if steps is None else {"steps": read_steps(steps, "--steps", app)}
    message = app.client.post_message(task_id, "follow_up", text, data)
    successor = message.get("successor")
    task_name = f"[bold]{escape(task_id)}[/bold]"
    if successor:
        said = f"{task_name} had ended done, so its successor [bold]{escape(successor)}[/bold] starts at once."
    else:
        said = f"it waits on {task_name}; when that ends done, its follow-ups become one successor task."
    app.display_result(message, lambda: f"Follow-up [bold]{message['id']}[/bold]: {said}")
    app.display_info(
        f"Follow it with: amc task watch {successor}" if successor else f"See it with: amc task messages {task_id}"
    )


@task.command(name="messages")
@click.argument("task_id", metavar="ID")
@caller_command
def list_messages(app: Application, task_id: str) -> None:
    """Every message of a task, in posting order: what it asked, its state, its times, where it applied.

    States: queued, delivered (its host has it), admitted (applied at the named step
    boundary), completed; or rejected (the host could not apply it; the detail says why),
    not_admitted (the attempt or the task ended first).
    """
    from amc.cli.views import messages_table

    found = app.client.messages(task_id)
    if app.as_json:
        app.display_json(found)
    elif not found["messages"]:
        app.display(f"No messages on {task_id}.")
    else:
        app.display(messages_table(found["messages"]))


# -- watch ------------------------------------------------------------------------------------


@task.command()
@click.argument("task_id", metavar="ID")
@click.option(
    "--interval",
    type=click.FloatRange(0.05, 60),
    default=0.5,
    show_default=True,
    help="Seconds between two looks at the task on a server without an event stream (on one: between two "
    "updates of the time shown; the stream says when to look).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    help="Give up (exit 1) if the task has not ended after this many seconds.",
)
@give_up_option
@caller_command
def watch(app: Application, task_id: str, interval: float, timeout: float | None, give_up_after: float) -> None:
    """Follow a task until it ends: its events as they happen, and where it stands.

    While it waits, why (e.g. "queued: no registered device matches serial 'x'"); while it
    runs, the running step, the steps ended out of the total and the time since it started,
    or `paused`. When it ends, its step table. Exits 0 when the task ends done, 1 when it
    ends failed or cancelled; Ctrl-C stops the watching only (not the task) and exits
    130. With --json, prints the ended task. A dropped connection moves to the next server
    at once; while no server answers, the watch says so on stderr and exits 3 after
    --give-up-after seconds.
    """
    _watch(app, task_id, interval, timeout, give_up_after)


def _watch(app: Application, task_id: str, interval: float, timeout: float | None, give_up_after: float) -> None:
    """Follow a task: its events as they happen, and where it stands (a spinner line on a
    terminal; a line each time it changes elsewhere). Ctrl-C stops the watching only."""
    patience = _Patience(app, give_up_after)
    try:
        _follow(app, task_id, interval, timeout, patience)
    except KeyboardInterrupt:
        # Never "the task goes on": it may have ended while this watch could not hear of it.
        last = f" (last seen {patience.last_status})" if patience.last_status else ""
        app.err.print(
            f"Stopped watching {task_id}{last}; stopping the watch does not stop the task. "
            f"Cancel it with: amc task cancel {task_id}",
            markup=False,
            highlight=False,
        )
        raise click.exceptions.Exit(130) from None


class _Patience:
    """How a watch bears servers that do not answer (BOUNDED/s4): a read that found no server
    (`Unreachable`) is tried again until `give_up_after` seconds have passed since the first
    such read, with one line on stderr when the trouble starts and one when a server answers
    again; then the error ends the watch (exit 3). 0 gives up at the first, as any command
    does: at once when no server answers at all, after up to the request timeout while only
    standbys answer."""

    def __init__(self, app: Application, give_up_after: float):
        self.app = app
        self.give_up_after = give_up_after
        self.since: float | None = None  # when the reads began to fail
        self.last_status = ""  # the status of the latest read, for a last word

    def failed(self, error: Unreachable) -> None:
        """A read found no server: return to try again, or raise `error` when out of patience."""
        now = time.monotonic()
        if self.since is None:
            self.since = now
            if self.give_up_after > 0:
                self.app.err.print(
                    f"No server answers ({error.message}); trying again for up to {self.give_up_after:g} s",
                    markup=False,
                    highlight=False,
                )
        if now - self.since >= self.give_up_after:
            raise error

    def answered(self, status: str) -> None:
        self.last_status = status
        if self.since is not None:
            self.app.err.print(
                f"{self.app.client.url} answers again (after {time.monotonic() - self.since:.1f} s)",
                markup=False,
                highlight=False,
            )
            self.since = None


def _since(task: dict[str, Any]) -> str:
    """When the current phase began: the current attempt's start (or claim), else the submission."""
    attempts = task.get("attempts") or []
    if task["status"] != TaskStatus.queued and attempts:
        started: str = attempts[-1].get("dispatched_at") or attempts[-1]["assigned_at"]
        return started
    submitted: str = task["created_at"]
    return submitted


class _Changes:
    """When to look at a watched task again: when the server's event stream says it changed
    (or says "reset": read everything again), else every `interval` (a server without a
    stream is polled, and so is one whose stream is not open yet). A dropped stream
    reconnects by itself and catches up.

    While the task is queued its `waiting` follows the hosts, so a host event counts too,
    but at most once per `interval`: a busy fleet's hosts change far more often than that.
    """

    def __init__(self, app: Application, task_id: str, interval: float):
        self.task_id = task_id
        self.interval = interval
        self.queued = True
        self._changed = threading.Event()
        self._hosts_changed = threading.Event()
        # Connecting runs beside the first reads: until the stream is open, `wait` polls, and
        # the stream's first event is a reset, so nothing between the two is missed.
        self._live = app.client.live_events(self._heard).start()

    def _heard(self, event: ServerEvent) -> None:
        if event.type == "host":
            self._hosts_changed.set()
        elif event.type == "reset" or (
            event.type == "task" and f'"{self.task_id}"' in event.data and event.json().get("id") == self.task_id
        ):
            self._changed.set()

    def wait(self) -> bool:
        """Wait up to `interval`; True if the task should be read again."""
        # Cleared only once seen set: a change heard after the wait timed out stays for the
        # next wait, and one heard between a wait and its clear is in the read that follows.
        changed = self._changed.wait(self.interval)
        if changed:
            self._changed.clear()
        if not self._live.open:
            # Polling: no server has a stream, or it is being reconnected (a reconnection
            # that lasts tells nothing, and the task may end meanwhile). The stream's
            # opening reset ends a wait early.
            return True
        hosts_changed = self._hosts_changed.is_set()
        if hosts_changed:
            self._hosts_changed.clear()
        return changed or (hosts_changed and self.queued)

    def close(self) -> None:
        self._live.close()


def _follow(app: Application, task_id: str, interval: float, timeout: float | None, patience: _Patience) -> None:
    changes = _Changes(app, task_id, interval)
    try:
        found = _follow_changes(app, task_id, changes, timeout, patience)
    finally:
        changes.close()
    _ended(app, task_id, found)


def _first_read(app: Application, task_id: str, patience: _Patience, interval: float) -> dict[str, Any]:
    while True:
        try:
            found = app.client.task(task_id)  # a 404 ends the watch before anything is printed
        except Unreachable as error:
            patience.failed(error)
            time.sleep(interval)
            continue
        patience.answered(found["status"])
        return found


def _follow_changes(
    app: Application, task_id: str, changes: _Changes, timeout: float | None, patience: _Patience
) -> dict[str, Any]:
    """Show the task's events and where it stands until it ends; the ended task."""
    from contextlib import nullcontext

    from rich.markup import escape
    from rich.text import Text

    from amc.cli.steered import steered_plan
    from amc.cli.views import duration, event_text, parse_time, progress_text, when
    from amc.core.lifecycle import TERMINAL_STATUSES

    client = app.client
    began = time.monotonic()
    seen = 0
    said = now = ""
    found = _first_read(app, task_id, patience, changes.interval)
    read = True
    # A spinner line only on a terminal; in a pipe or a CI log, a line whenever it changes.
    spinner = app.out.status("") if app.out.is_terminal and not app.as_json else nullcontext()
    with spinner as status:
        while True:
            if read:
                try:
                    events = client.history(task_id)["events"]
                    for event in events[seen:]:
                        app.display(Text(f"{when(event['at'])}  {event_text(event)}"))
                    seen = max(seen, len(events))
                    found = client.task(task_id)
                except Unreachable as error:
                    patience.failed(error)  # out of patience: raises, and the watch exits 3
                    time.sleep(changes.interval)
                    continue  # `read` stays True: read again
                patience.answered(found["status"])
                changes.queued = found["status"] == TaskStatus.queued
                if found["status"] in TERMINAL_STATUSES:
                    try:
                        for event in client.history(task_id)["events"][seen:]:  # it may have ended since
                            app.display(Text(f"{when(event['at'])}  {event_text(event)}"))
                    except Unreachable:
                        pass  # the end is known; its last events are not worth a hang
                    return found
            if timeout is not None and time.monotonic() - began >= timeout:
                app.abort(f"{task_id} is still {found['status']} after {timeout:g} s", Exit.FAILED)
            if read:
                steered = None
                if found.get("attempts"):
                    try:
                        plan = steered_plan(found, client.messages(task_id)["messages"])
                    except Unreachable:
                        plan = None  # shown unsteered until the next read
                    steered = None if plan is None else [step for step in plan if step.removed_by is None]
                now = progress_text(found, steered)
            elapsed = duration(time.time() - parse_time(_since(found)))
            if status is not None:
                status.update(f"{escape(task_id)}: {escape(now)} ({elapsed})")
            elif now != said:
                app.display(Text(f"{' ' * 8}  {now} ({elapsed})", style="dim"))
            said = now
            read = changes.wait()


def _ended(app: Application, task_id: str, found: dict[str, Any]) -> None:
    from rich.markup import escape

    from amc.cli.views import duration, parse_time, steps_table, where

    if app.as_json:
        app.display_json(found)
    else:
        result = found.get("result") or {}
        if result.get("steps"):
            app.display(steps_table(result["steps"]))
        app.display(
            f"[bold]{task_id}[/bold] ended [bold]{found['status']}[/bold] ({result.get('reason')})"
            + (f" on {escape(where(found))}" if found.get("attempts") else "")
            + f", {duration(parse_time(found['updated_at']) - parse_time(found['created_at']))} after it was submitted."
        )
    if found["status"] != TaskStatus.done:
        raise click.exceptions.Exit(Exit.FAILED)
