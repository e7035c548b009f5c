from __future__ import annotations

import pytest

from amc.core.records import Plan, Step


@pytest.fixture
def data_dir(tmp_path):
    """A path for a new store (the directory does not exist yet)."""
    return tmp_path / "store"


PLAN = Plan(steps=(Step(id="open", action="launch", args={"package": "com.android.settings"}),))
