"""What the PostgreSQL store raises on purpose (`NotLeader` is the service port's, amc.service)."""

from __future__ import annotations


class StoreError(Exception):
    """The base of the PostgreSQL store's errors."""


class NotAStore(StoreError):
    """The database holds tables that are not an amc store, or cannot be reached."""


class SchemaMismatch(StoreError):
    """The database holds an amc store of a schema this amc cannot read."""


class CommitFailed(StoreError):
    """A batch could not be committed; nothing of it was applied."""


class Deposed(StoreError):
    """The leadership epoch moved: another server leads now, and this one must never commit again."""
