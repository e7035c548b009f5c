"""What the stores (LMDB and PostgreSQL) refuse or fail with. Every message names the data
directory or the database and says what to do, because the person reading it is an
operator looking at a terminal. (`NotLeader` is the service port's, `amc.service`.)"""

from __future__ import annotations

from amc.service import StorageUnavailable


class StoreError(Exception):
    """The base of every error a store raises."""


class NotAStore(StoreError):
    """The directory or database holds something, but not an amc store (or cannot be reached)."""


class SchemaMismatch(StoreError):
    """The store was written with a schema version this amc does not read."""


class StoreLocked(StoreError):
    """Another process (or another open store in this one) is writing to the LMDB directory."""


class StoreClosed(StoreError):
    """The store was closed; nothing more can be executed or read."""


class CommitFailed(StoreError, StorageUnavailable):
    """The batch holding this command could not be committed; nothing of it was applied."""


class MapCeiling(StoreError):
    """The LMDB map is full and already as large as the store may grow (`max_map_size`)."""


class Deposed(StoreError):
    """The leadership epoch moved: another server leads now, and this one must never commit again."""
