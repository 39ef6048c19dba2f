"""The embedded default: one SQLite file in WAL mode, owned by one worker thread.

One connection per process writes, used only from its thread, so this process's
transactions never interleave; ``BEGIN IMMEDIATE`` takes SQLite's write lock up front,
so several processes sharing the file serialize their money updates too.

A second connection, ``query_only`` on a thread of its own, serves the reads that may
take long (request-log listings and lookups, spend reports): in WAL mode a reader sees
the last commit and neither waits for the writer nor holds it up, so a listing never
queues ahead of a credit hold. sqlite3 lets go of the GIL while a statement runs.
"""

from __future__ import annotations

import asyncio
import functools
import sqlite3
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from sluice.errors import ConfigError
from sluice.storage.migrations import migration_scripts


def sqlite_path(url: str) -> Path:
    """``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db``."""
    prefix = "sqlite:///"
    if not url.startswith(prefix) or len(url) == len(prefix):
        raise ConfigError(f"not a SQLite URL: {url!r} (expected sqlite:///path/to/file.db)")
    return Path(url[len(prefix) :])


def split_statements(script: str) -> list[str]:
    """Split a migration on ``;`` at line ends (our migrations hold no such literals)."""
    lines = [line for line in script.splitlines() if not line.lstrip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";\n") if s.strip().rstrip(";")]


Row = tuple[Any, ...]
_T = TypeVar("_T")


class Tx:
    """Statements on the connection, inside the database thread."""

    __slots__ = ("_db",)

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def execute(self, sql: str, params: Iterable[Any] = ()) -> int:
        """Run a statement; the number of rows it changed."""
        return self._db.execute(sql, tuple(params)).rowcount

    def many(self, sql: str, rows: Iterable[Iterable[Any]]) -> None:
        self._db.executemany(sql, [tuple(r) for r in rows])

    def one(self, sql: str, params: Iterable[Any] = ()) -> Row | None:
        row = self._db.execute(sql, tuple(params)).fetchone()
        return None if row is None else tuple(row)

    def all(self, sql: str, params: Iterable[Any] = ()) -> list[Row]:
        return [tuple(r) for r in self._db.execute(sql, tuple(params)).fetchall()]


_PRAGMAS = ("journal_mode=WAL", "synchronous=NORMAL", "foreign_keys=ON", "busy_timeout=10000")
_READER_PRAGMAS = ("query_only=ON", "busy_timeout=10000")


class SqliteThread:
    """One connection and the one thread that opens, uses and closes it (the store's
    writer and reader, the response cache's answers)."""

    def __init__(self, name: str) -> None:
        self.thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self.db: sqlite3.Connection | None = None

    async def call(self, fn: Callable[[], _T]) -> _T:
        return await asyncio.get_running_loop().run_in_executor(self.thread, fn)

    async def connect(self, path: Path, pragmas: tuple[str, ...]) -> None:
        def connect() -> sqlite3.Connection:
            db = sqlite3.connect(path, isolation_level=None)
            try:
                for pragma in pragmas:
                    db.execute(f"PRAGMA {pragma}")
            except BaseException:
                db.close()
                raise
            return db

        self.db = await self.call(connect)

    def conn(self) -> sqlite3.Connection:
        if self.db is None:
            raise RuntimeError("store is not open")
        return self.db

    async def close(self) -> None:
        db, self.db = self.db, None
        if db is not None:
            await self.call(db.close)
        self.thread.shutdown(wait=True)


class SqliteBase:
    """All writes run in one worker thread that owns the writing connection; a whole
    transaction is one hop to that thread, not one per statement. :meth:`query` runs on
    the reading connection's own thread."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._writer: SqliteThread | None = None
        self._reader: SqliteThread | None = None

    async def open(self) -> None:
        """The writer first: it creates the file and puts it in WAL mode."""
        self._path.parent.mkdir(parents=True, exist_ok=True)
        self._writer = SqliteThread("sluice-sqlite")
        self._reader = SqliteThread("sluice-sqlite-read")
        try:
            await self._writer.connect(self._path, _PRAGMAS)
            await self._reader.connect(self._path, _READER_PRAGMAS)
        except sqlite3.Error as exc:
            await self.close()
            raise ConfigError(f"cannot open SQLite database {self._path}: {exc}") from None

    async def close(self) -> None:
        workers = (self._reader, self._writer)
        self._reader = self._writer = None
        for worker in workers:
            if worker is not None:
                await worker.close()

    async def _call(self, fn: Callable[[], _T]) -> _T:
        if self._writer is None:
            raise RuntimeError("store is not open")
        return await self._writer.call(fn)

    def _db_or_fail(self) -> sqlite3.Connection:
        if self._writer is None:
            raise RuntimeError("store is not open")
        return self._writer.conn()

    async def read(self, work: Callable[[Tx], _T]) -> _T:
        return await self._call(lambda: work(Tx(self._db_or_fail())))

    async def query(self, work: Callable[[Tx], _T]) -> _T:
        """``work`` on the reading connection (it refuses writes): one snapshot of the
        last commit, never waiting for the writer's thread nor delaying it."""
        reader = self._reader
        if reader is None:
            raise RuntimeError("store is not open")

        def snapshot() -> _T:
            db = reader.conn()
            db.execute("BEGIN")
            try:
                return work(Tx(db))
            finally:
                db.execute("COMMIT")

        return await reader.call(snapshot)

    async def write(self, work: Callable[[Tx], _T]) -> _T:
        """``work`` in one ``BEGIN IMMEDIATE`` transaction (SQLite's write lock up front,
        so other processes on the file wait instead of failing later)."""

        def transaction() -> _T:
            db = self._db_or_fail()
            db.execute("BEGIN IMMEDIATE")
            try:
                result = work(Tx(db))
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
            return result

        return await self._call(transaction)

    async def one(self, sql: str, params: Iterable[Any] = ()) -> Row | None:
        return await self.read(lambda tx: tx.one(sql, params))

    async def all(self, sql: str, params: Iterable[Any] = ()) -> list[Row]:
        return await self.read(lambda tx: tx.all(sql, params))

    async def migrate(self) -> None:
        await self.read(
            lambda tx: tx.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations "
                "(version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)"
            )
        )
        for version, script in migration_scripts("sqlite"):
            await self.write(functools.partial(_apply, version=version, script=script))

    async def schema_version(self) -> int:
        return await self.read(_schema_version)


def _schema_version(tx: Tx) -> int:
    table = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
    if tx.one(table) is None:
        return 0
    row = tx.one("SELECT COALESCE(MAX(version), 0) FROM schema_migrations")
    return 0 if row is None else int(row[0])


def _apply(tx: Tx, version: int, script: str) -> None:
    if tx.one("SELECT 1 FROM schema_migrations WHERE version = ?", (version,)) is not None:
        return
    for statement in split_statements(script):
        tx.execute(statement)
    tx.execute(
        "INSERT INTO schema_migrations (version, applied_at) VALUES (?, strftime('%s','now'))",
        (version,),
    )
