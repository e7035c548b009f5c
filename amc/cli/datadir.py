"""A data directory as `amc store verify` and `amc store gc` see it: its task records, its
artifact bytes, and (holding the writer lock) the one change they make, a purge.

`open_data` is the one place that knows which store a directory holds and where its
artifact bytes live (for LMDB: files under `artifacts/` beside the environment). Another
store (PostgreSQL, its artifacts in the database) adds its branch there and returns an
object with the same members; the commands stay as they are.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from amc.core.records import Task
from amc.service import BlobProblem, BlobStore, InputCatalogue, StoredInput, TaskQuery


class Busy(Exception):
    """A server holds the data directory for writing; the message says which and what to do."""


class NoStore(Exception):
    """The directory holds no readable store; the message says why."""


class DataDir(Protocol):
    path: Path
    writable: bool  # holding the writer lock: no server runs on it, no upload is in flight
    busy: bool  # a server holds the writer lock (so uploads may be in flight); False when writable

    def tasks(self) -> list[Task]:
        """Every task record, as stored now."""

    def blobs(self) -> BlobStore | None:
        """The artifact bytes; None when no artifact was ever stored here."""

    def purge(self, task_id: str) -> None:
        """Drop the artifacts of an ended task (a durable `PurgeArtifacts`); needs `writable`."""

    def inputs(self) -> InputCatalogue:
        """The records of inputs (Part F): their bytes are blobs that gc must keep."""

    def now_ms(self) -> int:
        """The store's clock: what "ended 30 days ago" is measured against."""

    def close(self) -> None: ...


def store_dir(data: Path) -> Path:
    """The store inside `data`: `data` itself, or `data/store`."""
    from amc.adapters.lmdb.layout import DATA_FILE

    if not (data / DATA_FILE).exists() and (data / "store" / DATA_FILE).exists():
        return data / "store"
    return data


def open_data(data: Path, *, writable: bool) -> DataDir:
    """The store in `data`, read-only (a consistent snapshot; a server may run beside it) or
    with the writer lock (`Busy` while a server holds it). `NoStore` if there is none."""
    from amc.adapters.lmdb import NotAStore, SchemaMismatch, StoreLocked

    path = store_dir(data)
    try:
        return _Lmdb(path, writable)
    except StoreLocked as error:
        raise Busy(str(error)) from None
    except (NotAStore, SchemaMismatch) as error:
        raise NoStore(str(error)) from None


def referenced(tasks: list[Task], inputs: set[str] | None = None) -> set[str]:
    """The sha256 of every artifact a record names, and of every input recorded (`inputs`):
    the bytes that must be kept."""
    return {artifact.sha256 for task in tasks for artifact in task.artifacts} | (inputs or set())


def unused_inputs(catalogue: InputCatalogue, tasks: list[Task], cutoff_ms: int) -> list[StoredInput]:
    """The inputs created before `cutoff_ms` that no unfinished task of their tenant names
    (specs/protocol.md Part F, Retention): what `gc --older-than` removes."""
    from amc.core.inputs import task_references
    from amc.core.lifecycle import TERMINAL_STATUSES

    named = {(t.tenant, sha256) for t in tasks if t.status not in TERMINAL_STATUSES for sha256 in task_references(t)}
    return [i for i in catalogue.listing(None) if i.created_at < cutoff_ms and (i.tenant, i.sha256) not in named]


def ended_before(tasks: list[Task], cutoff_ms: int) -> Iterator[Task]:
    """The tasks that ended before `cutoff_ms` and still hold artifacts."""
    for task in tasks:
        if task.result is not None and task.result.recorded_at < cutoff_ms and task.artifacts:
            yield task


def verify_blobs(opened: DataDir, tasks: list[Task]) -> list[BlobProblem]:
    """Every referenced artifact, and every recorded input, whose file is missing or does not
    hash to its sha256."""
    wanted = sorted(referenced(tasks, opened.inputs().digests()))
    blobs = opened.blobs()
    if blobs is None:
        return [BlobProblem(sha256, "missing", "the data directory has no artifact store") for sha256 in wanted]
    return blobs.verify(wanted)


class _Lmdb:
    """An LMDB store: its records, read from a read-only snapshot or through the service
    that holds the writer lock (one environment per process, so never both)."""

    def __init__(self, path: Path, writable: bool):
        from amc.adapters.lmdb import LmdbService
        from amc.adapters.lmdb.store import Store

        self.path = path
        self.writable = writable
        # Read-only first, even to write: it refuses a directory without a store, where
        # opening for writing would make a new, empty one.
        snapshot = Store.open(path, readonly=True)
        if writable:
            snapshot.close()
            self._service: LmdbService | None = LmdbService.open(path)
            self._snapshot: Store | None = None
            self.busy = False
        else:
            self._service, self._snapshot = None, snapshot
            self.busy = _writer_lock_held(path)

    def tasks(self) -> list[Task]:
        if self._snapshot is not None:
            return list(self._snapshot.load_state().tasks.values())
        assert self._service is not None
        found: list[Task] = []
        query: TaskQuery | None = TaskQuery(limit=1000)
        while query is not None:
            page = self._service.tasks(query)
            found.extend(page.tasks)
            query = query.following(page)
        return found

    def blobs(self) -> BlobStore | None:
        from amc.adapters.lmdb.blobs import ARTIFACTS_DIR, FileBlobStore

        if not (self.path / ARTIFACTS_DIR).is_dir():
            return None
        return FileBlobStore.in_data_dir(self.path)

    def inputs(self) -> InputCatalogue:
        from amc.adapters.lmdb.inputs import FileInputCatalogue

        return FileInputCatalogue.in_data_dir(self.path)

    def purge(self, task_id: str) -> None:
        from amc.core.commands import PurgeArtifacts

        if self._service is None:
            raise RuntimeError("open the data directory writable to purge")
        decision = self._service.execute_sync(PurgeArtifacts(now=0, task_id=task_id))  # the service stamps it
        if decision.rejection is not None:
            raise RuntimeError(decision.rejection.detail)

    def now_ms(self) -> int:
        from amc.adapters.lmdb import layout

        if self._service is not None:
            return self._service.clock.now()
        assert self._snapshot is not None
        return max(int(time.time() * 1000), self._snapshot.get_meta_u64(layout.META_LAST_TIME) or 0)

    def close(self) -> None:
        if self._service is not None:
            self._service.close()
        if self._snapshot is not None:
            self._snapshot.close()


def _writer_lock_held(path: Path) -> bool:
    """Whether a process (a server) holds the store's writer lock right now."""
    import fcntl
    import os

    from amc.adapters.lmdb.layout import WRITER_LOCK_FILE

    try:
        fd = os.open(path / WRITER_LOCK_FILE, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # releases a lock taken here
    return False
