"""`amc serve`: the HTTP control plane over the durable store.

This module is the one bootstrap place that wires real adapters: it opens the store,
loads (or on the first start writes) the tokens, builds the app and runs uvicorn. Imports
of the store and the server happen inside the command, so `amc --help` opens nothing.
"""

from __future__ import annotations

import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import click

from amc.cli.options import data_option

if TYPE_CHECKING:
    from amc.adapters.http.auth import TokenFile
    from amc.service import BlobStore, InputCatalogue, Service

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_postgres_url(store: str) -> bool:
    return store.startswith(POSTGRES_SCHEMES)


def _say_role(epoch: int | None) -> None:
    """Tell the operator of every change of role after the start (LEADER/s1): a server that
    takes over says so, and one that lost the lead says it stands by."""
    if epoch is None:
        click.echo("amc serve: standing by (lost the lead; another server leads or will)")
    else:
        click.echo(f"amc serve: now leading (epoch {epoch})")
    sys.stdout.flush()


def _open_store(
    data: Path,
    clock: Literal["system", "manual"],
    on_commit: Callable[[int, float], None],
    store: str,
    map_size: int,
    max_map_size: int,
    on_role: Callable[[int | None], None] | None = None,
) -> tuple[Service, bool]:
    """The service and whether it is durable: `PostgresService` for a postgresql:// URL, the
    durable `LmdbService` when `amc.adapters.lmdb` provides it, else an in-memory service."""
    if is_postgres_url(store):
        from amc.adapters.postgres import PostgresService
        from amc.adapters.postgres import StoreError as PostgresError

        try:
            return PostgresService.open(store, clock=clock, on_commit=on_commit, on_role=on_role), True
        except PostgresError as error:
            raise click.ClickException(str(error)) from None
    try:
        from amc.adapters.lmdb import LmdbService
    except ImportError:
        if store == "lmdb":
            raise click.ClickException(
                "--store lmdb: this amc has no LMDB store (amc.adapters.lmdb.LmdbService)"
            ) from None
    else:
        if store != "memory":
            from amc.adapters.lmdb import StoreError

            try:
                service = LmdbService.open(
                    data, clock=clock, on_commit=on_commit, map_size=map_size, max_map_size=max_map_size
                )
                return service, True
            except StoreError as error:
                raise click.ClickException(str(error)) from None
    from amc.service import ManualClock, MemoryService, SystemClock

    start = time.time_ns() // 1_000_000
    return MemoryService(ManualClock(start) if clock == "manual" else SystemClock()), False


def _open_blobs(data: Path, durable: bool, store: str) -> BlobStore:
    """Where artifacts' bytes go: the database beside a PostgreSQL store (every server reads
    them); files in the data directory beside an LMDB store (opened after it: the store
    decides whether the directory is one); else memory."""
    if is_postgres_url(store):
        from amc.adapters.postgres.blobs import PostgresBlobStore

        return PostgresBlobStore(store)
    if durable:
        from amc.adapters.lmdb.blobs import FileBlobStore

        return FileBlobStore.in_data_dir(data)
    from amc.service import MemoryBlobStore

    return MemoryBlobStore()


def _open_inputs(data: Path, durable: bool, store: str) -> InputCatalogue:
    """Where the records of inputs go (Part F): beside the blobs, as `_open_blobs` chooses."""
    if is_postgres_url(store):
        from amc.adapters.postgres.inputs import PostgresInputCatalogue

        return PostgresInputCatalogue(store)
    if durable:
        from amc.adapters.lmdb.inputs import FileInputCatalogue

        return FileInputCatalogue.in_data_dir(data)
    from amc.service import MemoryInputCatalogue

    return MemoryInputCatalogue()


class StoreChoice(click.ParamType[str, str]):
    """`auto`, `lmdb`, `memory`, or the URL of a PostgreSQL database."""

    name = "auto|lmdb|memory|postgresql://..."

    def convert(self, value: str, param: click.Parameter | None, ctx: click.Context | None) -> str:
        if value in ("auto", "lmdb", "memory") or is_postgres_url(value):
            return value
        self.fail(f"{value!r}: expected auto, lmdb, memory or a postgresql:// URL", param, ctx)


def _tokens(data: Path, tokens_file: Path | None) -> tuple[TokenFile, Path]:
    """The watched tokens file, and its path; writes a first tokens file if there is none."""
    from amc.adapters.http import tokens_file as tokens_files
    from amc.adapters.http.auth import TokenFile, TokenFileError
    from amc.cli.client import TOKENS_FILE

    path = tokens_file or data / TOKENS_FILE
    try:
        if tokens_file is None and not path.exists():
            tokens_files.write_initial(path)
            click.echo(
                f"amc serve: wrote a tokens file (one admin, one client of tenant 'default', one host 'h1') to {path}"
            )
        tokens = TokenFile(path)
    except TokenFileError as error:
        raise click.ClickException(str(error)) from None
    if stat.S_IMODE(path.stat().st_mode) & 0o077:
        click.echo(f"amc serve: warning: {path} can be read by other users; `chmod 600 {path}`", err=True)
    return tokens, path


@click.command()
@data_option("Data directory: the store and, without --tokens, tokens.json.")
@click.option(
    "--host", default="127.0.0.1", show_default=True, envvar="AMC_HOST", show_envvar=True, help="Address to listen on."
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8000,
    show_default=True,
    envvar="AMC_PORT",
    show_envvar=True,
    help="Port to listen on (0: any free port; the port is printed).",
)
@click.option(
    "--tokens",
    "tokens_file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    envvar="AMC_TOKENS",
    show_envvar=True,
    help="Tokens file (JSON list, see specs/protocol.md). Default: DATA/tokens.json, written on the first "
    "start. Re-read when it changes (`amc tokens add|revoke`), no restart needed.",
)
@click.option(
    "--lease-seconds",
    type=click.FloatRange(min=0, min_open=True),
    default=30.0,
    show_default=True,
    help="Lease length of a claim that asks for none.",
)
@click.option(
    "--min-lease-seconds",
    type=click.FloatRange(min=0, min_open=True),
    default=1.0,
    show_default=True,
    help="Shortest lease a claim may ask for.",
)
@click.option(
    "--max-lease-seconds",
    type=click.FloatRange(min=0, min_open=True),
    default=600.0,
    show_default=True,
    help="Longest lease a claim may ask for.",
)
@click.option(
    "--max-artifact-bytes",
    type=click.IntRange(min=0),
    default=16 * 1024 * 1024,
    show_default=True,
    help="Largest artifact an upload may store (bytes); larger is refused with 413.",
)
@click.option(
    "--max-task-artifact-bytes",
    type=click.IntRange(min=0),
    default=256 * 1024 * 1024,
    show_default=True,
    help="Most bytes a task's artifacts may hold together; an upload past it is refused with 413.",
)
@click.option(
    "--max-input-bytes",
    type=click.IntRange(min=0),
    default=512 * 1024 * 1024,
    show_default=True,
    help="Largest input (an app, a file to push) an upload may store (bytes); larger is refused with 413.",
)
@click.option(
    "--max-tenant-input-bytes",
    type=click.IntRange(min=0),
    default=4096 * 1024 * 1024,
    show_default=True,
    help="Most bytes a tenant's inputs may hold together; an upload past it is refused with 413.",
)
@click.option(
    "--host-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=60.0,
    show_default=True,
    help="Seconds after its latest request that a host (and its devices) reads offline. Keep it longer "
    "than the agents' claim long poll (amc host run --claim-wait).",
)
@click.option(
    "--header-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=10.0,
    show_default=True,
    help="Seconds a request's head (request line and headers) may take to arrive, from its first byte, "
    "or from the opening of a new connection; then the connection is closed, unanswered.",
)
@click.option(
    "--body-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=60.0,
    show_default=True,
    help="Seconds a request's whole body may take to arrive after its head (artifact uploads included); "
    "then the connection is closed and the request has done nothing.",
)
@click.option(
    "--keep-alive-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=30.0,
    show_default=True,
    help="Seconds a connection may stay idle between two requests before the server closes it.",
)
@click.option(
    "--max-connections",
    type=click.IntRange(min=1),
    default=2048,
    show_default=True,
    help="Open connections at most. At the cap a new connection closes the longest idle one (no request "
    "in progress), or is closed at once if every connection has one. The limit on open files is raised "
    "to fit, as far as the system allows.",
)
@click.option(
    "--max-waiting-claims",
    type=click.IntRange(min=0),
    default=1024,
    show_default=True,
    help="Long-polling claims that may wait at once, in all; one beyond it is answered at once (204 when "
    "there is no work), as if it had asked for no wait.",
)
@click.option(
    "--max-waiting-claims-per-host",
    type=click.IntRange(min=0),
    default=256,
    show_default=True,
    help="Long-polling claims one host may have waiting at once (a Host Agent waits one per device).",
)
@click.option(
    "--clock",
    type=click.Choice(["system", "manual"]),
    default="system",
    show_default=True,
    help="manual: time moves only through POST /v1/admin/clock (tests, conformance runs).",
)
@click.option(
    "--store",
    type=StoreChoice(),
    default="auto",
    show_default=True,
    envvar="AMC_STORE",
    show_envvar=True,
    help="auto: the LMDB store in DATA; memory: nothing is durable (benchmarks, demos); postgresql://...: "
    "the database several servers share, one leading, the others standing by (DATA keeps the tokens).",
)
@click.option(
    "--map-size",
    type=click.IntRange(min=1 << 16),
    default=64 << 20,
    show_default=True,
    help="Initial size of the LMDB map (bytes). A full map doubles on its own, without failing a write.",
)
@click.option(
    "--max-map-size",
    type=click.IntRange(min=1 << 16),
    default=1 << 40,
    show_default=True,
    help="Largest the LMDB map may grow to (bytes). A write past it, like a write on a full disk, is "
    "refused with 503 storage_unavailable and Retry-After; reads go on.",
)
@click.option(
    "--access-log/--no-access-log",
    default=False,
    show_default=True,
    help="Log every request line (never headers; a known token in a path or query shows as [token]).",
)
@click.option(
    "--log-level",
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
    default="info",
    show_default=True,
)
def serve(
    data: Path,
    host: str,
    port: int,
    tokens_file: Path | None,
    lease_seconds: float,
    min_lease_seconds: float,
    max_lease_seconds: float,
    max_artifact_bytes: int,
    max_task_artifact_bytes: int,
    max_input_bytes: int,
    max_tenant_input_bytes: int,
    host_timeout: float,
    header_timeout: float,
    body_timeout: float,
    keep_alive_timeout: float,
    max_connections: int,
    max_waiting_claims: int,
    max_waiting_claims_per_host: int,
    clock: Literal["system", "manual"],
    store: str,
    map_size: int,
    max_map_size: int,
    access_log: bool,
    log_level: str,
) -> None:
    """Serve the HTTP control plane (specs/protocol.md) until SIGTERM or Ctrl-C."""
    from amc.adapters.http.app import create_app
    from amc.adapters.http.connections import ConnectionLimits
    from amc.adapters.http.metrics import Metrics
    from amc.adapters.http.server import AmcServer, config, fit_open_files, listen_socket
    from amc.adapters.http.settings import Settings
    from amc.cli.client import remove_server_file, write_server_file

    try:
        settings = Settings(
            lease_seconds=lease_seconds,
            min_lease_seconds=min_lease_seconds,
            max_lease_seconds=max_lease_seconds,
            manual_clock=clock == "manual",
            max_artifact_bytes=max_artifact_bytes,
            max_task_artifact_bytes=max_task_artifact_bytes,
            max_input_bytes=max_input_bytes,
            max_tenant_input_bytes=max_tenant_input_bytes,
            host_timeout_seconds=host_timeout,
            max_waiting_claims=max_waiting_claims,
            max_waiting_claims_per_host=max_waiting_claims_per_host,
        )
    except ValueError as error:
        raise click.BadParameter(str(error)) from None
    fitting = fit_open_files(max_connections)
    if fitting < max_connections:
        click.echo(
            f"amc serve: warning: the limit on open files leaves room for {fitting} connections; "
            f"--max-connections {max_connections} lowered to {fitting}",
            err=True,
        )
    limits = ConnectionLimits(
        header_timeout=header_timeout,
        body_timeout=body_timeout,
        keep_alive_timeout=keep_alive_timeout,
        max_connections=fitting,
    )
    if tokens_file is not None:
        tokens, tokens_path = _tokens(data, tokens_file)  # a bad file fails before anything opens

    # Bind before opening the store: a port in use fails fast and leaves the store alone.
    try:
        listener = listen_socket(host, port)
    except OSError as error:
        raise click.ClickException(f"cannot listen on {host}:{port}: {error.strerror}") from None
    port = listener.getsockname()[1]

    metrics = Metrics()
    # The store first: it creates the data directory, and it only starts a new store in an
    # empty directory, so the first tokens file is written into it afterwards.
    service, durable = _open_store(data, clock, metrics.on_commit, store, map_size, max_map_size, _say_role)
    if tokens_file is None:
        try:
            tokens, tokens_path = _tokens(data, None)
        except click.ClickException:
            service.close()
            raise
    if not durable:
        click.echo("amc serve: serving from memory; nothing is durable", err=True)
    blobs = _open_blobs(data, durable, store)
    inputs = _open_inputs(data, durable, store)
    app = create_app(service, settings, tokens=tokens, metrics=metrics, close_service=True, blobs=blobs, inputs=inputs)
    shown = f"[{host}]" if ":" in host else host
    # Beside the tokens file, so the CLI that reads those tokens calls this server (any --port);
    # written before the "listening" line, so whoever waits for that line finds it.
    record = write_server_file(tokens_path.parent, f"http://{shown}:{port}")
    try:
        # A leader said "now leading (epoch N)" as it was elected, before this line.
        role = "; standing by (another server leads)" if is_postgres_url(store) and not service.leading else ""
        click.echo(f"amc serve: tokens from {tokens_path}; {clock} clock{role}; listening on http://{shown}:{port}")
        sys.stdout.flush()
        settings_of_uvicorn = config(app, host, port, access_log=access_log, log_level=log_level, limits=limits)
        server = AmcServer(settings_of_uvicorn, app)
        server.run(sockets=[listener])
    finally:
        if record is not None:
            remove_server_file(record)
