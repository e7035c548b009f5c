"""Inputs' records as files beside an LMDB store (an `amc.service.InputCatalogue`).

    DATA/inputs/
        tmp/                 records being written
        t-<hash of tenant>/  one directory per tenant (any tenant name fits a file name)
            <sha256>         {"tenant", "size", "created_at"}: the tenant has this input

The bytes are in the artifacts' `FileBlobStore` (`DATA/artifacts/`), stored there first. A
record is written to `tmp/`, fsynced, then hard-linked to its place and the tenant's
directory fsynced, before `record` returns: a link fails if the name exists, so two uploads
of the same input racing each other record it once and the second learns it was there, and
a crash leaves a whole record or none (an old leftover in `tmp/` is removed on a later open).

One server holds a data directory, so the per-tenant limit is checked and the record made
under one process-wide lock; the tenant's total is read from its directory each time (a
listing of at most a few thousand small files).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import threading
import time
from pathlib import Path

from amc.adapters.lmdb.blobs import _fsync_dir, _make_dir
from amc.service import SHA256, StoredInput, TenantInputsFull, checked_sha256
from amc.service.inputs import oldest_first

INPUTS_DIR = "inputs"  # inside the data directory
TEMP_DIR = "tmp"
LEFTOVER_AGE_S = 3600.0


def tenant_dir_name(tenant: str) -> str:
    return "t-" + hashlib.sha256(tenant.encode()).hexdigest()[:32]


class FileInputCatalogue:
    """The input records of the LMDB store in `data_dir` (see the module docstring)."""

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root)
        self._temp = self.root / TEMP_DIR
        _make_dir(self._temp)
        # A record is written in milliseconds; one this old was left by a crash. (Younger ones
        # may belong to the server beside a `gc` opening this too.)
        cutoff = time.time() - LEFTOVER_AGE_S
        for leftover in self._temp.iterdir():
            with contextlib.suppress(FileNotFoundError):
                if leftover.stat().st_mtime < cutoff:
                    leftover.unlink()
        self._lock = threading.Lock()

    @classmethod
    def in_data_dir(cls, data_dir: str | os.PathLike[str]) -> FileInputCatalogue:
        return cls(Path(data_dir) / INPUTS_DIR)

    def record(self, tenant: str, sha256: str, size: int, now: int, max_tenant_bytes: int) -> tuple[StoredInput, bool]:
        target = self._path(tenant, sha256)
        with self._lock:
            existing = _read(target)
            if existing is not None:
                return existing, False
            stored = self.total_bytes(tenant)
            if stored + size > max_tenant_bytes:
                raise TenantInputsFull(max_tenant_bytes, stored)
            _make_dir(target.parent)
            found = StoredInput(tenant, sha256, size, now)
            fd, name = tempfile.mkstemp(dir=self._temp)
            try:
                with os.fdopen(fd, "w") as file:
                    json.dump({"tenant": tenant, "size": size, "created_at": now}, file)
                    file.flush()
                    os.fsync(file.fileno())
                try:
                    os.link(name, target)
                except FileExistsError:
                    again = _read(target)
                    if again is not None:
                        return again, False
                    raise
                _fsync_dir(target.parent)
            finally:
                os.unlink(name)
            return found, True

    def get(self, tenant: str, sha256: str) -> StoredInput | None:
        return _read(self._path(tenant, sha256))

    def holders(self, sha256: str) -> list[str]:
        checked_sha256(sha256)
        found = (_read(directory / sha256) for directory in self._tenant_dirs())
        return sorted(record.tenant for record in found if record is not None)

    def listing(self, tenant: str | None) -> list[StoredInput]:
        directories = self._tenant_dirs() if tenant is None else [self.root / tenant_dir_name(tenant)]
        return oldest_first([record for directory in directories for record in _records_in(directory)])

    def total_bytes(self, tenant: str) -> int:
        return sum(record.size for record in _records_in(self.root / tenant_dir_name(tenant)))

    def remove(self, tenant: str, sha256: str) -> bool:
        path = self._path(tenant, sha256)
        with self._lock:
            try:
                path.unlink()
            except FileNotFoundError:
                return False
            _fsync_dir(path.parent)
        return True

    def digests(self) -> set[str]:
        return {record.sha256 for record in self.listing(None)}

    def close(self) -> None:
        pass

    def _path(self, tenant: str, sha256: str) -> Path:
        return self.root / tenant_dir_name(tenant) / checked_sha256(sha256)

    def _tenant_dirs(self) -> list[Path]:
        return [p for p in self.root.iterdir() if p.name.startswith("t-") and p.is_dir()]


def _records_in(directory: Path) -> list[StoredInput]:
    try:
        names = [entry.name for entry in os.scandir(directory) if SHA256.fullmatch(entry.name)]
    except FileNotFoundError:
        return []
    return [record for name in names if (record := _read(directory / name)) is not None]


def _read(path: Path) -> StoredInput | None:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    with contextlib.suppress(KeyError, TypeError):
        return StoredInput(data["tenant"], path.name, int(data["size"]), int(data["created_at"]))
    raise ValueError(f"{path}: not an input record")
