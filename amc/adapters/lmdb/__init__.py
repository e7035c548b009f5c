"""The durable store: an event log, records and indexes in one LMDB environment.

    from amc.adapters.lmdb import LmdbService, verify

    with LmdbService.open(".amc") as service:        # refuses a second writer
        decision = service.execute_sync(command)    # returns after the fsync
        page = service.tasks(TaskQuery(tenant="acme", limit=100))
    verify(".amc")                                  # [] when records == replayed log

Modules: `layout` (the on-disk format: databases, keys, schema version), `store`
(opening, refusals, the writer lock, map growth), `upgrade` (older schemas, in place),
`writer` (the commit back-end of the stores' one writer: a batch in one transaction), `reads`, `service` (`LmdbService`), `verify`; `blobs`
(`FileBlobStore`: artifact bytes as content-addressed files beside the LMDB environment).
"""

from amc.adapters.errors import (
    CommitFailed,
    NotAStore,
    SchemaMismatch,
    StoreClosed,
    StoreError,
    StoreLocked,
)
from amc.adapters.lmdb.blobs import FileBlobStore
from amc.adapters.lmdb.layout import SCHEMA_VERSION
from amc.adapters.lmdb.service import DEFAULT_DATA_DIR, LmdbService
from amc.adapters.lmdb.verify import check, verify
from amc.adapters.replay import Findings

__all__ = [
    "DEFAULT_DATA_DIR",
    "SCHEMA_VERSION",
    "CommitFailed",
    "FileBlobStore",
    "LmdbService",
    "NotAStore",
    "Findings",
    "SchemaMismatch",
    "StoreClosed",
    "StoreError",
    "StoreLocked",
    "check",
    "verify",
]
