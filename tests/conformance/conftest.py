"""amc's own tests of the conformance suite use the suite's fixtures and options."""

from amc.conformance.fixtures import *  # noqa: F403  (pytest finds fixtures by name)
from amc.conformance.fixtures import pytest_addoption, pytest_configure  # noqa: F401
