import pytest

from tests.mcp.stack import Stack


@pytest.fixture(scope="package")
def stack(tmp_path_factory):
    """One `amc up` with two simulated phones for the end-to-end tests of this package."""
    running = Stack(tmp_path_factory.mktemp("stack"), devices=2)
    yield running
    running.stop()
