"""`amc model`: check the kernel exhaustively in a small scope, and render its lifecycles."""

from __future__ import annotations

import sys
from pathlib import Path

import click


@click.group()
def model() -> None:
    """The formal model of amc's kernel."""


@model.command()
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("specs/lifecycles"),
    show_default=True,
    help="Where to write the diagrams and tables.",
)
def render(out: Path) -> None:
    """Render the lifecycle diagrams and transition tables from their declarations."""
    from amc.core.render import rendered

    out.mkdir(parents=True, exist_ok=True)
    for name, text in rendered().items():
        (out / name).write_text(text)
        click.echo(f"wrote {out / name}")


@model.command()
@click.option("--hosts", default=2, show_default=True, help="Hosts, each with one device.")
@click.option("--tasks", default=2, show_default=True, help="Tasks that may be submitted.")
@click.option("--max-attempts", default=2, show_default=True, help="max_attempts of every task.")
@click.option("--lease-ticks", default=2, show_default=True, help="Clock steps a lease lasts.")
@click.option("--churn/--no-churn", default=False, show_default=True, help="Let devices leave and return.")
@click.option(
    "--messages",
    default=0,
    show_default=True,
    help="Part B: messages (pause, resume, steer, follow-up) that may be sent to each task.",
)
@click.option(
    "--artifacts",
    default=0,
    show_default=True,
    help="Part C: artifacts each task's attempts may upload (live, stale and foreign; the last one over the limit).",
)
@click.option("--max-states", default=2_000_000, show_default=True, help="Stop after this many states.")
def check(
    hosts: int,
    tasks: int,
    max_attempts: int,
    lease_ticks: int,
    churn: bool,
    messages: int,
    artifacts: int,
    max_states: int,
) -> None:
    """Explore every command sequence in a small scope and check every invariant.

    Exits 1 with the shortest trace when an invariant is violated, 2 when --max-states
    stopped the search before it was complete.
    """
    import time

    from amc.core.explorer import Scope, explore

    scope = Scope(
        hosts=hosts,
        tasks=tasks,
        max_attempts=max_attempts,
        lease_ticks=lease_ticks,
        churn=churn,
        messages=messages,
        artifacts=artifacts,
        max_states=max_states,
    )
    click.echo(f"exploring {scope}", err=True)
    started = time.monotonic()
    shown = [started]

    def progress(states: int, transitions: int, frontier: int) -> None:
        if time.monotonic() - shown[0] >= 2:
            shown[0] = time.monotonic()
            click.echo(f"  {states:,} states, {transitions:,} transitions, {frontier:,} to visit", err=True)

    result = explore(scope, progress)
    seconds = time.monotonic() - started
    if result.violation:
        click.echo("INVARIANT VIOLATED:")
        for line in result.violation:
            click.echo(f"  {line}")
        click.echo("shortest trace:")
        for number, label in enumerate(result.trace or (), 1):
            click.echo(f"  {number:3}. {label}")
    elif not result.complete:
        click.echo(f"incomplete: stopped at --max-states {max_states:,}")
    click.echo(
        f"states: {result.states:,}  transitions: {result.transitions:,}  depth: {result.depth}  "
        f"seconds: {seconds:.1f}  result: {'VIOLATION' if result.violation else 'ok' if result.complete else 'incomplete'}"
    )
    sys.exit(1 if result.violation else 0 if result.complete else 2)
