"""What the store refuses or fails with. Every message names the data directory and says
what to do, because the person reading it is an operator looking at a terminal."""

from __future__ import annotations

from amc.service import StorageUnavailable


class StoreError(Exception):
    """The base of every error the LMDB store raises."""


class NotAStore(StoreError):
    """The directory exists and holds something, but not an amc store."""


class SchemaMismatch(StoreError):
    """The store was written with a schema version this amc does not read."""


class StoreLocked(StoreError):
    """Another process (or another open store in this one) is writing to the directory."""


class StoreClosed(StoreError):
    """The store was closed; nothing more can be executed or read."""


class CommitFailed(StoreError, StorageUnavailable):
    """The batch holding this command could not be committed; nothing of it was applied."""


class MapCeiling(StoreError):
    """The map is full and already as large as the store may grow (`max_map_size`)."""
