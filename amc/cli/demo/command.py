"""`amc demo`: the local stack with a small workload, a live table, and a verdict.

What happens, in order (about ten seconds):

1. A server on a fresh temporary store, with 3-second leases so expiries show quickly,
   and its own tokens file (admin, client, hosts h1, h2 and h3); simulated phones: three
   for host h1, one (a Pixel 7, like one of h1's) for host h2, one (an SM-G991B, like one
   of h1's) for host h3.
2. Only h2's and h3's Host Agents start at first, and `checkout` (any Pixel 7) and
   `app-update` (any SM-G991B) are submitted: h2, and h3, are then the only hosts that can
   claim them.
3. h1's agent starts and the rest of the workload is submitted (`workload`);
   `nightly-report`, last in line, is cancelled while still queued.
4. While `checkout` runs a shell command on h2's phone, the h2 agent is SIGKILLed: its
   lease lapses, the server requeues the task, and h1 runs it on its own Pixel 7.
   While `app-update` runs a shell command on h3's phone, the h3 agent gets SIGTERM with a
   drain time shorter than the command: it claims no more, lets the command end, releases
   the attempt (no verdict on the task) and exits 0; the server requeues the task at once,
   and h1 runs it on its own SM-G991B.
5. While `long-sync` runs `sleep 8` on its phone, it is cancelled: the agent learns it at
   its next lease renewal, stops the command at once and reports `cancelled`.
6. While `photo-share` runs `sleep 2`, it is steered twice (skip `upload`, insert `crop`
   after `capture`): its agent applies both at the next step boundary.
7. While `inventory-scan` runs `sleep 2`, it is paused and sent a follow-up. The demo
   keeps it paused until it has seen the lease renewed twice while the task reads
   `paused`, then resumes it; when it ends done, the server collects the follow-up into a
   successor task (`scan-send`), which a host then runs.
8. When every task has ended, the verdict (`workload.check`) compares each task resource,
   history and messages with what the protocol says, and the summary shows the tasks by
   status, the messages and what became of them, and each cancellation's request-to-stop
   latency (to the delivery, to the last device command of the attempt from the
   simulator's log, and to the recorded result).

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

    A server, two Host Agents and four simulated phones on a throwaway store. Several app
    flows, one cancellation of a queued task, one of a running task, one host killed
    mid-task, one task steered while it runs, and one paused, sent a follow-up and resumed.
    Exits 0 only when every task ended as the protocol says it must.
    """
    from amc.cli.app import make_console
    from amc.cli.client import ApiError
    from amc.cli.demo.run import DemoRun
    from amc.cli.stack import Stack, StackError

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
        except (StackError, ApiError) as error:
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
