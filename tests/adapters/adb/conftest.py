"""Fixtures: a fresh simulator per test, ppadb clients and executors on it, and a real,
isolated Debian `adb` server for the tests that need one."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from amc.adapters.adb.client import BoundedClient
from amc.adapters.adb.executor import AdbExecutor
from amc.adapters.adb.simulator import DeviceSpec, Simulator

from .helpers import SERIAL


@pytest.fixture
def sim():
    """Two default devices (amc-sim-01 Pixel 7, amc-sim-02 SM-G991B) plus an orphan-keeping one."""
    specs = [
        DeviceSpec(serial="amc-sim-01"),
        DeviceSpec(serial="amc-sim-02", model="SM-G991B", manufacturer="samsung", product="o1s",
                   sdk=33, width=1080, height=2340),
        DeviceSpec(serial="amc-sim-raw", keep_silent_orphans=True),
    ]
    with Simulator(specs) as simulator:
        yield simulator


@pytest.fixture
def client(sim):
    return BoundedClient("127.0.0.1", sim.server_port, io_timeout=3.0)


@pytest.fixture
def make_executor(client, tmp_path):
    def make(serial: str = SERIAL, **options) -> AdbExecutor:
        options.setdefault("artifacts_dir", tmp_path / "artifacts")
        return AdbExecutor(client, serial, **options)
    return make


@pytest.fixture
def executor(make_executor):
    return make_executor()


# --- the real adb server ---------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class RealAdb:
    """An adb server of its own: its own port (-P) and HOME, so keys and state stay here."""

    def __init__(self, executable: str, home: Path):
        self.executable = executable
        self.port = _free_port()
        self.env = {**os.environ, "HOME": str(home), "ANDROID_ADB_SERVER_PORT": str(self.port)}
        self.env.pop("ADB_VENDOR_KEYS", None)

    def run(self, *args: str, timeout: float = 20.0) -> subprocess.CompletedProcess:
        return subprocess.run([self.executable, "-P", str(self.port), *args], env=self.env,
                              capture_output=True, text=True, timeout=timeout)

    def connect(self, port: int) -> str:
        """`adb connect` to a simulated adbd; returns the serial once it is `device`."""
        serial = f"127.0.0.1:{port}"
        result = self.run("connect", serial)
        assert f"connected to {serial}" in result.stdout, result
        deadline = time.monotonic() + 10
        while f"{serial}\tdevice" not in self.run("devices").stdout:
            assert time.monotonic() < deadline, self.run("devices").stdout
            time.sleep(0.05)
        return serial

    def client(self) -> BoundedClient:
        return BoundedClient("127.0.0.1", self.port, io_timeout=5.0)

    def stop(self) -> None:
        try:
            self.run("kill-server", timeout=10)
        finally:
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                with socket.socket() as probe:
                    if probe.connect_ex(("127.0.0.1", self.port)) != 0:
                        return
                time.sleep(0.05)


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
