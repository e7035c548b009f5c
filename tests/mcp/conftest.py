import importlib.util

import pytest

from tests.mcp.stack import Stack

# The Host Agent's on-screen actions (issue 25) import these kernel modules of the ui-core
# branch; until they are merged, `amc up` cannot start its Host Agent.
KERNEL_MODULES = ("amc.core.ui.settle", "amc.core.ui.diff", "amc.core.ui.marks")


@pytest.fixture(scope="package")
def stack(tmp_path_factory):
    """One `amc up` with two simulated phones for the end-to-end tests of this package."""
    missing = [name for name in KERNEL_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(f"the Host Agent needs {', '.join(missing)} (ui-core's branch, not merged yet)")
    running = Stack(tmp_path_factory.mktemp("stack"), devices=2)
    yield running
    running.stop()
