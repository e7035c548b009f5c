"""`amc sim`: run simulated Android devices in the foreground until SIGINT/SIGTERM."""

from __future__ import annotations

import signal
import sys
import threading

import click


@click.command()
@click.option(
    "--devices",
    "count",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="How many simulated devices to serve.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="The adb server (smart-socket) port for ppadb; 0 picks a free one.",
)
@click.option(
    "--device-base-port",
    type=click.IntRange(1, 65535),
    default=None,
    help="Device i's adbd port is this plus i (for `adb connect`); default: free ports.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="The address to bind.")
def sim(count: int, port: int, device_base_port: int | None, host: str) -> None:
    """Serve simulated devices to ppadb (the server port) and to a real adb server
    (`adb connect HOST:ADBD_PORT`). Each device's command log is readable with the
    `host:amc-sim-log:<serial>` service on the server port."""
    from amc.sim import Simulator  # keeps `amc --help` free of sockets

    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    try:
        simulator = Simulator(count, host=host, server_port=port, device_base_port=device_base_port)
        simulator.start()
    except (OSError, ValueError) as error:
        raise click.ClickException(str(error)) from error
    try:
        click.echo(f"server {host}:{simulator.server_port}")
        for serial, device_port in simulator.device_ports.items():
            spec = simulator.device(serial).spec
            click.echo(f"device {serial} adbd {host}:{device_port} model={spec.model!r}")
        click.echo("ready", nl=True)
        # Lines above are the contract for scripts; flush so a pipe reader sees them now.
        sys.stdout.flush()  # (click.get_text_stream is deprecated; click.echo writes to sys.stdout)
        while not stop.wait(0.5):
            pass
    finally:
        simulator.stop()
        click.echo("stopped")
