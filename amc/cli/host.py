"""`amc host run`: the Host Agent, serving this machine's Android devices to a control plane.

Imports of the agent, adb and httpx happen inside the command, so `amc --help` stays cheap.
"""

from __future__ import annotations

import logging
import signal
import sys
from pathlib import Path

import click

from amc.cli.hosts import list_hosts
from amc.cli.options import adb_options


@click.group()
def host() -> None:
    """Host Agents: run one on this machine, or list the hosts a control plane knows."""


host.add_command(list_hosts)


@host.command()
@click.option(
    "--server",
    required=True,
    envvar="AMC_URL",
    show_envvar=True,
    help="Base URL of the control plane, e.g. http://127.0.0.1:8000; several, comma-separated, for servers "
    "sharing one store: the agent uses the leader among them, and moves to the next URL when a server refuses "
    "the connection, stops answering or answers 503 not_leader (running tasks keep their leases).",
)
@click.option(
    "--token",
    required=True,
    envvar="AMC_HOST_TOKEN",
    show_envvar=True,
    help="The host's bearer token (role host). Prefer the environment variable: "
    "arguments are visible to other users of this machine.",
)
@click.option(
    "--host-id", required=True, envvar="AMC_HOST_ID", show_envvar=True, help="The host id the token is bound to."
)
@adb_options("Address of the adb server.", "Port of the adb server.")
@click.option(
    "--policy",
    "policy_file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    envvar="AMC_POLICY",
    show_envvar=True,
    help="Action policy file (JSON; see amc.adapters.adb.policy). Default: allow everything.",
)
@click.option(
    "--keep-artifacts",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    envvar="AMC_KEEP_ARTIFACTS",
    show_envvar=True,
    help="Also keep a copy of each step's evidence (screenshots, UI dumps, logs, long outputs) here, under "
    "TASK_ID/ATTEMPT/. Either way it is uploaded to the control plane; without this option the local "
    "files are removed once uploaded.",
)
@click.option(
    "--lease-seconds",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Lease length to ask for in claims (default: the server's).",
)
@click.option(
    "--claim-wait",
    type=click.FloatRange(0, 30),
    default=20.0,
    show_default=True,
    help="Seconds one claim long-polls the server.",
)
@click.option(
    "--scan-seconds",
    type=click.FloatRange(min=0.05),
    default=5.0,
    show_default=True,
    help="How often adb is asked which devices are attached.",
)
@click.option(
    "--drain-timeout",
    type=click.FloatRange(min=0),
    default=60.0,
    show_default=True,
    help="After the first SIGTERM or Ctrl-C, seconds running tasks may go on to finish before they "
    "stop at their next step boundary and are released to another host.",
)
@click.option(
    "--record-history",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    envvar="AMC_RECORD_HISTORY",
    show_envvar=True,
    help="Append every claim, start, renewal, result and release, with its times and answer, to this file "
    "(JSON lines) for `amc check-history`. Off by default.",
)
@click.option(
    "--input-cache",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    envvar="AMC_INPUT_CACHE",
    show_envvar=True,
    help="Where inputs (APKs, files to push) are cached, once per host "
    "(default: amc-inputs in the system's temporary directory).",
)
@click.option(
    "--input-cache-bytes",
    type=click.IntRange(min=1),
    default=4 * 1024**3,
    show_default=True,
    help="The input cache's bound: past it, the inputs used longest ago are evicted.",
)
@click.option(
    "--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info", show_default=True
)
def run(
    server: str,
    token: str,
    host_id: str,
    adb_host: str,
    adb_port: int,
    policy_file: Path | None,
    keep_artifacts: Path | None,
    lease_seconds: float | None,
    claim_wait: float,
    scan_seconds: float,
    drain_timeout: float,
    record_history: Path | None,
    input_cache: Path | None,
    input_cache_bytes: int,
    log_level: str,
) -> None:
    """Register the attached devices, claim and run tasks on them until SIGTERM or Ctrl-C.

    \b
    Stopping gives tasks back instead of failing them:
    - the first SIGTERM (or Ctrl-C) stops claiming; running tasks may finish
      within --drain-timeout; then each stops at its next step boundary and
      its attempt is released: the server requeues the task for another host
      (or ends it, if that was its last attempt or it is being cancelled);
    - a second one interrupts the running steps now and releases them;
    - a device that goes away mid-task has its attempt released too.
    It exits 0 once every attempt has reported or been released.
    """
    import asyncio

    from amc.adapters.adb.policy import ActionPolicy, PolicyError
    from amc.agent.config import AgentConfig
    from amc.agent.host import HostAgent
    from amc.agent.registry import RegistrationRefused

    logging.basicConfig(
        stream=sys.stderr, level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request otherwise
    policy = None
    if policy_file is not None:
        try:
            policy = ActionPolicy.load(policy_file)
        except (PolicyError, OSError, ValueError) as error:
            raise click.ClickException(f"--policy {policy_file}: {error}") from None
    config = AgentConfig(
        server=server,
        token=token,
        host_id=host_id,
        adb_host=adb_host,
        adb_port=adb_port,
        keep_artifacts=keep_artifacts,
        lease_seconds=lease_seconds,
        claim_wait_seconds=claim_wait,
        scan_seconds=scan_seconds,
        drain_seconds=drain_timeout,
        record_history=record_history,
        input_cache=input_cache,
        input_cache_bytes=input_cache_bytes,
    )
    agent = HostAgent(config, policy=policy)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        signals = {"count": 0}

        def on_signal() -> None:
            signals["count"] += 1
            agent.stop(force=signals["count"] > 1)

        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, on_signal)
        await agent.run()

    try:
        asyncio.run(main())
    except RegistrationRefused as error:
        raise click.ClickException(
            f"the server refused host {host_id!r}: {error} (check --token and --host-id)"
        ) from error
