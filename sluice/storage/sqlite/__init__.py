"""SQLite storage: the embedded default."""

from sluice.storage.sqlite.accounts import SqliteAccounts
from sluice.storage.sqlite.connection import sqlite_path
from sluice.storage.sqlite.ledger import SqliteLedger
from sluice.storage.sqlite.requests import SqliteRequests


class SqliteStore(SqliteAccounts, SqliteLedger, SqliteRequests):
    """Accounts, keys, holds, ledger and request log in one SQLite file."""


__all__ = ("SqliteStore", "sqlite_path")
