"""The simulator fixture shared by the simulator's own tests (tests/sim) and the adb
adapter's tests (tests/adapters/adb), which drive the simulator through ppadb."""

from __future__ import annotations

import pytest

from amc.sim import SimDeviceSpec, Simulator

SERIAL = "amc-sim-01"  # the default device of the `sim` fixture


@pytest.fixture
def sim():
    """Two default devices (amc-sim-01 Pixel 7, amc-sim-02 SM-G991B) plus an orphan-keeping one."""
    specs = [
        SimDeviceSpec(serial=SERIAL),
        SimDeviceSpec(
            serial="amc-sim-02",
            model="SM-G991B",
            manufacturer="samsung",
            product="o1s",
            sdk=33,
            width=1080,
            height=2340,
        ),
        SimDeviceSpec(serial="amc-sim-raw", keep_silent_orphans=True),
    ]
    with Simulator(specs) as simulator:
        yield simulator
