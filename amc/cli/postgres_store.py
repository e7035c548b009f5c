"""`amc store` on a PostgreSQL store: `migrate` from an LMDB data directory, and the
PostgreSQL side of `verify` and `info` (amc/cli/store.py hands a postgresql:// --store here)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from amc.adapters.lmdb.blobs import FileBlobReader
    from amc.service import StoredInput


def is_postgres(store: str | None) -> bool:
    return store is not None and store.startswith(("postgresql://", "postgres://"))


def verify(url: str) -> None:
    from amc.adapters.postgres import StoreError
    from amc.adapters.postgres.blobs import PostgresBlobStore
    from amc.adapters.postgres.store import redact
    from amc.adapters.postgres.verify import check

    try:
        report = check(url)
    except StoreError as error:
        click.echo(f"amc store verify: {error}", err=True)
        raise SystemExit(2) from None
    blobs = PostgresBlobStore(url)
    try:
        referenced = _referenced_blobs(url)
        problems = blobs.verify(sorted(referenced))
    finally:
        blobs.close()
    report.differences.extend(f"artifact blob {p.sha256}: {p.kind} ({p.detail})" for p in problems)
    where = redact(url)
    summary = f"{report.events} events, {report.tasks} tasks, {report.hosts} hosts, {len(referenced)} artifact blobs"
    if report.ok:
        click.echo(
            f"OK: {where}: {summary}; the replayed log equals the records, the columns and history links agree, "
            "the invariants hold, every artifact's bytes are there and hash right"
        )
        return
    for difference in report.differences:
        click.echo(difference)
    click.echo(f"{where}: {len(report.differences)} differences ({summary})", err=True)
    raise SystemExit(1)


def gc(url: str, *, dry_run: bool, grace_s: float) -> None:
    """Remove the artifact bytes no task names and no input record holds. Servers may run meanwhile: bytes younger than
    `grace_s` stay, since their upload may be about to commit."""
    from amc.adapters.postgres.blobs import PostgresBlobStore
    from amc.adapters.postgres.store import redact

    blobs = PostgresBlobStore(url)
    try:
        report = blobs.gc(_referenced_blobs(url), dry_run=dry_run, grace_s=grace_s)
    finally:
        blobs.close()
    verb = "Would free" if dry_run else "Freed"
    click.echo(f"{verb} {report.blobs} unreferenced artifact blobs, {report.bytes_freed} bytes, in {redact(url)}.")
    click.echo(f"Bytes younger than {grace_s / 60:g} minutes were kept: their upload may be about to commit.", err=True)


def _referenced_blobs(url: str) -> set[str]:
    from amc.adapters import codec
    from amc.adapters.postgres.store import connect

    with connect(url) as conn:
        artifacts = {
            artifact.sha256
            for (body,) in conn.execute("SELECT body FROM amc_tasks")
            for artifact in codec.decode_task(body).artifacts
        }
        # Inputs' bytes are blobs too (specs/protocol.md Part F): gc keeps what a record names.
        inputs = {sha256 for (sha256,) in conn.execute("SELECT DISTINCT sha256 FROM amc_inputs")}
    return artifacts | inputs


def info(url: str) -> None:
    from amc.adapters.postgres import StoreError
    from amc.adapters.postgres.schema import open_schema
    from amc.adapters.postgres.store import connect, redact, summary
    from amc.core.times import to_rfc3339

    try:
        with connect(url) as conn:
            open_schema(conn, readonly=True)
            found = summary(conn)
    except StoreError as error:
        click.echo(f"amc store info: {error}", err=True)
        raise SystemExit(2) from None
    meta = found["meta"]
    click.echo(f"store:          {redact(url)}")
    click.echo(f"schema version: {meta.get('schema')} (records {meta.get('record_schema')})")
    click.echo(f"events:         {found['events']}")
    click.echo(f"tasks:          {found['tasks']} ({found['queued']} queued, {found['leased']} leased)")
    click.echo(f"hosts:          {found['hosts']}")
    click.echo(f"artifacts:      {found['blobs']} blobs, {found['blob_bytes'] / 2**20:.1f} MiB")
    click.echo(f"database size:  {found['database_bytes'] / 2**20:.1f} MiB")
    click.echo(f"leadership:     epoch {found['epoch']}, last taken by {found['leader'] or 'nobody yet'}")
    for label, key in (("latest time", "last_time"), ("manual clock", "manual_now")):
        if key in meta:
            click.echo(f"{label + ':':<16}{to_rfc3339(int(meta[key]))}")


class _LmdbSource:
    """An LMDB data directory, read in one read transaction, as `migrate.Source`."""

    def __init__(self, data: Path):
        from amc.adapters.lmdb.blobs import FileBlobStore
        from amc.adapters.lmdb.store import Store

        self.data = data
        self.store = Store.open(data, readonly=True)
        self.blobs_store = FileBlobStore.in_data_dir(data)
        self._txn_context = self.store.read()
        self.txn = self._txn_context.__enter__()

    def events(self) -> Iterable[tuple[int, bytes]]:
        from amc.adapters.lmdb import layout

        for key, raw in self.txn.cursor(db=self.store.log):
            yield layout.read_u64(key), bytes(raw)

    def tasks(self) -> Iterable[bytes]:
        for _, raw in self.txn.cursor(db=self.store.tasks):
            yield bytes(raw)

    def hosts(self) -> Iterable[bytes]:
        for _, raw in self.txn.cursor(db=self.store.hosts):
            yield bytes(raw)

    def meta(self) -> dict[str, int]:
        from amc.adapters.lmdb import layout

        found = {}
        for name, key in (("last_time", layout.META_LAST_TIME), ("manual_now", layout.META_MANUAL_NOW)):
            raw = self.txn.get(key, db=self.store.meta)
            if raw is not None:
                found[name] = layout.read_u64(raw)
        return found

    def blobs(self) -> Iterable[str]:
        return sorted(self.blobs_store.digests())

    def open_blob(self, sha256: str) -> FileBlobReader:
        return self.blobs_store.open(sha256)

    def inputs(self) -> list[StoredInput]:
        from amc.adapters.lmdb.inputs import FileInputCatalogue

        return FileInputCatalogue.in_data_dir(self.data).listing(None)

    def close(self) -> None:
        self._txn_context.__exit__(None, None, None)
        self.store.close()


@click.command()
@click.option(
    "--from",
    "source",
    required=True,
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="The data directory of the LMDB store to copy (stop its server first).",
)
@click.option("--to", "target", required=True, help="The URL of an empty PostgreSQL database (postgresql://...).")
def migrate(source: Path, target: str) -> None:
    """Copy an LMDB store (events, records, clock, artifacts) into an empty PostgreSQL database.

    The copy is one transaction; the values are copied byte for byte. Run `amc store verify
    --store URL` afterwards; exits 2 when either side cannot be opened.
    """
    from amc.adapters.lmdb import StoreError as LmdbError
    from amc.adapters.postgres import StoreError
    from amc.adapters.postgres.migrate import copy_in
    from amc.adapters.postgres.store import redact

    if not is_postgres(target):
        raise click.BadParameter("expected a postgresql:// URL", param_hint="--to")
    try:
        opened = _LmdbSource(source)
    except LmdbError as error:
        click.echo(f"amc store migrate: {error}", err=True)
        raise SystemExit(2) from None
    try:
        copied = copy_in(target, opened, progress=lambda line: click.echo(f"  copied {line}"))
    except StoreError as error:
        click.echo(f"amc store migrate: {error}", err=True)
        raise SystemExit(2) from None
    finally:
        opened.close()
    click.echo(
        f"migrated {source} into {redact(target)}: {copied.events} events, {copied.tasks} tasks, "
        f"{copied.hosts} hosts, {copied.blobs} blobs ({copied.blob_bytes} bytes), {copied.inputs} inputs"
    )
