"""Pick the storage backend from the configured URL."""

from __future__ import annotations

from sluice.errors import ConfigError
from sluice.storage.base import Store


async def open_store(url: str) -> Store:
    """Open and migrate: ``sqlite:///path`` or ``postgresql://user@host/db``."""
    store: Store
    if url.startswith("sqlite:"):
        from sluice.storage.sqlite import SqliteStore, sqlite_path

        sqlite = SqliteStore(sqlite_path(url))
        await sqlite.open()
        store = sqlite
    elif url.startswith(("postgresql://", "postgres://")):
        from sluice.storage.postgres import PostgresStore

        postgres = PostgresStore(url)
        await postgres.open()
        store = postgres
    else:
        scheme = url.partition(":")[0]
        raise ConfigError(
            f"unsupported storage URL scheme {scheme!r} (supported: sqlite, postgresql)"
        )
    try:
        await store.migrate()
    except BaseException:
        await store.close()
        raise
    return store
