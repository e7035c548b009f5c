"""Device discovery and attributes through ppadb."""

from __future__ import annotations

import time

import pytest

from amc.adapters.adb.discovery import DeviceInfo, discover, list_serials, parse_screen_size, read_attributes
from amc.adapters.adb.errors import StepTimedOut


def test_discover_lists_usable_devices_with_attributes(client, sim):
    found = discover(client)
    assert found[:2] == [
        DeviceInfo(
            "amc-sim-01", {"model": "Pixel 7", "manufacturer": "Google", "sdk": "34", "screen_size": "1080x2400"}
        ),
        DeviceInfo(
            "amc-sim-02", {"model": "SM-G991B", "manufacturer": "samsung", "sdk": "33", "screen_size": "1080x2340"}
        ),
    ]
    assert sim.commands("amc-sim-01") == ["getprop", "wm size"]


def test_only_devices_in_state_device_are_listed(client, sim):
    sim.set_state("amc-sim-01", "offline")
    sim.set_state("amc-sim-02", "unauthorized")
    assert list_serials(client) == ["amc-sim-raw"]
    assert [info.serial for info in discover(client)] == ["amc-sim-raw"]


def test_a_hung_device_is_left_out_within_the_timeout(client, sim):
    sim.set_silent("amc-sim-02")
    started = time.monotonic()
    assert [info.serial for info in discover(client, timeout=0.4)] == ["amc-sim-01", "amc-sim-raw"]
    assert time.monotonic() - started < 1.5
    with pytest.raises(StepTimedOut):
        read_attributes(client, "amc-sim-02", timeout=0.3)


def test_screen_size_parsing():
    assert parse_screen_size("Physical size: 1080x2400\n") == "1080x2400"
    assert parse_screen_size("Physical size: 1440x3200\nOverride size: 1080x2400\n") == "1080x2400"
    assert parse_screen_size("garbage") is None
