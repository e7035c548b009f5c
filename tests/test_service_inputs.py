"""`MemoryInputCatalogue` and `FileInputCatalogue` keep the `InputCatalogue` contract; every
blob reader resumes at an offset (`seek`)."""

from __future__ import annotations

import os

import pytest

from amc.adapters.lmdb.blobs import FileBlobStore
from amc.adapters.lmdb.inputs import FileInputCatalogue
from amc.service import BlobMismatch, MemoryBlobStore, MemoryInputCatalogue, store_chunks
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


@pytest.mark.parametrize("kind", ["memory", "file"])
def test_readers_seek_and_a_mismatch_keeps_nothing(kind, tmp_path):
    import asyncio
    import hashlib

    blobs = MemoryBlobStore() if kind == "memory" else FileBlobStore(tmp_path / "blobs")
    data = os.urandom(300_000)

    async def chunks():
        yield data

    stored = asyncio.run(store_chunks(blobs, chunks(), None, expected=hashlib.sha256(data).hexdigest()))
    with blobs.open(stored.sha256) as reader:
        reader.seek(123_456)
        assert reader.read(1_000_000) == data[123_456:]
    with pytest.raises(BlobMismatch):
        asyncio.run(store_chunks(blobs, chunks(), None, expected="0" * 64))
    assert sorted(blobs.digests()) == [stored.sha256]
