"""Pick the storage backend from the configured URL."""

from __future__ import annotations

from urllib.parse import urlsplit

from sluice.errors import ConfigError, NoDatabaseError
from sluice.storage.base import Store


async def open_store(url: str) -> Store:
    """Open and migrate: ``sqlite:///path`` or ``postgresql://user@host/db``; a SQLite
    file that does not exist is created."""
    return await _migrated(await _connect(url))


async def open_existing_store(url: str) -> Store:
    """Open a database that ``sluice init`` or the gateway made, and apply the
    migrations it lacks; never create one. Raises :class:`NoDatabaseError` (naming
    :func:`storage_place`) when the file is missing, the server cannot be reached, or
    the database holds no Sluice schema."""
    place = storage_place(url)
    if url.startswith("sqlite:"):
        from sluice.storage.sqlite import sqlite_path

        if not sqlite_path(url).is_file():
            raise NoDatabaseError(f"no database at {place}")
    try:
        store = await _connect(url)
    except ConfigError as exc:
        raise NoDatabaseError(f"no database at {place}: {exc}") from None
    try:
        version = await store.schema_version()
    except BaseException:
        await store.close()
        raise
    if version == 0:
        await store.close()
        raise NoDatabaseError(f"{place} holds no Sluice tables: it was never initialized")
    return await _migrated(store)


def storage_place(url: str) -> str:
    """Where ``url`` points, for a person: a SQLite file's absolute path, or the
    PostgreSQL URL without its password."""
    if url.startswith("sqlite:"):
        from sluice.storage.sqlite import sqlite_path

        return str(sqlite_path(url).absolute())
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = f"{parts.username}:***@" if parts.username else ":***@"
    host = parts.netloc.rpartition("@")[2]
    return parts._replace(netloc=user + host).geturl()


async def _connect(url: str) -> Store:
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
    return store


async def _migrated(store: Store) -> Store:
    try:
        await store.migrate()
    except BaseException:
        await store.close()
        raise
    return store
