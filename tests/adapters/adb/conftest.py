"""Fixtures: a fresh simulator per test, ppadb clients and executors on it, and a real,
isolated Debian `adb` server for the tests that need one."""

from __future__ import annotations

import pytest

from amc.adapters.adb.client import BoundedClient
from amc.adapters.adb.executor import AdbExecutor
from tests.support.realadb import real_adb  # noqa: F401  (a fixture)
from tests.support.simulator import sim  # noqa: F401  (a fixture)

from .helpers import SERIAL


@pytest.fixture
def client(sim):  # noqa: F811  (the imported fixture)
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


# --- the real adb server: see tests/support/realadb.py
