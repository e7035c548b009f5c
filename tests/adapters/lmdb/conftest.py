from __future__ import annotations

import pytest


@pytest.fixture
def data_dir(tmp_path):
    """A path for a new store (the directory does not exist yet)."""
    return tmp_path / "store"
