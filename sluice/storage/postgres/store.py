"""PostgreSQL storage (asyncpg): what several gateway replicas share.

Holds and the ledger are in :mod:`~sluice.storage.postgres.holds`. Migrations run under
an advisory lock, so replicas starting together apply each one once.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Final

import asyncpg

from sluice.core.money import balance_out_of_range
from sluice.core.principal import (
    NO_ACCOUNT_POLICY,
    NO_POLICY,
    AccountPolicy,
    KeyPolicy,
    Principal,
    account_policy_from_json,
    policy_from_json,
    policy_json,
)
from sluice.errors import ConfigError, ConflictError, NotFoundError
from sluice.storage.base import (
    Account,
    AccountChange,
    KeyChange,
    KeyInfo,
    KeyPosition,
    KeySelector,
    balance_limit_error,
    one_key,
)
from sluice.storage.budgets import KEY_SPENT_SQL
from sluice.storage.migrations import migration_scripts
from sluice.storage.postgres.holds import PostgresHolds

_KEY_COLUMNS = "id, account_id, prefix, name, created_at, revoked_at, policy"
_MIGRATION_LOCK = 0x5111CE  # advisory lock id taken while migrating
_NAMED_BY: Final = MappingProxyType(
    {
        "prefix": "left(prefix, length($2)) = $2",
        "digest": "key_digest = $2",
        "id": "id = $2",
    }
)
"""What each kind of :class:`KeySelector` matches (``$2`` its value, ``$1`` the time)."""


def _key_from(row: asyncpg.Record) -> KeyInfo:
    return KeyInfo(row[0], row[1], row[2], row[3], row[4], row[5], policy_from_json(row[6]))


_ACCOUNT = (
    "a.id, a.name, a.metered, a.is_dev, a.balance, a.held, "
    "(SELECT COUNT(*) FROM holds h WHERE h.account_id = a.id AND h.released_at IS NULL), "
    "a.created_at, a.policy"
)


def _account(row: asyncpg.Record) -> Account:
    policy = account_policy_from_json(row[8])
    return Account(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7], policy)


class _Connection(asyncpg.Connection):
    """Nothing to reset between borrowers: no session settings, no LISTEN, no cursors
    or advisory locks outlive a transaction here. asyncpg's default reset is a round
    trip on every release, as many as the queries themselves."""

    def get_reset_query(self) -> str:
        return ""


class PostgresStore(PostgresHolds):
    def __init__(self, dsn: str, *, min_size: int = 1, max_size: int = 10) -> None:
        self._dsn = dsn
        self._min = min_size
        self._max = max_size
        self._pool: asyncpg.Pool | None = None

    async def open(self) -> None:
        try:
            self._pool = await asyncpg.create_pool(
                self._dsn, min_size=self._min, max_size=self._max, connection_class=_Connection
            )
        except (OSError, asyncpg.PostgresError) as exc:
            raise ConfigError(f"cannot connect to PostgreSQL: {exc}") from None

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    async def migrate(self) -> None:
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _MIGRATION_LOCK)
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations "
                "(version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)"
            )
            done = {r[0] for r in await conn.fetch("SELECT version FROM schema_migrations")}
            for version, script in migration_scripts("postgres"):
                if version in done:
                    continue
                await conn.execute(script)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, applied_at) "
                    "VALUES ($1, extract(epoch FROM now())::bigint)",
                    version,
                )

    # -- accounts and keys -------------------------------------------------------------

    async def find_principal(self, key_digest: str) -> Principal | None:
        row = await self.pool.fetchrow(
            "SELECT a.id, a.name, k.id, k.prefix, a.metered, a.is_dev, k.policy, a.policy "
            "FROM api_keys k JOIN accounts a ON a.id = k.account_id "
            "WHERE k.key_digest = $1 AND k.revoked_at IS NULL",
            key_digest,
        )
        if row is None:
            return None
        policies = policy_from_json(row[6]), account_policy_from_json(row[7])
        return Principal(row[0], row[1], row[2], row[3], row[4], row[5], *policies)

    async def ensure_account(
        self, account_id: str, name: str, *, metered: bool, is_dev: bool, now: int
    ) -> str:
        await self.pool.execute(
            "INSERT INTO accounts (id, name, metered, is_dev, created_at) "
            "VALUES ($1, $2, $3, $4, $5) ON CONFLICT (name) DO NOTHING",
            account_id,
            name,
            metered,
            is_dev,
            now,
        )
        found: str = await self.pool.fetchval("SELECT id FROM accounts WHERE name = $1", name)
        return found

    async def create_account(
        self,
        account_id: str,
        name: str,
        *,
        metered: bool,
        credits: int,
        now: int,
        policy: AccountPolicy = NO_ACCOUNT_POLICY,
    ) -> Account:
        async with self.pool.acquire() as conn, conn.transaction():
            try:
                await conn.execute(
                    "INSERT INTO accounts (id, name, metered, is_dev, balance, created_at, "
                    "policy) VALUES ($1, $2, $3, FALSE, $4, $5, $6)",
                    account_id,
                    name,
                    metered,
                    credits,
                    now,
                    policy_json(policy),
                )
            except asyncpg.UniqueViolationError:
                raise ConflictError(f"An account named '{name}' exists already.") from None
            await conn.execute(
                "INSERT INTO ledger (account_id, kind, amount, created_at, note) "
                "VALUES ($1, 'credit', $2, $3, 'opening credits')",
                account_id,
                credits,
                now,
            )
            row = await conn.fetchrow(
                f"SELECT {_ACCOUNT} FROM accounts a WHERE a.id = $1", account_id
            )
        assert row is not None
        return _account(row)

    async def get_account(self, name: str) -> Account | None:
        row = await self.pool.fetchrow(f"SELECT {_ACCOUNT} FROM accounts a WHERE a.name = $1", name)
        return None if row is None else _account(row)

    async def change_account(self, account_id: str, change: AccountChange) -> AccountPolicy | None:
        async with self.pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(
                "SELECT policy FROM accounts WHERE id = $1 FOR UPDATE", account_id
            )
            if row is None:
                return None
            policy = change(account_policy_from_json(row["policy"]))
            await conn.execute(
                "UPDATE accounts SET policy = $1 WHERE id = $2", policy_json(policy), account_id
            )
            return policy

    async def add_credits(self, name: str, amount: int, *, now: int, note: str) -> Account:
        async with self.pool.acquire() as conn, conn.transaction():
            found = await conn.fetchrow(
                "SELECT id, balance FROM accounts WHERE name = $1 FOR UPDATE", name
            )
            if found is None:
                raise NotFoundError(f"No account named '{name}'.", code="account_not_found")
            account_id = found["id"]
            if balance_out_of_range(found["balance"], amount):
                raise balance_limit_error()
            await conn.execute(
                "UPDATE accounts SET balance = balance + $1 WHERE id = $2", amount, account_id
            )
            await conn.execute(
                "INSERT INTO ledger (account_id, kind, amount, created_at, note) "
                "VALUES ($1, 'credit', $2, $3, $4)",
                account_id,
                amount,
                now,
                note,
            )
            row = await conn.fetchrow(
                f"SELECT {_ACCOUNT} FROM accounts a WHERE a.id = $1", account_id
            )
        assert row is not None
        return _account(row)

    async def add_key(
        self,
        key_id: str,
        *,
        account_id: str,
        key_digest: str,
        prefix: str,
        name: str | None,
        now: int,
        policy: KeyPolicy = NO_POLICY,
    ) -> None:
        await self.pool.execute(
            "INSERT INTO api_keys "
            "(id, account_id, prefix, key_digest, name, created_at, policy) "
            "VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (key_digest) DO NOTHING",
            key_id,
            account_id,
            prefix,
            key_digest,
            name,
            now,
            policy_json(policy),
        )

    async def list_keys(
        self, account_id: str, limit: int | None = None, after: KeyPosition | None = None
    ) -> list[KeyInfo]:
        start = after or (-1, "")
        rows = await self.pool.fetch(
            f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE account_id = $1 "
            "AND (created_at, id) > ($2, $3) ORDER BY created_at, id LIMIT $4",
            account_id,
            *start,
            limit,
        )
        return [_key_from(row) for row in rows]

    async def find_key(self, prefix: str) -> KeyInfo | None:
        rows = await self.pool.fetch(
            f"SELECT {_KEY_COLUMNS} FROM api_keys "
            "WHERE revoked_at IS NULL AND left(prefix, $1) = $2 LIMIT 2",
            len(prefix),
            prefix,
        )
        return one_key(prefix, [_key_from(row) for row in rows])

    async def rotate_key(self, key_id: str, *, key_digest: str, prefix: str, was: str) -> bool:
        status = await self.pool.execute(
            "UPDATE api_keys SET key_digest = $1, prefix = $2 "
            "WHERE id = $3 AND prefix = $4 AND revoked_at IS NULL",
            key_digest,
            prefix,
            key_id,
            was,
        )
        return status.split()[-1] == "1"

    async def key_spent(self, key_id: str, since: int) -> int:
        spent = await self.pool.fetchval(KEY_SPENT_SQL.format("$1", "$2"), key_id, since)
        return int(spent)

    async def change_key(
        self, key_id: str, change: KeyChange
    ) -> tuple[str | None, KeyPolicy] | None:
        async with self.pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(
                "SELECT name, policy FROM api_keys WHERE id = $1 FOR UPDATE", key_id
            )
            if row is None:
                return None
            name, policy = change(row["name"], policy_from_json(row["policy"]))
            await conn.execute(
                "UPDATE api_keys SET name = $1, policy = $2 WHERE id = $3",
                name,
                policy_json(policy),
                key_id,
            )
            return name, policy

    async def revoke_keys(self, which: KeySelector, now: int) -> list[KeyInfo]:
        # One statement: a row a concurrent rotation holds is re-read once it commits
        # (READ COMMITTED), so the old prefix or digest no longer matches it.
        rows = await self.pool.fetch(
            "UPDATE api_keys SET revoked_at = $1 "
            f"WHERE revoked_at IS NULL AND {_NAMED_BY[which.by]} "
            f"RETURNING {_KEY_COLUMNS}",
            now,
            which.value,
        )
        return [_key_from(row) for row in rows]

    # -- the control plane -------------------------------------------------------------

    async def schema_version(self) -> int:
        async with self.pool.acquire() as conn:
            if await conn.fetchval("SELECT to_regclass('schema_migrations')") is None:
                return 0
            version = await conn.fetchval("SELECT COALESCE(MAX(version), 0) FROM schema_migrations")
        return int(version)

    async def list_accounts(self, limit: int, after: str | None) -> list[Account]:
        rows = await self.pool.fetch(
            f"SELECT {_ACCOUNT} FROM accounts a WHERE a.id > $1 ORDER BY a.id LIMIT $2",
            after or "",
            limit,
        )
        return [_account(row) for row in rows]
