"""The PostgreSQL store: several servers on one database, one leader, fenced by an epoch.

    from amc.adapters.postgres import PostgresService

    with PostgresService.open("postgresql://amc@db/amc") as service:   # leads, or stands by
        if service.wait_leading(10):
            decision = service.execute_sync(command)                    # after the commit

Modules: `schema` (the tables, their versions and upgrades), `store` (connections, loading,
reads), `leadership` (the leader lock and the epoch), `writer` (one term's group commit,
fenced), `service` (`PostgresService`), `blobs` (`PostgresBlobStore`: artifact bytes in the
database), `verify` (the log against the records), `migrate` (an LMDB store copied in).
specs/design.md, "PostgreSQL", says why each piece is as it is.
"""

from amc.adapters.errors import CommitFailed, Deposed, NotAStore, SchemaMismatch, StoreError
from amc.adapters.postgres.schema import SCHEMA_VERSION
from amc.adapters.postgres.service import PostgresService

__all__ = ["SCHEMA_VERSION", "CommitFailed", "Deposed", "NotAStore", "PostgresService", "SchemaMismatch", "StoreError"]
