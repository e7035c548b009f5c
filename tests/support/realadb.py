"""The real adb server (Debian's `adb`), isolated for a test: its own port and HOME."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from amc.adapters.adb.client import BoundedClient
from tests.support.waiting import eventually, free_port, port_open


class RealAdb:
    """An adb server of its own: its own port (-P) and HOME, so keys and state stay here."""

    def __init__(self, executable: str, home: Path):
        self.executable = executable
        self.port = free_port()
        self.env = {**os.environ, "HOME": str(home), "ANDROID_ADB_SERVER_PORT": str(self.port)}
        self.env.pop("ADB_VENDOR_KEYS", None)

    def run(self, *args: str, timeout: float = 20.0) -> subprocess.CompletedProcess:
        return subprocess.run(
            [self.executable, "-P", str(self.port), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def connect(self, port: int) -> str:
        """`adb connect` to a simulated adbd; the serial once it is listed as `device`."""
        serial = f"127.0.0.1:{port}"
        result = self.run("connect", serial)
        assert f"connected to {serial}" in result.stdout, result
        eventually(
            lambda: f"{serial}\tdevice" in self.run("devices").stdout,
            timeout=10,
            interval=0.05,
            what=f"{serial} listed by `adb devices`",
        )
        return serial

    def client(self) -> BoundedClient:
        return BoundedClient("127.0.0.1", self.port, io_timeout=5.0)

    def stop(self) -> None:
        try:
            self.run("kill-server", timeout=10)
        finally:
            with contextlib.suppress(AssertionError):  # best effort: a server that lingers is not the test's fault
                eventually(lambda: not port_open(self.port), timeout=5, interval=0.05)


@pytest.fixture(scope="module")
def real_adb(tmp_path_factory):
    """A running isolated adb server; skipped without `adb`, unless AMC_REQUIRE_ADB=1."""
    executable = shutil.which("adb")
    if executable is None:
        message = "the Debian `adb` executable is not on PATH (apt-get install adb)"
        if os.environ.get("AMC_REQUIRE_ADB") == "1":
            pytest.fail(f"AMC_REQUIRE_ADB=1 but {message}")
        pytest.skip(message)
    adb = RealAdb(executable, tmp_path_factory.mktemp("adb-home"))
    started = adb.run("start-server")
    try:
        assert started.returncode == 0, started
        yield adb
    finally:
        adb.stop()
