"""The embedded default: one SQLite file (WAL), reached through aiosqlite's worker thread."""

from __future__ import annotations

import sqlite3
from importlib import resources
from pathlib import Path

import aiosqlite

from sluice.errors import ConfigError
from sluice.storage.base import Principal

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


class SqliteStore:
    def __init__(self, path: Path) -> None:
        self._path = path
        self._db: aiosqlite.Connection | None = None

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
        await self._db.execute("PRAGMA foreign_keys=ON")
        await self._db.execute("PRAGMA busy_timeout=5000")

    async def close(self) -> None:
        if self._db is not None:
            await self._db.close()
            self._db = None

    async def migrate(self) -> None:
        db = self.db
        await db.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations "
            "(version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)"
        )
        for version, script in migration_scripts(_MIGRATIONS_PACKAGE):
            await db.execute("BEGIN IMMEDIATE")
            try:
                async with db.execute(
                    "SELECT 1 FROM schema_migrations WHERE version = ?", (version,)
                ) as cur:
                    done = await cur.fetchone()
                if done is None:
                    for statement in _statements(script):
                        await db.execute(statement)
                    await db.execute(
                        "INSERT INTO schema_migrations (version, applied_at) "
                        "VALUES (?, strftime('%s','now'))",
                        (version,),
                    )
                await db.execute("COMMIT")
            except BaseException:
                await db.execute("ROLLBACK")
                raise

    async def find_principal(self, key_digest: str) -> Principal | None:
        async with self.db.execute(
            "SELECT a.id, a.name, k.id, k.prefix, a.metered, a.is_dev "
            "FROM api_keys k JOIN accounts a ON a.id = k.account_id "
            "WHERE k.key_digest = ? AND k.revoked_at IS NULL",
            (key_digest,),
        ) as cur:
            row = await cur.fetchone()
        if row is None:
            return None
        return Principal(row[0], row[1], row[2], row[3], bool(row[4]), bool(row[5]))

    async def ensure_account(
        self, account_id: str, name: str, *, metered: bool, is_dev: bool, now: int
    ) -> str:
        await self.db.execute(
            "INSERT INTO accounts (id, name, metered, is_dev, created_at) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT(name) DO NOTHING",
            (account_id, name, int(metered), int(is_dev), now),
        )
        async with self.db.execute("SELECT id FROM accounts WHERE name = ?", (name,)) as cur:
            row = await cur.fetchone()
        assert row is not None
        return str(row[0])

    async def add_key(
        self,
        key_id: str,
        *,
        account_id: str,
        key_digest: str,
        prefix: str,
        name: str | None,
        now: int,
    ) -> None:
        await self.db.execute(
            "INSERT INTO api_keys (id, account_id, prefix, key_digest, name, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(key_digest) DO NOTHING",
            (key_id, account_id, prefix, key_digest, name, now),
        )


def _statements(script: str) -> list[str]:
    """Split a migration on ``;`` at line ends (our migrations hold no such literals)."""
    lines = [line for line in script.splitlines() if not line.lstrip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";\n") if s.strip().rstrip(";")]
