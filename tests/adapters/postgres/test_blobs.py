"""`PostgresBlobStore` keeps the `BlobStore` contract, and leaves nothing of an unfinished upload."""

from __future__ import annotations

import os

import psycopg
import pytest

from amc.adapters.postgres import PostgresService
from amc.adapters.postgres.blobs import CHUNK_BYTES, PostgresBlobStore
from tests.support.blob_contract import BlobStoreContract, put


class TestPostgresBlobStore(BlobStoreContract):
    @pytest.fixture
    def blobs(self, pg_url):
        PostgresService.open(pg_url).close()  # creates the tables
        store = PostgresBlobStore(pg_url)
        yield store
        store.close()

    def damage(self, blobs, sha256):
        with blobs._pool.connection() as conn:
            conn.execute(
                "UPDATE amc_blob_chunks SET data = set_byte(data, 0, get_byte(data, 0) # 1) WHERE blob = %s AND n = 0",
                (sha256,),
            )


def test_chunks_hold_the_bytes_and_an_abandoned_upload_leaves_no_row(pg_url):
    PostgresService.open(pg_url).close()
    blobs = PostgresBlobStore(pg_url)
    try:
        data = os.urandom(2 * CHUNK_BYTES + 5)
        blob = put(blobs, data)
        with blobs.begin() as writer:
            writer.write(os.urandom(3 * CHUNK_BYTES))  # flushed chunks, then given up
        with psycopg.connect(pg_url) as conn:
            rows = conn.execute("SELECT blob, n, length(data) FROM amc_blob_chunks ORDER BY n").fetchall()
        assert rows == [(blob.sha256, 0, CHUNK_BYTES), (blob.sha256, 1, CHUNK_BYTES), (blob.sha256, 2, 5)]
    finally:
        blobs.close()
