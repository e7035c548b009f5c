"""Small helpers shared by the adb adapter tests."""

from __future__ import annotations

from tests.support.simulator import SERIAL  # noqa: F401  (re-exported for the tests here)
from tests.support.waiting import eventually  # noqa: F401  (re-exported for the tests here)


def ends(sim, serial: str) -> list[tuple[str, str]]:
    """(command, end) pairs of a device's shell log."""
    return [(r.command, r.end) for r in sim.log(serial) if r.service == "shell"]
