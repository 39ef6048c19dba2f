"""SQLite storage: the embedded default."""

from sluice.storage.sqlite.accounts import SqliteAccounts
from sluice.storage.sqlite.connection import sqlite_path
from sluice.storage.sqlite.ledger import SqliteLedger
from sluice.storage.sqlite.requests import SqliteRequests
from sluice.storage.sqlite.tenants import SqliteTenants


class SqliteStore(SqliteAccounts, SqliteLedger, SqliteRequests, SqliteTenants):
    """Accounts, keys, holds, ledger and request log in one SQLite file."""


__all__ = ("SqliteStore", "sqlite_path")
