"""Fixtures for the simulator's own tests: a fresh simulator per test."""

from __future__ import annotations

from tests.support.simulator import sim  # noqa: F401  (a fixture)
