"""`amc up`: the whole local stack in one command, until Ctrl-C.

The control plane on ./.amc (the default store of `amc serve`), one Host Agent with the
host token of the tokens file, and devices: the real ones when an adb server sees any,
simulated ones otherwise. See `amc.cli.launch` for how the parts start and stop.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import click

from amc.cli.options import adb_options, data_option


@click.command()
@data_option("Data directory of the server: the store and tokens.json.")
@click.option("--host", "listen", default="127.0.0.1", show_default=True, help="Address the server listens on.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8000,
    show_default=True,
    help="Port the server listens on (0: any free port).",
)
@click.option(
    "--devices",
    "mode",
    type=click.Choice(["auto", "real", "sim"]),
    default="auto",
    show_default=True,
    help="auto: the devices adb sees, or simulated ones when it sees none.",
)
@click.option(
    "--sim-devices",
    type=click.IntRange(1, 64),
    default=4,
    show_default=True,
    help="How many simulated devices to run when simulating.",
)
@adb_options("Address of the adb server that sees real devices.", "Port of that adb server.")
@click.option(
    "--keep-artifacts",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Also keep a copy of each step's evidence here (TASK_ID/ATTEMPT/); it is stored in the server either "
    "way (`amc task artifacts ID`).",
)
@click.option(
    "--lease-seconds",
    type=click.FloatRange(min=1),
    default=6.0,
    show_default=True,
    help="Lease length of the server. Short, so a running task hears of its cancellation within "
    "a third of it (amc serve's default is 30).",
)
@click.option(
    "--host-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=30.0,
    show_default=True,
    help="Seconds after its latest request that the Host Agent (and its devices) reads offline. Longer than "
    "the agent's 20 s claim long poll, shorter than amc serve's 60, so a stopped agent shows soon.",
)
@click.option(
    "--drain-timeout",
    type=click.FloatRange(min=0),
    default=60.0,
    show_default=True,
    help="At the first Ctrl-C, seconds the Host Agent lets running tasks go on to finish before it "
    "stops them at their next step boundary and releases them.",
)
@click.option("-v", "--verbose", is_flag=True, help="Show the server's and the agent's info logs.")
def up(
    data: Path,
    listen: str,
    port: int,
    mode: str,
    sim_devices: int,
    adb_host: str,
    adb_port: int,
    keep_artifacts: Path | None,
    lease_seconds: float,
    host_timeout: float,
    drain_timeout: float,
    verbose: bool,
) -> None:
    """Run a local amc: the server, a Host Agent and devices, until Ctrl-C.

    Uses the real devices an adb server sees, or simulated ones when it sees none. Prints
    the server's URL and the tokens file; `amc task ...` and `amc host list`, run from this
    directory, find both on their own.

    \b
    Stopping gives tasks back instead of failing them:
    - the first Ctrl-C drains the Host Agent: it claims nothing more, lets running
      tasks finish within --drain-timeout, then stops each at its next step
      boundary and releases it: the task is queued again in the store (unless
      that was its last attempt or it is being cancelled);
    - a second Ctrl-C interrupts the running steps and releases them now;
    - a third kills what is left.
    """
    from amc.cli.client import ApiClient, ApiError, read_tokens_file, token_for
    from amc.cli.launch import LaunchError, Stack

    def sink(name: str, line: str) -> None:
        click.echo(f"{name:>7} | {line}", err=True)

    serials: list[str] | None = None
    if mode != "sim":
        serials = attached_devices(adb_host, adb_port)
        if mode == "real" and not serials:
            raise click.ClickException(
                f"--devices real: the adb server at {adb_host}:{adb_port} "
                + ("sees no device" if serials == [] else "is not running")
            )
    simulate = not serials

    stop = threading.Event()
    running = threading.Event()
    previous: dict[signal.Signals, Callable[[int, FrameType | None], Any] | int | None] = {}

    def on_signal(signum: int, frame: FrameType | None) -> None:
        # While starting, or at a second Ctrl-C, stop waiting: the `finally` below still
        # stops whatever was started. Once running, the first one asks for a clean stop.
        if stop.is_set() or not running.is_set():
            raise KeyboardInterrupt
        stop.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        previous[signum] = signal.signal(signum, on_signal)
    stack = Stack(sink)
    try:
        try:
            url = stack.start_server(
                data,
                host=listen,
                port=port,
                lease_seconds=lease_seconds,
                host_timeout=host_timeout,
                log_level="info" if verbose else "warning",
            )
            tokens_path = data / "tokens.json"
            entries = read_tokens_file(tokens_path)
            host_entry = token_for(entries, "host")
            caller = token_for(entries, "admin", "client")
            if host_entry is None or caller is None:
                raise LaunchError(f"{tokens_path} needs a host token and an admin or client token")
            host_id = host_entry["host_id"]
            if simulate:
                simulator = stack.start_simulator(sim_devices)
                agent_adb = ("127.0.0.1", simulator.server_port)
                expected = sim_devices
            else:
                agent_adb = (adb_host, adb_port)
                expected = 1
            stack.start_agent(
                host_id,
                host_entry["token"],
                adb_host=agent_adb[0],
                adb_port=agent_adb[1],
                keep_artifacts=keep_artifacts,
                drain_timeout=drain_timeout,
                log_level="info" if verbose else "warning",
            )
            with ApiClient(url, caller["token"]) as client:
                registered = stack.wait_registered(client, host_id, expected)
        except (LaunchError, ApiError) as error:
            raise click.ClickException(getattr(error, "message", str(error))) from None

        devices = ", ".join(f"{d['serial']} ({d['attributes'].get('model', '?')})" for d in registered["devices"])
        if simulate and mode == "sim":
            kind = f"{sim_devices} simulated device(s)"
        elif simulate:
            why = "no adb server is running" if serials is None else "adb sees no device"
            kind = f"{sim_devices} simulated device(s) ({why} at {adb_host}:{adb_port})"
        else:
            kind = f"the devices adb sees at {adb_host}:{adb_port}"
        export = "" if url == "http://127.0.0.1:8000" else f"  export AMC_URL={url}\n"
        click.echo(f"""
amc is up.
  server      {url}   (store in {data}, leases of {lease_seconds:g} s)
  console     {url}/ui   (sign in with the admin or client token of the tokens file)
  tokens      {tokens_path}   (admin, client, host '{host_id}'; keep it private)
  host agent  {host_id}, serving {kind}:
              {devices}

In another terminal, from this directory:
{export}  amc host list
  echo '{{"steps": [{{"id": "open", "action": "launch", "args": {{"package": "com.android.settings"}}}}]}}' \\
      | amc task submit - --watch

Ctrl-C stops everything: running tasks may finish within {drain_timeout:g} s, then are released
(Ctrl-C again: interrupt and release them now).""")
        running.set()
        while not stop.wait(0.5):
            try:
                stack.check()
            except LaunchError as error:
                raise click.ClickException(str(error)) from None
            for name, agent in stack.agents.items():
                if not agent.alive:
                    raise click.ClickException(
                        f"the Host Agent {name} exited (status {agent.process.returncode}): {agent.last_words()}"
                    )
        click.echo(
            f"amc up: stopping: the Host Agent claims nothing more; running tasks may finish within "
            f"{drain_timeout:g} s, then stop at their next step boundary and are released "
            "(Ctrl-C again: interrupt and release them now)",
            err=True,
        )
    finally:
        try:
            stack.stop()
        except KeyboardInterrupt:
            click.echo(
                "amc up: stopping now: running steps are interrupted and their tasks released (Ctrl-C again: kill)",
                err=True,
            )
            try:
                stack.stop(force=True)
            except KeyboardInterrupt:
                click.echo("amc up: killing what is left; its leases run out on the server", err=True)
                stack.kill()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    click.echo("amc up: stopped", err=True)


def attached_devices(adb_host: str, adb_port: int) -> list[str] | None:
    """Serials of the devices a running adb server sees; None when no adb server answers.

    Never starts an adb server: `amc up` should not leave a daemon behind on a machine
    that has no phones.
    """
    from amc.adapters.adb.client import BoundedClient
    from amc.adapters.adb.discovery import list_serials
    from amc.adapters.adb.errors import AdbError

    try:
        return list_serials(BoundedClient(adb_host, adb_port, io_timeout=3.0), timeout=5.0)
    except AdbError:
        return None
