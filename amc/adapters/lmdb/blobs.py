"""Artifact bytes as files in the data directory, each named by its sha256 (a `BlobStore`).

    DATA/artifacts/
        lock        flock'ed: shared while a blob is put in place, exclusive while gc removes one
        tmp/        uploads in progress, one <random>.part each
        00/ .. ff/  the blobs, by the first two hex digits: ab/ab12...ef (the full sha256)

Why a blob cannot be lost or torn: an upload is written to a temporary file in `tmp/` (the
same file system), hashed as it goes, fsynced, renamed to its content address and the
directory fsynced, all before `finish()` returns. A rename is atomic, so a content address
holds a whole blob or nothing, whatever moment a crash picks; a crash before the rename
leaves a temporary, which `gc` removes. The 256 directories are made (and fsynced) when the
store is first opened, so putting a blob never creates a directory.

Identical bytes are one file: when the content address already holds a file of the same
size, `finish()` drops its temporary and skips the data fsync (a retried upload is cheap);
a file of another size there (damaged) is replaced. `gc` removes only files older than its
grace period, and `finish()` gives a reused blob a fresh mtime under a shared lock, so a gc
sweeping at the same moment never removes a blob whose metadata is about to commit.

A full file system (ENOSPC, EDQUOT) anywhere in an upload raises `StorageUnavailable` after
the temporary is removed: the upload is refused, and its partial bytes do not stay behind to
keep the disk full.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import tempfile
import time
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import BinaryIO

from amc.service import (
    SHA256,
    BlobNotFound,
    BlobProblem,
    GcReport,
    StorageUnavailable,
    StoredBlob,
    Upload,
    checked_sha256,
)

ARTIFACTS_DIR = "artifacts"  # inside the data directory
TEMP_DIR = "tmp"
TEMP_SUFFIX = ".part"
LOCK_FILE = "lock"
SHARDS = tuple(f"{i:02x}" for i in range(256))
NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


@contextlib.contextmanager
def _space_needed(root: Path) -> Iterator[None]:
    """Turn a full file system into `StorageUnavailable` (any other OSError stays a bug or an IO fault)."""
    try:
        yield
    except OSError as error:
        if error.errno not in NO_SPACE:
            raise
        raise StorageUnavailable(f"no space left for artifacts in {root}: {error.strerror}") from error


class FileBlobStore:
    """A `BlobStore` of files under `root` (usually `DATA/artifacts`, see `in_data_dir`)."""

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root)
        self._temp = self.root / TEMP_DIR
        self._lock_path = self.root / LOCK_FILE
        _make_layout(self.root)

    @classmethod
    def in_data_dir(cls, data_dir: str | os.PathLike[str]) -> FileBlobStore:
        """The blobs of the LMDB store in `data_dir`. Open that store first: on a directory
        without one, `LmdbService.open` refuses anything it does not know, `artifacts/` too."""
        return cls(Path(data_dir) / ARTIFACTS_DIR)

    # --- writing ---------------------------------------------------------------------------

    def begin(self, limit: int | None = None) -> FileBlobWriter:
        with _space_needed(self.root):
            return FileBlobWriter(self, limit)

    def _put(self, temp: Path, file: BinaryIO, blob: StoredBlob) -> None:
        """Move the flushed temporary `file` to the content address of `blob`, durably."""
        target = self.path_of(blob.sha256)
        if _size(target) == blob.size:
            with self._locked(fcntl.LOCK_SH):
                if _size(target) == blob.size:  # still there: gc did not take it meanwhile
                    os.utime(target)  # its grace period starts again
                    _fsync_dir(target.parent)  # its first writer may not have got this far yet
                    file.close()
                    temp.unlink()
                    return
        os.fsync(file.fileno())
        file.close()
        with self._locked(fcntl.LOCK_SH):
            os.replace(temp, target)
            _fsync_dir(target.parent)

    # --- reading ---------------------------------------------------------------------------

    def open(self, sha256: str) -> FileBlobReader:
        try:
            file = open(self.path_of(sha256), "rb", buffering=0)  # noqa: SIM115  (the reader owns and closes it)
        except FileNotFoundError:
            raise BlobNotFound(sha256) from None
        return FileBlobReader(sha256, file)

    def size_of(self, sha256: str) -> int | None:
        return _size(self.path_of(sha256))

    def check(self, sha256: str) -> BlobProblem | None:
        try:
            with open(self.path_of(sha256), "rb") as file:
                actual = hashlib.file_digest(file, "sha256").hexdigest()
        except FileNotFoundError:
            return BlobProblem(sha256, "missing", f"no file {self.path_of(sha256)}")
        except OSError as error:
            return BlobProblem(sha256, "corrupt", f"{self.path_of(sha256)} is unreadable: {error}")
        if actual != sha256:
            return BlobProblem(sha256, "corrupt", f"{self.path_of(sha256)} hashes to {actual}")
        return None

    def verify(self, referenced: Collection[str]) -> list[BlobProblem]:
        return [problem for sha256 in referenced if (problem := self.check(sha256)) is not None]

    def digests(self) -> Iterator[str]:
        for shard in SHARDS:
            with os.scandir(self.root / shard) as entries:
                for entry in entries:
                    if SHA256.fullmatch(entry.name) and entry.name.startswith(shard):
                        yield entry.name

    # --- removing --------------------------------------------------------------------------

    def delete(self, sha256: str) -> bool:
        path = self.path_of(sha256)
        with self._locked(fcntl.LOCK_EX):
            try:
                path.unlink()
            except FileNotFoundError:
                return False
        return True

    def gc(self, referenced: Collection[str], dry_run: bool = False, grace_s: float = 600.0) -> GcReport:
        keep = set(referenced)
        cutoff = time.time() - grace_s
        blobs = blob_bytes = temporaries = temporary_bytes = 0
        for sha256 in self.digests():
            if sha256 in keep:
                continue
            path = self.path_of(sha256)
            with self._locked(fcntl.LOCK_EX) if not dry_run else contextlib.nullcontext():
                freed = _remove_if_older(path, cutoff, dry_run)
            if freed is not None:
                blobs += 1
                blob_bytes += freed
        with os.scandir(self._temp) as entries:
            leftovers = [Path(entry.path) for entry in entries if entry.name.endswith(TEMP_SUFFIX)]
        for path in leftovers:
            freed = _remove_if_older(path, cutoff, dry_run)
            if freed is not None:
                temporaries += 1
                temporary_bytes += freed
        return GcReport(dry_run, blobs, blob_bytes, temporaries, temporary_bytes)

    # --- the rest --------------------------------------------------------------------------

    def path_of(self, sha256: str) -> Path:
        return self.root / checked_sha256(sha256)[:2] / sha256

    def temporaries(self) -> list[Path]:
        """The temporary files of uploads in progress (or abandoned by a crash)."""
        return sorted(p for p in self._temp.iterdir() if p.name.endswith(TEMP_SUFFIX))

    @contextlib.contextmanager
    def _locked(self, how: int) -> Iterator[None]:
        # A descriptor of its own per holder: flock belongs to the open file, so threads
        # sharing one descriptor would share (and release) one lock.
        fd = os.open(self._lock_path, os.O_RDONLY)
        try:
            fcntl.flock(fd, how)
            yield
        finally:
            os.close(fd)


class FileBlobWriter(Upload):
    """A `BlobWriter` into a temporary file of a `FileBlobStore`."""

    def __init__(self, store: FileBlobStore, limit: int | None):
        super().__init__(limit)
        self._store = store
        fd, name = tempfile.mkstemp(dir=store._temp, suffix=TEMP_SUFFIX)
        self._temp = Path(name)
        self._file: BinaryIO = os.fdopen(fd, "wb")
        self._hash = hashlib.sha256()

    def write(self, chunk: bytes) -> None:
        self._admit(chunk)
        try:
            with _space_needed(self._store.root):
                self._file.write(chunk)
        except BaseException:
            self.abort()
            raise
        self._hash.update(chunk)
        self._count(chunk)

    def digest(self) -> str:
        return self._hash.hexdigest()

    def finish(self) -> StoredBlob:
        self._require_open()
        blob = StoredBlob(self._hash.hexdigest(), self._size)
        try:
            with _space_needed(self._store.root):
                self._file.flush()
                self._store._put(self._temp, self._file, blob)
        except BaseException:
            self.abort()
            raise
        self._state = "finished"
        return blob

    def abort(self) -> None:
        if self._state != "open":
            return
        self._state = "aborted"
        with contextlib.suppress(OSError):  # closing flushes what is buffered: on a full disk, that fails again
            self._file.close()
        self._temp.unlink(missing_ok=True)


class FileBlobReader:
    """A `BlobReader` of one blob file (an open descriptor: a delete does not cut it short)."""

    def __init__(self, sha256: str, file: BinaryIO):
        self.sha256 = sha256
        self.size = os.fstat(file.fileno()).st_size
        self._file = file

    def read(self, n: int) -> bytes:
        return self._file.read(n)

    def seek(self, offset: int) -> None:
        self._file.seek(offset)

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> FileBlobReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _make_layout(root: Path) -> None:
    """Make the directories (each made one fsynced into its parent) and the lock file."""
    made = _make_dir(root)
    new_children = False
    for name in (TEMP_DIR, *SHARDS):
        with contextlib.suppress(FileExistsError):
            (root / name).mkdir()
            new_children = True
    if not (root / LOCK_FILE).exists():
        (root / LOCK_FILE).touch()
        new_children = True
    if new_children or made:
        _fsync_dir(root)


def _make_dir(path: Path) -> bool:
    """Make `path` and any missing parents, each durable in its parent; False if it existed."""
    if path.is_dir():
        return False
    _make_dir(path.parent)
    with contextlib.suppress(FileExistsError):
        path.mkdir()
    _fsync_dir(path.parent)
    return True


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return None


def _remove_if_older(path: Path, cutoff: float, dry_run: bool) -> int | None:
    """The bytes freed by removing `path` if it was last modified before `cutoff`, else None."""
    try:
        stat = path.stat()
        if stat.st_mtime >= cutoff:
            return None
        if not dry_run:
            path.unlink()
    except FileNotFoundError:
        return None  # gone meanwhile: an upload finished or gave up, or another gc was quicker
    return stat.st_size
