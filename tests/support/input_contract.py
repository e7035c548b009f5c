"""The `InputCatalogue` contract (amc.service.inputs), run against every implementation: a
test class subclasses `InputCatalogueContract` and gives a `catalogue` fixture. It also
checks the readers' `seek` (a resumed download) against a `blobs` fixture when given."""

from __future__ import annotations

import threading

import pytest

from amc.service import StoredInput, TenantInputsFull

A, B, C = "a" * 64, "b" * 64, "c" * 64


class InputCatalogueContract:
    @pytest.mark.req("UPLOAD/s2")
    def test_a_record_is_made_once_per_tenant(self, catalogue):
        first, created = catalogue.record("acme", A, 10, 1000, 100)
        assert created and first == StoredInput("acme", A, 10, 1000)
        again, created = catalogue.record("acme", A, 10, 2000, 100)
        assert not created and again == first  # created_at unchanged
        assert catalogue.get("acme", A) == first and catalogue.get("beta", A) is None
        _, created = catalogue.record("beta", A, 10, 3000, 100)
        assert created and catalogue.holders(A) == ["acme", "beta"]
        assert catalogue.digests() == {A}

    @pytest.mark.req("UPLOAD/s4")
    def test_a_tenant_stays_within_its_limit(self, catalogue):
        catalogue.record("acme", A, 60, 1, 100)
        with pytest.raises(TenantInputsFull) as full:
            catalogue.record("acme", B, 41, 2, 100)
        assert (full.value.limit, full.value.stored) == (100, 60)
        assert catalogue.record("acme", B, 40, 2, 100)[1]
        assert catalogue.total_bytes("acme") == 100
        assert catalogue.record("beta", C, 100, 3, 100)[1]  # another tenant's own room

    def test_racing_records_of_one_tenant_never_pass_its_limit(self, catalogue):
        made = []

        def one(sha256: str) -> None:
            try:
                made.append(catalogue.record("acme", sha256, 60, 1, 100)[1])
            except TenantInputsFull:
                made.append(False)

        threads = [threading.Thread(target=one, args=(h,)) for h in (A, B, C)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert made.count(True) == 1 and catalogue.total_bytes("acme") == 60

    @pytest.mark.req("UPLOAD/s8", "UPLOAD/s10")
    def test_listing_oldest_first_and_removal(self, catalogue):
        catalogue.record("acme", B, 1, 2000, 100)
        catalogue.record("acme", A, 2, 1000, 100)
        catalogue.record("beta", C, 3, 1500, 100)
        assert [i.sha256 for i in catalogue.listing("acme")] == [A, B]
        assert [(i.tenant, i.sha256) for i in catalogue.listing(None)] == [("acme", A), ("beta", C), ("acme", B)]
        assert catalogue.remove("acme", A) and not catalogue.remove("acme", A)
        assert [i.sha256 for i in catalogue.listing("acme")] == [B]
        assert catalogue.digests() == {B, C}
