"""SQLite storage: the embedded default."""

from sluice.storage.sqlite.accounts import SqliteAccounts
from sluice.storage.sqlite.connection import sqlite_path
from sluice.storage.sqlite.ledger import SqliteLedger
from sluice.storage.sqlite.requests import SqliteRequests
from sluice.storage.sqlite.responses import SqliteResponses
from sluice.storage.sqlite.tenants import SqliteTenants


class SqliteStore(SqliteAccounts, SqliteLedger, SqliteRequests, SqliteResponses, SqliteTenants):
    """Accounts, keys, holds, ledger, request log and stored responses in one SQLite
    file."""


__all__ = ("SqliteStore", "sqlite_path")
