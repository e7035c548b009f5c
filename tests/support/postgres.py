"""A throwaway PostgreSQL cluster (Debian's `postgresql` 15 server binaries) for tests and benches.

`initdb` into a new temporary directory and `postgres` on a free loopback port, trust
authentication, no Unix socket. PostgreSQL refuses to run as root, so when we are root
(CI is) both run as the `postgres` system user (`setpriv`), which owns the directory. One
cluster per test session (per xdist worker), a fresh database per test (`pg_url`).

Without the binaries the tests that need them skip, naming what is missing; with
`AMC_REQUIRE_POSTGRES=1` (set in .ci/run) they fail instead.
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.waiting import free_port

BIN_GLOB = "/usr/lib/postgresql/*/bin"  # Debian's layout; the newest version installed wins
SYSTEM_USER = "postgres"
REQUIRE = "AMC_REQUIRE_POSTGRES"


def find_binaries() -> Path | None:
    installed = sorted(
        glob.glob(BIN_GLOB), key=lambda d: int(Path(d).parent.name) if Path(d).parent.name.isdigit() else 0
    )
    for directory in (os.environ.get("AMC_POSTGRES_BIN"), *reversed(installed)):
        if directory and (Path(directory) / "postgres").exists() and (Path(directory) / "initdb").exists():
            return Path(directory)
    found = shutil.which("initdb")
    return Path(found).parent if found and (Path(found).parent / "postgres").exists() else None


def missing() -> str | None:
    """Why no cluster can be started here, or None."""
    if find_binaries() is None:
        return "the PostgreSQL server binaries (initdb, postgres) are not installed (apt-get install postgresql)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SYSTEM_USER)
        except KeyError:
            return f"we run as root and there is no {SYSTEM_USER!r} system user to run PostgreSQL as"
    return None


class Cluster:
    """One running cluster; `url(database)` connects to it as the superuser `postgres`."""

    def __init__(self, directory: Path | None = None, *, fsync: bool = True):
        binaries = find_binaries()
        assert binaries is not None, missing()
        self.binaries = binaries
        self.fsync = fsync
        # Not under pytest's tmp_path: its parents are private to root, and the server runs as postgres.
        self.directory = directory or Path(tempfile.mkdtemp(prefix="amc-pg-"))
        self.data = self.directory / "data"
        self.port = free_port()
        self.process: subprocess.Popen | None = None
        self._names = itertools.count(1)

    def _as_owner(self, argv: list[str]) -> list[str]:
        # setpriv execs the program itself (runuser would stay in between as its parent), so
        # the process we signal to stop the server is the server.
        if os.geteuid() != 0:
            return argv
        return ["setpriv", f"--reuid={SYSTEM_USER}", f"--regid={SYSTEM_USER}", "--init-groups", *argv]

    def start(self) -> Cluster:
        if os.geteuid() == 0:
            entry = pwd.getpwnam(SYSTEM_USER)
            os.chown(self.directory, entry.pw_uid, entry.pw_gid)
        subprocess.run(
            self._as_owner(
                [str(self.binaries / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8"]
                + ["--locale=C", "--no-instructions"]
            ),
            check=True,
            capture_output=True,
        )
        settings = {
            "listen_addresses": "127.0.0.1",
            "port": str(self.port),
            "unix_socket_directories": "",
            "fsync": "on" if self.fsync else "off",
            "max_connections": "200",
            "shared_buffers": "64MB",
        }
        argv = [str(self.binaries / "postgres"), "-D", str(self.data)]
        for name, value in settings.items():
            argv += ["-c", f"{name}={value}"]
        log = open(self.directory / "server.log", "ab")  # noqa: SIM115 (the server keeps it open)
        self.process = subprocess.Popen(self._as_owner(argv), stdout=log, stderr=log, start_new_session=True)
        log.close()
        self._wait_ready()
        return self

    def _wait_ready(self, timeout: float = 30.0) -> None:
        import psycopg

        deadline = time.monotonic() + timeout
        while True:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"postgres exited: {(self.directory / 'server.log').read_text()[-2000:]}")
            try:
                psycopg.connect(self.url("postgres"), connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def new_database(self, prefix: str = "amc") -> str:
        """A new, empty database; its URL."""
        import psycopg

        name = f"{prefix}_{os.getpid()}_{next(self._names)}"
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # fast shutdown: ends the sessions, no checkpoint wait
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def require() -> None:
    """Skip the calling test (or fail it, with AMC_REQUIRE_POSTGRES=1) when no cluster can run."""
    reason = missing()
    if reason is None:
        return
    if os.environ.get(REQUIRE) == "1":
        pytest.fail(f"{REQUIRE}=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    require()
    cluster = Cluster(fsync=False)  # tests check behaviour, not the disk; benches start their own
    cluster.start()
    try:
        yield cluster
    finally:
        with contextlib.suppress(Exception):
            cluster.stop()


@pytest.fixture
def pg_url(pg_cluster: Cluster) -> str:
    """The URL of a new, empty database of the session's cluster."""
    return pg_cluster.new_database()
