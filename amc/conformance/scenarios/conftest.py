"""The scenarios' fixtures and options come from `amc.conformance.fixtures`."""

from amc.conformance.fixtures import *  # noqa: F403  (pytest finds fixtures by name)
from amc.conformance.fixtures import pytest_addoption, pytest_configure  # noqa: F401
