"""Pick the storage backend from the configured URL."""

from __future__ import annotations

from sluice.errors import ConfigError
from sluice.storage.sqlite import SqliteStore, sqlite_path


async def open_store(url: str) -> SqliteStore:
    if url.startswith("sqlite:"):
        store = SqliteStore(sqlite_path(url))
        await store.open()
        await store.migrate()
        return store
    scheme = url.partition(":")[0]
    raise ConfigError(f"unsupported storage URL scheme {scheme!r} (supported: sqlite)")
