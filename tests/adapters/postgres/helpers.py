"""What the PostgreSQL tests need of a service beyond its public surface."""

from __future__ import annotations

import asyncio

from amc.adapters.postgres import PostgresService
from amc.core.state import State


def advance_clock(service: PostgresService, ms: int) -> int:
    return asyncio.run(service.advance_clock(ms))


def writer_state(service: PostgresService) -> State:
    """The leader's in-memory state (only meaningful while no command is in flight)."""
    writer = service._writer
    assert writer is not None
    return writer.state
