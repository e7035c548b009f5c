"""`amc store`: check, inspect and tidy a store's data directory.

`verify` and `info` open the store read-only, so they may run beside a live server; so may
`gc` of unreferenced artifact files. Dropping the artifacts of old tasks (`gc --older-than`)
changes records, and needs the server stopped. `verify` and `gc` reach the records and the
artifact bytes only through `amc.cli.datadir.open_data` (`verify`'s log replay and `info`
are LMDB's own).
"""

from __future__ import annotations

import re
from pathlib import Path

import click

from amc.cli import postgres_store
from amc.cli.datadir import store_dir as _store_dir
from amc.cli.options import data_option

_DATA = data_option("The data directory: a store, or a server's --data directory holding one in store/.")
EXIT_NO_STORE = 2
EXIT_BUSY = 3
GRACE_S = 600.0  # beside a running server, gc keeps files this young: their upload may be about to commit
_DURATION = re.compile(r"(\d+)\s*([smhdw])")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
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


def parse_duration(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    """``30d``, ``12h``, ``90m``, ``45s``, ``2w`` as seconds."""
    if value is None:
        return None
    found = _DURATION.fullmatch(value.strip())
    if not found:
        raise click.BadParameter(f"{value!r} is not a duration such as 30d, 12h, 90m, 45s or 2w")
    return int(found.group(1)) * _UNIT_S[found.group(2)]


def _size(size: int) -> str:
    from amc.cli.views import size_text

    return f"{size} bytes" if size < 1024 else f"{size_text(size)} ({size} bytes)"


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
    """Replay the event log and compare it with the records, the indexes and the invariants;
    and check that every artifact a record names has its file, with its sha256.

    Prints OK, or each difference found; exits 1 when there are differences and 2 when the
    directory holds no readable store.
    """
    if _postgres(store_url):
        return
    from amc.adapters.lmdb import StoreError, check
    from amc.cli.datadir import NoStore, open_data, referenced, verify_blobs

    path = _store_dir(data)
    try:
        report = check(path)
        opened = open_data(data, writable=False)
    except (StoreError, NoStore) as error:
        click.echo(f"amc store verify: {error}", err=True)
        raise SystemExit(EXIT_NO_STORE) from None
    try:
        tasks = opened.tasks()
        problems = verify_blobs(opened, tasks)
    finally:
        opened.close()
    named = {a.sha256: f"{task.id}/{a.id} ({a.name})" for task in tasks for a in task.artifacts}
    named.update({i.sha256: f"input {i.tenant}/{i.sha256}" for i in opened.inputs().listing(None)})
    artifacts = sum(len(task.artifacts) for task in tasks)
    summary = (
        f"{report.events} events, {report.tasks} tasks, {report.hosts} hosts, "
        f"{artifacts} artifacts in {len(referenced(tasks))} files"
    )
    if report.ok and not problems:
        click.echo(
            f"OK: {path}: {summary}; the replayed log equals the records, the indexes agree, the invariants hold, "
            "every artifact file is there with its sha256"
        )
        return
    for difference in report.differences:
        click.echo(difference)
    for problem in problems:
        click.echo(f"artifact {named.get(problem.sha256, problem.sha256)}: {problem.kind}: {problem.detail}")
    click.echo(f"{path}: {len(report.differences) + len(problems)} differences ({summary})", err=True)
    raise SystemExit(1)


@store.command()
@_DATA
@click.option(
    "--older-than",
    metavar="DURATION",
    callback=parse_duration,
    help="Also drop the artifacts of tasks that ended more than DURATION ago (30d, 12h, 90m, 45s, 2w): "
    "their records go (reading one is then 404; the task's history shows artifacts_purged) and their "
    "files with them; and the inputs created more than DURATION ago that no unfinished task names. "
    "Needs the server stopped.",
)
@click.option("--dry-run", is_flag=True, help="Change nothing: say how many files and bytes would be freed.")
@_STORE
def gc(data: Path, older_than: float | None, dry_run: bool, store_url: str | None) -> None:
    """Remove artifact files that no record refers to, and with --older-than the artifacts
    of tasks that ended long ago.

    An upload cut short by a crash (after its file was written, before it was recorded)
    leaves a file no record names, or an unfinished temporary: gc removes them. Beside a
    running server it keeps files younger than 10 minutes, which may belong to an upload
    about to be recorded; with the server stopped it removes them all. Exits 2 when the
    directory holds no store, 3 when --older-than is given while a server holds it.
    """
    if store_url is not None and postgres_store.is_postgres(store_url):
        if older_than is not None:
            raise click.UsageError(
                "--older-than works on an LMDB data directory only; on PostgreSQL, gc removes unreferenced bytes"
            )
        postgres_store.gc(store_url, dry_run=dry_run, grace_s=GRACE_S)
        return
    from amc.cli.datadir import Busy, NoStore, ended_before, open_data, referenced, unused_inputs

    try:
        try:
            opened = open_data(data, writable=not dry_run)
        except Busy as error:
            if older_than is not None:
                click.echo(
                    f"amc store gc: {error}\n--older-than changes records: stop the server first (or leave "
                    "--older-than out: unreferenced files can be removed while it runs).",
                    err=True,
                )
                raise SystemExit(EXIT_BUSY) from None
            opened = open_data(data, writable=False)
    except NoStore as error:
        click.echo(f"amc store gc: {error}", err=True)
        raise SystemExit(EXIT_NO_STORE) from None
    try:
        # Holding the writer lock, no upload can be in flight: nothing is too young to go.
        grace = GRACE_S if opened.busy else 0.0
        tasks = opened.tasks()
        cutoff = None if older_than is None else opened.now_ms() - int(older_than * 1000)
        old = [] if cutoff is None else list(ended_before(tasks, cutoff))
        catalogue = opened.inputs()
        unused = [] if cutoff is None else unused_inputs(catalogue, tasks, cutoff)
        if dry_run:
            purged = {task.id for task in old}
            gone = {(i.tenant, i.sha256) for i in unused}
            kept_inputs = {i.sha256 for i in catalogue.listing(None) if (i.tenant, i.sha256) not in gone}
            keep = referenced([task for task in tasks if task.id not in purged], kept_inputs)
        else:
            for task in old:  # each purge is durable before any file goes
                opened.purge(task.id)
            for unused_input in unused:  # likewise each input's record
                catalogue.remove(unused_input.tenant, unused_input.sha256)
            keep = referenced(opened.tasks(), catalogue.digests())
        blobs = opened.blobs()
        report = None if blobs is None else blobs.gc(keep, dry_run=dry_run, grace_s=grace)
    finally:
        opened.close()
    files = 0 if report is None else report.blobs + report.temporaries
    freed = 0 if report is None else report.bytes_freed
    parts = [] if report is None else [f"{report.blobs} unreferenced", f"{report.temporaries} unfinished uploads"]
    verb = "Would free" if dry_run else "Freed"
    line = f"{verb} {files} files, {_size(freed)}" + (f" ({', '.join(parts)})" if parts else "")
    if older_than is not None:
        count = sum(len(task.artifacts) for task in old)
        line += f"; {'would purge' if dry_run else 'purged'} {count} artifacts of {len(old)} ended tasks"
        line += f" and {len(unused)} inputs no unfinished task names"
    click.echo(line + ".")
    if grace:
        click.echo(f"A server holds {opened.path}: files younger than {GRACE_S / 60:g} minutes were kept.", err=True)


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
