"""Inputs' records (specs/protocol.md Part F): which tenant has which input, since when.

An input's bytes live in the `BlobStore`, addressed by their sha256, like an artifact's; an
`InputCatalogue` records that a tenant has them. The two commit separately and in this order:

    stored = await store_chunks(blobs, request.stream(), limit, expected=sha256)  # durable
    record, created = catalogue.record(tenant, stored.sha256, stored.size, now, max_tenant_bytes)

so a crash between them leaves bytes no record names (the blob store's gc removes them) and
never a record without its bytes. The blob store's gc must keep what a catalogue names:
`digests()` is that set, added to the artifacts' references.

Implementations: `MemoryInputCatalogue` (below), `FileInputCatalogue` (`amc.adapters.lmdb.inputs`,
files beside an LMDB store) and `PostgresInputCatalogue` (`amc.adapters.postgres.inputs`, a
table every server of the database reads). `tests/support/input_contract.py` checks any of them.
"""

from __future__ import annotations

import threading
from typing import Protocol

import attrs


@attrs.frozen
class StoredInput:
    tenant: str
    sha256: str
    size: int
    created_at: int  # milliseconds, the server's clock


class TenantInputsFull(Exception):
    """A new input would take its tenant's inputs past their limit; nothing was recorded."""

    def __init__(self, limit: int, stored: int):
        super().__init__(f"at most {limit} bytes; {stored} are stored")
        self.limit = limit
        self.stored = stored


class InputCatalogue(Protocol):
    """The records of inputs, by tenant and sha256. Every method blocks (files, a database):
    call it from a thread on an event loop. Safe to use from many threads at once."""

    def record(self, tenant: str, sha256: str, size: int, now: int, max_tenant_bytes: int) -> tuple[StoredInput, bool]:
        """Record that `tenant` has the input `sha256` (its bytes already durable); durable on
        return. When the tenant has it already: that record and False. Raises
        `TenantInputsFull` when a new record would take the tenant past `max_tenant_bytes`."""

    def get(self, tenant: str, sha256: str) -> StoredInput | None: ...

    def holders(self, sha256: str) -> list[str]:
        """The tenants that have the input."""

    def listing(self, tenant: str | None) -> list[StoredInput]:
        """The tenant's inputs (every tenant's for None), oldest first."""

    def total_bytes(self, tenant: str) -> int: ...

    def remove(self, tenant: str, sha256: str) -> bool:
        """Drop the record (not the bytes); False when there was none."""

    def digests(self) -> set[str]:
        """The sha256 of every recorded input: bytes the blob store's gc must keep."""

    def close(self) -> None: ...


def oldest_first(found: list[StoredInput]) -> list[StoredInput]:
    return sorted(found, key=lambda i: (i.created_at, i.tenant, i.sha256))


class MemoryInputCatalogue:
    """An `InputCatalogue` in a dict, the companion of `MemoryService` and `MemoryBlobStore`."""

    def __init__(self) -> None:
        self._records: dict[tuple[str, str], StoredInput] = {}
        self._lock = threading.Lock()

    def record(self, tenant: str, sha256: str, size: int, now: int, max_tenant_bytes: int) -> tuple[StoredInput, bool]:
        with self._lock:
            existing = self._records.get((tenant, sha256))
            if existing is not None:
                return existing, False
            stored = sum(i.size for (t, _), i in self._records.items() if t == tenant)
            if stored + size > max_tenant_bytes:
                raise TenantInputsFull(max_tenant_bytes, stored)
            found = self._records[tenant, sha256] = StoredInput(tenant, sha256, size, now)
            return found, True

    def get(self, tenant: str, sha256: str) -> StoredInput | None:
        return self._records.get((tenant, sha256))

    def holders(self, sha256: str) -> list[str]:
        with self._lock:
            return sorted(t for (t, h) in self._records if h == sha256)

    def listing(self, tenant: str | None) -> list[StoredInput]:
        with self._lock:
            return oldest_first([i for i in self._records.values() if tenant is None or i.tenant == tenant])

    def total_bytes(self, tenant: str) -> int:
        with self._lock:
            return sum(i.size for i in self._records.values() if i.tenant == tenant)

    def remove(self, tenant: str, sha256: str) -> bool:
        with self._lock:
            return self._records.pop((tenant, sha256), None) is not None

    def digests(self) -> set[str]:
        with self._lock:
            return {sha256 for _, sha256 in self._records}

    def close(self) -> None:
        pass
