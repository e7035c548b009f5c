"""A small file system of the test's own: a tmpfs of a few MiB, to fill up on purpose.

Mounting needs root (CI runs as root). Without the right to mount, a test that needs one is
skipped with the reason, and fails instead when AMC_REQUIRE_TMPFS=1 (as `.ci/run` sets it).
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def mounted_tmpfs(mount_point: Path, size_bytes: int) -> Iterator[Path]:
    """`mount_point` with a fresh tmpfs of `size_bytes` mounted on it, unmounted afterwards."""
    mount_point.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_bytes},mode=0755", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        message = f"cannot mount a tmpfs (needs root): {mounted.stderr.strip() or mounted.returncode}"
        if os.environ.get("AMC_REQUIRE_TMPFS") == "1":
            pytest.fail(f"AMC_REQUIRE_TMPFS=1 but {message}")
        pytest.skip(message)
    try:
        yield mount_point
    finally:
        # Lazy: a server that has not quite let go of its files does not keep the mount busy.
        subprocess.run(["umount", "-l", str(mount_point)], check=True)


def fill(path: Path, chunk: int = 64 * 1024) -> int:
    """Write zeros into `path` until its file system is full; the bytes written."""
    written = 0
    block = bytes(chunk)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        while chunk >= 1:
            try:
                written += os.write(fd, block[:chunk])
            except OSError as error:
                if error.errno != errno.ENOSPC:
                    raise
                chunk //= 2  # the last pages: smaller writes until not one byte fits
    finally:
        os.close(fd)
    return written
