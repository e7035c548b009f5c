"""Small helpers shared by the adb adapter tests."""

from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")

SERIAL = "amc-sim-01"  # the default device of the `sim` fixture


def eventually(probe: Callable[[], T], timeout: float = 3.0, interval: float = 0.02) -> T:
    """Return probe()'s first truthy value, polling up to `timeout`; fail with its last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s (last value: {value!r})")
        time.sleep(interval)


def ends(sim, serial: str) -> list[tuple[str, str]]:
    """(command, end) pairs of a device's shell log."""
    return [(r.command, r.end) for r in sim.log(serial) if r.service == "shell"]
