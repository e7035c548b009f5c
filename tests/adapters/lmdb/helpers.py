"""What the LMDB tests need of a service beyond its public surface, kept out of `LmdbService`."""

from __future__ import annotations

import asyncio

from amc.adapters.lmdb import LmdbService
from amc.core.state import State


def advance_clock(service: LmdbService, ms: int) -> int:
    """`LmdbService.advance_clock` from a test's thread, which runs no event loop."""
    return asyncio.run(service.advance_clock(ms))


def writer_state(service: LmdbService) -> State:
    """The writer's in-memory state (only meaningful while no command is in flight)."""
    return service._writer.state
