"""The service layer: the port between the edges (HTTP, CLI, embedders) and a store.

- `port`: the `Service` protocol, the listing's `TaskQuery`, what a commit tells (`Change`),
  and the errors that cross the port;
- `clock`: the clocks a service stamps commands with;
- `memory`: `MemoryService`, the kernel in memory, nothing durable;
- `blobs`: the `BlobStore` of artifact and input bytes, streaming into and out of it, `MemoryBlobStore`;
- `inputs`: the `InputCatalogue` of which tenant has which input (Part F), `MemoryInputCatalogue`.

Every public name is here too: ``from amc.service import Service, MemoryService``.
"""

from amc.service.blobs import (
    COALESCE_BYTES,
    READ_CHUNK_BYTES,
    SHA256,
    BlobError,
    BlobMismatch,
    BlobNotFound,
    BlobProblem,
    BlobReader,
    BlobStore,
    BlobTooLarge,
    BlobWriter,
    GcReport,
    MemoryBlobStore,
    StoredBlob,
    Upload,
    checked_sha256,
    read_chunks,
    store_chunks,
)
from amc.service.clock import Clock, ManualClock, SystemClock
from amc.service.inputs import InputCatalogue, MemoryInputCatalogue, StoredInput, TenantInputsFull
from amc.service.memory import HistoryLog, MemoryService
from amc.service.port import (
    Change,
    ChangeFeed,
    ChangeListener,
    HistoryEntry,
    NoManualClock,
    NotLeader,
    Page,
    Service,
    StorageUnavailable,
    TaskQuery,
)

__all__ = [
    "COALESCE_BYTES",
    "READ_CHUNK_BYTES",
    "SHA256",
    "BlobError",
    "BlobMismatch",
    "BlobNotFound",
    "BlobProblem",
    "BlobReader",
    "BlobStore",
    "BlobTooLarge",
    "BlobWriter",
    "Change",
    "ChangeFeed",
    "ChangeListener",
    "Clock",
    "GcReport",
    "HistoryEntry",
    "HistoryLog",
    "InputCatalogue",
    "ManualClock",
    "MemoryBlobStore",
    "MemoryInputCatalogue",
    "MemoryService",
    "NoManualClock",
    "NotLeader",
    "Page",
    "Service",
    "StorageUnavailable",
    "StoredBlob",
    "StoredInput",
    "SystemClock",
    "TaskQuery",
    "TenantInputsFull",
    "Upload",
    "checked_sha256",
    "read_chunks",
    "store_chunks",
]
