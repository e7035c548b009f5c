"""`amc demo`: the local stack with a small workload, a live table, and a verdict.

What the run does, step by step, is told in `run` (the `DemoRun`); what each task must end
as, in `workload`. This module is the command line: its options, the run's working
directory and logs, and the exit status.

Exit 0 only when every task ended as it must. With --json the narration and tables go to
stderr and stdout carries one JSON document: the verdict, and per job its task, messages
and problems. The store and the logs are deleted, unless the demo failed or --keep was
given.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import TextIO

import click


@click.command()
@click.option(
    "--timeout",
    type=click.FloatRange(10, 600),
    default=60.0,
    show_default=True,
    help="Give up (exit 1) if the workload has not ended after this many seconds.",
)
@click.option("--keep", is_flag=True, help="Keep the temporary store and logs, and print where they are.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print one JSON document (the verdict, each job's task, messages and problems) to stdout; "
    "the narration goes to stderr.",
)
def demo(timeout: float, keep: bool, as_json: bool) -> None:
    """Run a small workload on a local stack with simulated phones, live, and check the outcome.

    A server, three Host Agents and five simulated phones on a throwaway store. Several app
    flows, a built APK uploaded, installed, launched and uninstalled on a recorded task, one
    cancellation of a queued task, one of a running task, one host killed
    mid-task, one task steered while it runs, and one paused, sent a follow-up and resumed.
    Exits 0 only when every task ended as the protocol says it must.
    """
    from amc.cli.app import make_console
    from amc.cli.client import ApiError
    from amc.cli.demo.run import DemoRun
    from amc.cli.launch import LaunchError, Stack

    console = make_console(stderr=as_json)
    workdir = Path(tempfile.mkdtemp(prefix="amc-demo-"))
    logs = workdir / "logs"
    logs.mkdir()
    files: dict[str, TextIO] = {}

    def sink(name: str, line: str) -> None:
        out = files.get(name)
        if out is None:
            # Kept open for the whole run, and closed with the others in the `finally` below.
            out = files[name] = open(logs / f"{name}.log", "a", encoding="utf-8")  # noqa: SIM115
        out.write(line + "\n")
        out.flush()

    passed = False
    stack = Stack(sink)
    run = DemoRun(stack, console, workdir)
    try:
        try:
            passed = run.run(timeout)
        except (LaunchError, ApiError) as error:
            from rich.markup import escape

            console.print(f"[red]Error:[/red] {escape(str(getattr(error, 'message', error)))}")
        except KeyboardInterrupt:
            console.print("interrupted: stopping the stack")
            stack.stop(force=True)
            raise
        finally:
            stack.stop()
    finally:
        for out in files.values():
            out.close()
        if passed and not keep:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            console.print(f"The store and the logs of this run are in {workdir}")
    if as_json:
        click.echo(json.dumps(run.document(passed), indent=2, ensure_ascii=False))
    if not passed:
        raise click.exceptions.Exit(1)
