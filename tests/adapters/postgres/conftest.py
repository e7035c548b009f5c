from tests.support.postgres import pg_cluster, pg_url

__all__ = ["pg_cluster", "pg_url"]
