"""`MemoryBlobStore`, the in-memory `BlobStore` beside `MemoryService`, keeps the port's contract."""

from __future__ import annotations

import time

import pytest

from amc.service import MemoryBlobStore
from tests.support.blob_contract import BlobStoreContract


class TestMemoryBlobStore(BlobStoreContract):
    @pytest.fixture
    def blobs(self):
        return MemoryBlobStore()

    def damage(self, blobs, sha256):
        data, _ = blobs._blobs[sha256]
        blobs._blobs[sha256] = (bytes([data[0] ^ 1]) + data[1:], time.time())
