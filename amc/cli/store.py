"""`amc store`: check and inspect a store's data directory.

Both commands open the store read-only, so they may run beside a live server.
"""

from __future__ import annotations

from pathlib import Path

import click

from amc.cli.options import data_option

_DATA = data_option("The data directory: a store, or a server's --data directory holding one in store/.")


def _store_dir(data: Path) -> Path:
    """The store inside `data`: `data` itself, or `data/store` (where `amc serve` keeps it)."""
    from amc.adapters.lmdb.layout import DATA_FILE

    if not (data / DATA_FILE).exists() and (data / "store" / DATA_FILE).exists():
        return data / "store"
    return data


@click.group()
def store() -> None:
    """Check and inspect an amc store."""


@store.command()
@_DATA
def verify(data: Path) -> None:
    """Replay the event log and compare it with the records, the indexes and the invariants.

    Prints OK, or each difference found; exits 1 when there are differences and 2 when the
    directory holds no readable store.
    """
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
def info(data: Path) -> None:
    """Print the store's schema version, counts, size and clock."""
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
