"""`amc store`: check and inspect a store's data directory.

Both commands open the store read-only, so they may run beside a live server.
"""

from __future__ import annotations

from pathlib import Path

import click

from amc.cli import postgres_store
from amc.cli.options import data_option

_DATA = data_option("The data directory: a store, or a server's --data directory holding one in store/.")
# Which store: the LMDB one in --data (the default), or a PostgreSQL database by its URL.
_STORE = click.option(
    "--store",
    "store_url",
    default=None,
    envvar="AMC_STORE",
    show_envvar=True,
    metavar="postgresql://...",
    help="Check a PostgreSQL store instead of the LMDB store in --data.",
)


def _store_dir(data: Path) -> Path:
    """The store inside `data`: `data` itself, or `data/store` (where `amc serve` keeps it)."""
    from amc.adapters.lmdb.layout import DATA_FILE

    if not (data / DATA_FILE).exists() and (data / "store" / DATA_FILE).exists():
        return data / "store"
    return data


def _postgres(store_url: str | None, command: str = "verify") -> bool:
    """Run `command` on the PostgreSQL store `store_url` names, if it names one (the one place
    this module opens a store other than LMDB; amc/cli/postgres_store.py does the work)."""
    if store_url is None or store_url in ("auto", "lmdb"):
        return False
    if not postgres_store.is_postgres(store_url):
        raise click.BadParameter("expected a postgresql:// URL", param_hint="--store")
    getattr(postgres_store, command)(store_url)
    return True


@click.group()
def store() -> None:
    """Check and inspect an amc store; copy one into PostgreSQL."""


@store.command()
@_DATA
@_STORE
def verify(data: Path, store_url: str | None) -> None:
    """Replay the event log and compare it with the records, the indexes and the invariants.

    Prints OK, or each difference found; exits 1 when there are differences and 2 when the
    directory holds no readable store.
    """
    if _postgres(store_url):
        return
    from amc.adapters.lmdb import StoreError, check

    path = _store_dir(data)
    try:
        report = check(path)
    except StoreError as error:
        click.echo(f"amc store verify: {error}", err=True)
        raise SystemExit(2) from None
    summary = f"{report.events} events, {report.tasks} tasks, {report.hosts} hosts"
    if report.ok:
        click.echo(
            f"OK: {path}: {summary}; the replayed log equals the records, the indexes agree, the invariants hold"
        )
        return
    for difference in report.differences:
        click.echo(difference)
    click.echo(f"{path}: {len(report.differences)} differences ({summary})", err=True)
    raise SystemExit(1)


@store.command()
@_DATA
@_STORE
def info(data: Path, store_url: str | None) -> None:
    """Print the store's schema version, counts, size and clock."""
    if _postgres(store_url, "info"):
        return
    from amc.adapters.lmdb import StoreError, layout
    from amc.adapters.lmdb.store import Store
    from amc.core.times import to_rfc3339

    path = _store_dir(data)
    try:
        opened = Store.open(path, readonly=True)
    except StoreError as error:
        click.echo(f"amc store info: {error}", err=True)
        raise SystemExit(2) from None
    try:
        with opened.read() as txn:
            counts = {name.decode(): txn.stat(db)["entries"] for name, db in opened.dbs.items()}
            meta = {key: txn.get(key, db=opened.meta) for key in (layout.META_LAST_TIME, layout.META_MANUAL_NOW)}
        size = opened.size_bytes()
    finally:
        opened.close()
    click.echo(f"store:          {path}")
    click.echo(f"schema version: {layout.SCHEMA_VERSION}")
    click.echo(f"events:         {counts['log']}")
    click.echo(f"tasks:          {counts['tasks']} ({counts['queue']} queued, {counts['leases']} leased)")
    click.echo(f"hosts:          {counts['hosts']}")
    click.echo(f"size in use:    {size / 2**20:.1f} MiB")
    for label, key in (("latest time", layout.META_LAST_TIME), ("manual clock", layout.META_MANUAL_NOW)):
        if (value := meta[key]) is not None:
            click.echo(f"{label + ':':<16}{to_rfc3339(layout.read_u64(value))}")


# `amc store migrate` lives with the other PostgreSQL commands (it imports nothing at load).
store.add_command(postgres_store.migrate)
