"""`amc check-history`: check the histories clients recorded against the four rules of `amc.check.rules`."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("check-history")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--server",
    envvar="AMC_URL",
    show_envvar=True,
    default=None,
    help="Read the final state from this server (with --token, an admin's) for the rule that every "
    "acknowledged command is in it; without it that rule is not checked.",
)
@click.option("--token", envvar="AMC_TOKEN", show_envvar=True, default=None, help="An admin token of --server.")
@click.option(
    "--slack",
    type=click.FloatRange(min=0),
    default=0.005,
    show_default=True,
    help="Seconds taken off each lease's certain end: the server clock's resolution, plus the worst offset "
    "between the clients' clocks when the files come from several machines.",
)
def check_history(files: tuple[Path, ...], server: str | None, token: str | None, slack: float) -> None:
    """Check recorded client histories (`amc host run --record-history FILE`, the test harnesses).

    \b
    Rules: no two attempts of one task held for certain at once; no device holding two
    attempts at once; every acknowledged command in the final state; every task's observed
    statuses in an order its lifecycle allows. Exits 1 on any violation.
    """
    from amc.check.final import read_final_state
    from amc.check.operations import read
    from amc.check.rules import check, message_tasks

    history = read(files)
    final = None
    if server is not None:
        if token is None:
            raise click.UsageError("--server needs --token (an admin token)")
        final = read_final_state(server, token, message_tasks(history.operations))
    report = check(history, final, slack)
    click.echo(f"{len(files)} file(s), times on the {history.clock} clock: {report.summary()}")
    if final is None:
        click.echo("(no --server: the rule that acknowledged commands are in the final state was not checked)")
    for violation in report.violations[:50]:
        click.echo(f"VIOLATION [{violation.rule}] {violation.detail}")
    if not report.ok:
        raise SystemExit(1)
