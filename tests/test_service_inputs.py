"""`MemoryInputCatalogue` and `FileInputCatalogue` keep the `InputCatalogue` contract (a blob
reader's `seek` and the writer's `digest` are in the `BlobStore` contract)."""

from __future__ import annotations

import pytest

from amc.adapters.lmdb.inputs import FileInputCatalogue
from amc.service import MemoryInputCatalogue
from tests.support.input_contract import A, InputCatalogueContract


class TestMemoryInputCatalogue(InputCatalogueContract):
    @pytest.fixture
    def catalogue(self):
        return MemoryInputCatalogue()


class TestFileInputCatalogue(InputCatalogueContract):
    @pytest.fixture
    def catalogue(self, tmp_path):
        return FileInputCatalogue.in_data_dir(tmp_path)


def test_a_file_record_survives_reopening_and_leaves_no_temporary(tmp_path):
    FileInputCatalogue.in_data_dir(tmp_path).record("acme", A, 5, 7, 100)
    again = FileInputCatalogue.in_data_dir(tmp_path)
    assert again.get("acme", A) is not None and again.listing("acme")[0].created_at == 7
    assert list((tmp_path / "inputs" / "tmp").iterdir()) == []
