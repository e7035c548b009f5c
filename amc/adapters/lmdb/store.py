"""Opening a data directory: refusals, the writer lock, the LMDB environment, map growth.

`Store` owns the environment and its named databases. It does not know about commands:
the writer (`writer.py`) hands it prepared writes, the reads (`reads.py`) borrow read
transactions from it.

Refusals happen before anything is written, in this order: a path that is a file, a
non-empty directory without an amc store in it, another process that holds the writer
lock, an LMDB environment that is not an amc store, an unknown schema version.

Why our own lock file: LMDB's lock only serialises write *transactions*. Two server
processes on one directory would each keep their own in-memory kernel state and take
turns writing, each overwriting records from a state that never saw the other's
events. So the writer holds an exclusive `flock` on ``amc.lock`` for as long as its store
is open; the kernel releases it when the process dies, even by SIGKILL.

Map growth: LMDB needs a fixed map size and fails a write that does not fit with
MapFullError. We start modest and double on demand. Resizing the map invalidates every
transaction of the process, so readers pass through a `MapGate`: they share it, and a
resize waits until none is inside. Readers never wait for the writer otherwise.
"""

from __future__ import annotations

import errno
import fcntl
import gc
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import lmdb

from amc.adapters.errors import MapCeiling, NotAStore, SchemaMismatch, StoreClosed, StoreLocked
from amc.adapters.lmdb import layout, upgrade
from amc.core.records import Host, Task
from amc.core.state import State

log = logging.getLogger("amc.store")

Record = TypeVar("Record", Task, Host)

DEFAULT_MAP_SIZE = 64 << 20  # 64 MiB to start with; doubled whenever a write does not fit
# The most the map may grow to. Only address space is reserved (the data file grows with the
# data), so the ceiling is there to turn a runaway store into a refused write, not to save memory.
DEFAULT_MAX_MAP_SIZE = 1 << 40  # 1 TiB
MAX_READERS = 1024  # concurrent read transactions (threads), across processes


class MapGate:
    """Readers share the map; a resize (or close) takes it alone."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._readers = 0
        self._exclusive = False

    def enter(self) -> None:
        with self._cond:
            while self._exclusive:
                self._cond.wait()
            self._readers += 1

    def leave(self) -> None:
        with self._cond:
            self._readers -= 1
            if self._exclusive and self._readers == 0:
                self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            while self._exclusive:
                self._cond.wait()
            self._exclusive = True
            while self._readers:
                self._cond.wait()
        try:
            yield
        finally:
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()


class Store:
    """An open amc data directory: the environment, its databases, the writer lock."""

    def __init__(
        self, path: Path, env: lmdb.Environment, lock_fd: int | None, max_map_size: int = DEFAULT_MAX_MAP_SIZE
    ):
        self.path = path
        self.env = env
        self.max_map_size = max_map_size
        self.readonly = lock_fd is None
        self._lock_fd = lock_fd
        self.gate = MapGate()
        self.closed = False
        open_kwargs: dict[str, bool] = {"create": False} if self.readonly else {}
        self.dbs = {
            # mypy cannot match a **dict's keys to parameters, so it fears `txn` gets a bool.
            name: env.open_db(name, **flags, **open_kwargs)  # type: ignore[arg-type]
            for name, flags in layout.DATABASES.items()
        }
        self.meta = self.dbs[layout.DB_META]
        self.log = self.dbs[layout.DB_LOG]
        self.tasks = self.dbs[layout.DB_TASKS]
        self.task_ids = self.dbs[layout.DB_TASK_IDS]
        self.hosts = self.dbs[layout.DB_HOSTS]
        self.listing = self.dbs[layout.DB_LISTING]
        self.queue = self.dbs[layout.DB_QUEUE]
        self.leases = self.dbs[layout.DB_LEASES]
        self.history = self.dbs[layout.DB_HISTORY]

    # --- opening -------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        readonly: bool = False,
        map_size: int = DEFAULT_MAP_SIZE,
        max_map_size: int = DEFAULT_MAX_MAP_SIZE,
    ) -> Store:
        """Open (or, unless `readonly`, create) the store in directory `path`.

        The map starts at `map_size` and doubles whenever a write does not fit, up to
        `max_map_size`; a write that does not fit even then fails with `MapCeiling`.

        Raises `NotAStore`, `SchemaMismatch` or `StoreLocked` (see the module docstring).
        """
        path = Path(path)
        existed = _check_directory(path, readonly)
        lock_fd = None if readonly else _take_writer_lock(path)
        try:
            data = path / layout.DATA_FILE
            if data.exists():
                # Never map less than the data in use, and leave room to grow in.
                map_size = max(map_size, 2 * data.stat().st_size)
            try:
                env = lmdb.open(
                    str(path),
                    map_size=map_size,
                    max_dbs=len(layout.DATABASES) + 2,
                    max_readers=MAX_READERS,
                    readonly=readonly,
                    create=not readonly,
                    # Durability: fsync the data and the meta page on every commit.
                    sync=True,
                    metasync=True,
                    lock=True,
                )
            except lmdb.InvalidError as exc:
                raise NotAStore(
                    f"{path} is not an amc store: {layout.DATA_FILE} is not an LMDB file ({exc}). "
                    "Pass the directory of an amc store, or an empty or new directory, with --data."
                ) from None
            except lmdb.Error as exc:
                raise NotAStore(f"{path}: cannot open the store: {exc}") from None
            try:
                if not readonly:
                    env.reader_check()  # free the reader slots of processes that died
                _check_or_init_meta(path, env, existed, readonly)
                return cls(path, env, lock_fd, max(max_map_size, map_size))
            except BaseException:
                env.close()
                raise
        except BaseException:
            if lock_fd is not None:
                os.close(lock_fd)
            raise

    def close(self) -> None:
        """Close the environment (after readers left) and release the writer lock."""
        if self.closed:
            return
        with self.gate.exclusive():
            self.closed = True
            self.env.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None

    # --- transactions --------------------------------------------------------------------

    @contextmanager
    def read(self) -> Iterator[lmdb.Transaction[bytes]]:
        """A read transaction: a consistent view of what was committed when it began."""
        gate = self.gate
        gate.enter()
        try:
            if self.closed:
                raise StoreClosed(f"the store in {self.path} is closed")
            txn = self._begin_read()
            try:
                yield txn
            finally:
                txn.abort()
        finally:
            gate.leave()

    def _begin_read(self) -> lmdb.Transaction[bytes]:
        try:
            return self.env.begin()
        except lmdb.MapResizedError:
            # The writer process grew the map since we mapped it (verify while serving).
            self.env.set_mapsize(0)
            return self.env.begin()

    def write(self, apply: Callable[[lmdb.Transaction[bytes]], object]) -> float:
        """Run `apply(txn)` in one write transaction and commit it; return the seconds taken.

        `apply` must be repeatable: when the map is full, the transaction is aborted, the
        map doubled, and `apply` run again in a fresh transaction; at `max_map_size` it
        fails with `MapCeiling` instead. Any other error (a full disk: `lmdb.DiskError`)
        aborts the transaction and propagates; nothing of it was written.
        """
        while True:
            started = time.perf_counter()
            txn = self.env.begin(write=True)
            try:
                apply(txn)
            except BaseException as exc:
                # py-lmdb aborts a write transaction only once no thread is inside an LMDB
                # call; a stream of readers can starve that for seconds. Shut them out.
                with self.gate.exclusive():
                    txn.abort()
                    if not isinstance(exc, lmdb.MapFullError):
                        raise
                    self._double_map()
                continue
            try:
                txn.commit()  # writes, fsyncs the data, then writes and fsyncs the meta page
            except lmdb.MapFullError:  # LMDB has aborted the transaction itself
                self.grow()
                continue
            return time.perf_counter() - started

    def grow(self) -> None:
        """Double the map size; waits until no reader is inside the map."""
        with self.gate.exclusive():
            self._double_map()

    def _double_map(self) -> None:
        current = self.env.info()["map_size"]
        if current >= self.max_map_size:
            raise MapCeiling(
                f"the store in {self.path} is full at its largest map size ({current} bytes); "
                "raise amc serve --max-map-size, or remove old data"
            )
        size = min(2 * current, self.max_map_size)
        log.info("growing the map of %s to %d MiB", self.path, size >> 20)
        self.env.set_mapsize(size)

    def put_meta(self, txn: lmdb.Transaction[bytes], key: bytes, value: bytes) -> None:
        txn.put(key, value, db=self.meta)

    def get_meta_u64(self, key: bytes) -> int | None:
        with self.read() as txn:
            raw = txn.get(key, db=self.meta)
        return None if raw is None else layout.read_u64(raw)

    # --- loading -------------------------------------------------------------------------

    def load_state(self) -> State:
        """The kernel state, rebuilt from the task and host records (not from the log)."""
        # Decoding allocates a handful of long-lived objects per task; with the cyclic
        # collector on, its full collections over the growing heap make this load take
        # twice as long. None of these objects can form garbage cycles here.
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            with self.read() as txn:
                tasks = self._decode_all(txn, self.tasks, layout.TaskLoader(), "task", layout.task_key_label)
                hosts = self._decode_all(txn, self.hosts, layout.decode_host, "host", layout.id_key_label)
            return State.from_records(tasks, hosts)
        finally:
            if was_enabled:
                gc.enable()

    def _decode_all(
        self,
        txn: lmdb.Transaction[bytes],
        db: lmdb._Database,
        decode: Callable[[bytes], Record],
        kind: str,
        label: Callable[[bytes], str],
    ) -> list[Record]:
        records = []
        for key, raw in txn.cursor(db=db):
            try:
                records.append(decode(raw))
            except Exception as exc:
                raise NotAStore(
                    f"{self.path}: the {kind} {label(key)} cannot be decoded ({exc}); "
                    "run `amc store verify --data DIR` for details"
                ) from None
        return records

    def last_log_seq(self, txn: lmdb.Transaction[bytes]) -> int:
        cursor = txn.cursor(db=self.log)
        return layout.read_u64(cursor.key()) if cursor.last() else 0

    def size_bytes(self) -> int:
        """Bytes of the map in use (the data file may be larger: LMDB reuses freed pages)."""
        info = self.env.info()
        return (info["last_pgno"] + 1) * self.env.stat()["psize"]


def task_seq_key(txn: lmdb.Transaction[bytes], store: Store, task_id: str) -> bytes | None:
    """The key of the task's record and history, or None for a task the store never had."""
    key = layout.id_key(task_id)
    return None if key is None else txn.get(key, db=store.task_ids)


def read_task(txn: lmdb.Transaction[bytes], store: Store, task_id: str) -> Task | None:
    key = task_seq_key(txn, store, task_id)
    raw = None if key is None else txn.get(key, db=store.tasks)
    return None if raw is None else layout.decode_task(raw)


def read_host(txn: lmdb.Transaction[bytes], store: Store, host_id: str) -> Host | None:
    key = layout.id_key(host_id)
    raw = None if key is None else txn.get(key, db=store.hosts)
    return None if raw is None else layout.decode_host(raw)


# --- refusals ----------------------------------------------------------------------------

# What may be in a data directory before its store exists: the store's own lock files, and
# what `amc serve` and `amc tokens` keep beside the store (the tokens file, its lock, and the
# record of where the server listens, the artifact files and the input records), which an operator may well create first.
_OURS = {
    layout.WRITER_LOCK_FILE,
    layout.LMDB_LOCK_FILE,
    "tokens.json",
    "tokens.json.lock",
    "server.json",
    "artifacts",
    "inputs",
}


def _check_directory(path: Path, readonly: bool) -> bool:
    """Refuse what is not a store (or an empty place for one); True if a store exists."""
    if path.exists() and not path.is_dir():
        raise NotAStore(f"{path} is a file, not a store directory. Pass a directory with --data.")
    if path.is_dir() and (path / layout.DATA_FILE).exists():
        return True
    if readonly:
        raise NotAStore(f"{path} holds no amc store (no {layout.DATA_FILE}). Check the --data directory.")
    if path.is_dir():
        others = sorted(p.name for p in path.iterdir() if p.name not in _OURS)
        if others:
            shown = ", ".join(others[:5]) + (", ..." if len(others) > 5 else "")
            raise NotAStore(
                f"{path} is not an amc store: it is not empty ({shown}) and holds no {layout.DATA_FILE}. "
                "Pass an empty or new directory, or the directory of an existing store, with --data."
            )
    else:
        path.mkdir(parents=True)
    return False


def _take_writer_lock(path: Path) -> int:
    lock_path = path / layout.WRITER_LOCK_FILE
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
        os.close(fd)
        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise
        who = f"process {holder}" if holder else "another process"
        raise StoreLocked(
            f"{path} is already open for writing by {who}. Only one server may write to a data "
            "directory: stop the other one, or pass a different directory with --data."
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def _check_or_init_meta(path: Path, env: lmdb.Environment, existed: bool, readonly: bool) -> None:
    try:
        meta = env.open_db(layout.DB_META, create=False)
    except lmdb.NotFoundError:
        meta = None
    if meta is None:
        if existed or readonly:
            raise NotAStore(
                f"{path} holds an LMDB environment that is not an amc store (it has no amc metadata). "
                "Pass the directory of an amc store, or an empty or new directory, with --data."
            )
        with env.begin(write=True) as txn:
            meta = env.open_db(layout.DB_META, txn=txn)
            txn.put(layout.META_FORMAT, layout.FORMAT, db=meta)
            txn.put(layout.META_SCHEMA, str(layout.SCHEMA_VERSION).encode(), db=meta)
            txn.put(layout.META_CREATED_AT, layout.u64(time.time_ns() // 1_000_000), db=meta)
            for name, flags in layout.DATABASES.items():
                env.open_db(name, txn=txn, **flags)
        return
    with env.begin(db=meta) as txn:
        marker = txn.get(layout.META_FORMAT)
        schema = txn.get(layout.META_SCHEMA)
    if marker != layout.FORMAT:
        raise NotAStore(
            f"{path} holds an LMDB environment that is not an amc store (format marker {marker!r}). "
            "Pass the directory of an amc store, or an empty or new directory, with --data."
        )
    if schema in upgrade.UPGRADABLE and not readonly:
        upgrade.upgrade(path, env, meta)
    elif schema in upgrade.UPGRADABLE:
        raise SchemaMismatch(
            f"{path} holds an amc store of schema version {schema.decode()}; this amc reads schema version "
            f"{layout.SCHEMA_VERSION}. Starting the server on it upgrades it in place (one transaction; "
            "the log is kept as it is)."
        )
    elif schema != str(layout.SCHEMA_VERSION).encode():
        found = schema.decode(errors="replace") if schema is not None else "none"
        raise SchemaMismatch(
            f"{path} holds an amc store of schema version {found}; this amc reads schema version "
            f"{layout.SCHEMA_VERSION}. Run the amc version that wrote it, or export its tasks and "
            "start a new store in an empty directory."
        )
