"""The embedded default: one SQLite file in WAL mode, reached through aiosqlite's thread.

One connection per process; an asyncio lock keeps this process's transactions from
interleaving on it, and ``BEGIN IMMEDIATE`` takes SQLite's write lock up front, so
several processes sharing the file serialize their money updates too.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from importlib import resources
from pathlib import Path
from typing import Any

import aiosqlite

from sluice.errors import ConfigError

_MIGRATIONS_PACKAGE = "sluice.storage.migrations.sqlite"


def sqlite_path(url: str) -> Path:
    """``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db``."""
    prefix = "sqlite:///"
    if not url.startswith(prefix) or len(url) == len(prefix):
        raise ConfigError(f"not a SQLite URL: {url!r} (expected sqlite:///path/to/file.db)")
    return Path(url[len(prefix) :])


def migration_scripts(package: str) -> list[tuple[int, str]]:
    files = resources.files(package)
    out = []
    for entry in files.iterdir():
        if entry.name.endswith(".sql"):
            out.append((int(entry.name.split("_", 1)[0]), entry.read_text(encoding="utf-8")))
    return sorted(out)


def split_statements(script: str) -> list[str]:
    """Split a migration on ``;`` at line ends (our migrations hold no such literals)."""
    lines = [line for line in script.splitlines() if not line.lstrip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";\n") if s.strip().rstrip(";")]


Row = tuple[Any, ...]


class Tx:
    """Statements inside a transaction (the connection's lock is held)."""

    __slots__ = ("_db",)

    def __init__(self, db: aiosqlite.Connection) -> None:
        self._db = db

    async def execute(self, sql: str, params: Iterable[Any] = ()) -> int:
        """Run a statement; the number of rows it changed."""
        async with self._db.execute(sql, tuple(params)) as cur:
            return cur.rowcount

    async def many(self, sql: str, rows: Iterable[Iterable[Any]]) -> None:
        await self._db.executemany(sql, [tuple(r) for r in rows])

    async def one(self, sql: str, params: Iterable[Any] = ()) -> Row | None:
        async with self._db.execute(sql, tuple(params)) as cur:
            row = await cur.fetchone()
        return None if row is None else tuple(row)

    async def all(self, sql: str, params: Iterable[Any] = ()) -> list[Row]:
        async with self._db.execute(sql, tuple(params)) as cur:
            rows = await cur.fetchall()
        return [tuple(r) for r in rows]


class SqliteBase:
    def __init__(self, path: Path) -> None:
        self._path = path
        self._db: aiosqlite.Connection | None = None
        self._lock = asyncio.Lock()

    @property
    def db(self) -> aiosqlite.Connection:
        if self._db is None:
            raise RuntimeError("store is not open")
        return self._db

    async def open(self) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = await aiosqlite.connect(self._path, isolation_level=None)
        except sqlite3.Error as exc:
            raise ConfigError(f"cannot open SQLite database {self._path}: {exc}") from None
        await self._db.execute("PRAGMA journal_mode=WAL")
        await self._db.execute("PRAGMA synchronous=NORMAL")
        await self._db.execute("PRAGMA foreign_keys=ON")
        await self._db.execute("PRAGMA busy_timeout=10000")

    async def close(self) -> None:
        if self._db is not None:
            await self._db.close()
            self._db = None

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Tx]:
        async with self._lock:
            await self.db.execute("BEGIN IMMEDIATE")
            try:
                yield Tx(self.db)
            except BaseException:
                await self.db.execute("ROLLBACK")
                raise
            await self.db.execute("COMMIT")

    async def one(self, sql: str, params: Iterable[Any] = ()) -> Row | None:
        async with self._lock:
            return await Tx(self.db).one(sql, params)

    async def all(self, sql: str, params: Iterable[Any] = ()) -> list[Row]:
        async with self._lock:
            return await Tx(self.db).all(sql, params)

    async def migrate(self) -> None:
        await self.db.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations "
            "(version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)"
        )
        for version, script in migration_scripts(_MIGRATIONS_PACKAGE):
            async with self.transaction() as tx:
                done = await tx.one("SELECT 1 FROM schema_migrations WHERE version = ?", (version,))
                if done is not None:
                    continue
                for statement in split_statements(script):
                    await tx.execute(statement)
                await tx.execute(
                    "INSERT INTO schema_migrations (version, applied_at) "
                    "VALUES (?, strftime('%s','now'))",
                    (version,),
                )
