"""PostgreSQL storage: what several gateway replicas share."""

from sluice.storage.postgres.store import PostgresStore

__all__ = ("PostgresStore",)
