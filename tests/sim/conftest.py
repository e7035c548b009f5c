"""Fixtures for the simulator's own tests: a fresh simulator per test, or one device on its own."""

from __future__ import annotations

import pytest

from amc.sim.device import SimDevice
from amc.sim.spec import SimDeviceSpec
from tests.support.simulator import sim  # noqa: F401  (a fixture)


@pytest.fixture
def device():
    """One device driven directly, without sockets (see helpers.run)."""
    return SimDevice(SimDeviceSpec(serial="unit-1"))
