"""`PostgresInputCatalogue` keeps the `InputCatalogue` contract; its records are the database's,
so every server of it (a new leader after failover) reads them."""

from __future__ import annotations

import pytest

from amc.adapters.postgres import PostgresService
from amc.adapters.postgres.inputs import PostgresInputCatalogue
from tests.support.input_contract import A, InputCatalogueContract


class TestPostgresInputCatalogue(InputCatalogueContract):
    @pytest.fixture
    def catalogue(self, pg_url):
        PostgresService.open(pg_url).close()  # creates the tables
        found = PostgresInputCatalogue(pg_url)
        yield found
        found.close()


def test_another_server_reads_the_records(pg_url):
    PostgresService.open(pg_url).close()
    first, second = PostgresInputCatalogue(pg_url), PostgresInputCatalogue(pg_url)
    try:
        first.record("acme", A, 5, 7, 100)
        assert second.get("acme", A) is not None and second.holders(A) == ["acme"]
    finally:
        first.close()
        second.close()
