"""PostgreSQL storage (asyncpg): what several gateway replicas share.

A hold is one statement: a conditional ``UPDATE`` of the account row
(``… WHERE balance - held >= amount``) and the hold's ``INSERT`` in one round trip.
Concurrent holds on one account queue on the row lock and each re-checks the condition
against the committed row, so no interleaving can overdraw. Migrations run under an
advisory lock, so replicas starting together apply each one once.
"""

from __future__ import annotations

import asyncpg

from sluice.core.principal import NO_POLICY, KeyPolicy, Principal, policy_from_json, policy_json
from sluice.errors import ConfigError, ConflictError, NotFoundError
from sluice.storage.base import (
    KEY_SPENT_SQL,
    KEY_USED_SQL,
    RECONCILE_SUMS,
    Account,
    ConstraintViolationError,
    HoldRequest,
    KeyBudget,
    KeyInfo,
    Mismatch,
    Settlement,
    key_budget_error,
    mismatches,
    one_key,
)
from sluice.storage.migrations import migration_scripts
from sluice.storage.postgres.requests import PostgresRequests

_KEY_COLUMNS = "id, account_id, prefix, name, created_at, revoked_at, policy"
_MIGRATION_LOCK = 0x5111CE  # advisory lock id taken while migrating
_KEY_LOCK = 0x5111CF  # advisory lock class of a key's budgeted holds


def _key_from(row: asyncpg.Record) -> KeyInfo:
    return KeyInfo(row[0], row[1], row[2], row[3], row[4], row[5], policy_from_json(row[6]))


_ACCOUNT = (
    "a.id, a.name, a.metered, a.is_dev, a.balance, a.held, "
    "(SELECT COUNT(*) FROM holds h WHERE h.account_id = a.id AND h.released_at IS NULL), "
    "a.created_at"
)
_PLACE_HOLD = (
    "WITH held AS (UPDATE accounts SET held = held + $5 "
    "  WHERE id = $2 AND balance - held >= $5 RETURNING id), "
    "ins AS (INSERT INTO holds (id, account_id, key_id, request_id, amount, created_at, "
    "  expires_at) SELECT $1, id, $3, $4, $5, $6, $7 FROM held RETURNING 1) "
    "SELECT count(*) FROM ins"
)


def _hold_args(hold: HoldRequest) -> tuple[object, ...]:
    return (
        hold.hold_id,
        hold.account_id,
        hold.key_id,
        hold.request_id,
        hold.amount,
        hold.now,
        hold.expires_at,
    )


_SETTLE_BATCH = """
WITH s AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[],
                         $6::bigint[], $7::text[], $8::text[])
                  AS t(hold_id, account_id, key_id, request_id, charge, now, model, provider)
), entries AS (
    INSERT INTO ledger (account_id, key_id, request_id, kind, amount, created_at, model,
                        provider)
    SELECT account_id, key_id, request_id, 'charge', -charge, now, model, provider FROM s
    ON CONFLICT (request_id) WHERE kind = 'charge' DO NOTHING
    RETURNING request_id
), fresh AS (
    SELECT s.* FROM s JOIN entries USING (request_id)
), released AS (
    UPDATE holds SET released_at = f.now, charged = f.charge FROM fresh f
    WHERE holds.id = f.hold_id AND holds.released_at IS NULL
    RETURNING holds.account_id, holds.amount
), charges AS (
    SELECT account_id, SUM(charge) AS total FROM fresh GROUP BY account_id
), releases AS (
    SELECT account_id, SUM(amount) AS total FROM released GROUP BY account_id
)
UPDATE accounts a SET balance = a.balance - c.total, held = a.held - COALESCE(r.total, 0)
FROM charges c LEFT JOIN releases r USING (account_id)
WHERE a.id = c.account_id
"""


def _account(row: asyncpg.Record) -> Account:
    return Account(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7])


class PostgresStore(PostgresRequests):
    def __init__(self, dsn: str, *, min_size: int = 1, max_size: int = 10) -> None:
        self._dsn = dsn
        self._min = min_size
        self._max = max_size
        self._pool: asyncpg.Pool | None = None

    async def open(self) -> None:
        try:
            self._pool = await asyncpg.create_pool(
                self._dsn, min_size=self._min, max_size=self._max
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
            "SELECT a.id, a.name, k.id, k.prefix, a.metered, a.is_dev, k.policy "
            "FROM api_keys k JOIN accounts a ON a.id = k.account_id "
            "WHERE k.key_digest = $1 AND k.revoked_at IS NULL",
            key_digest,
        )
        if row is None:
            return None
        policy = policy_from_json(row[6])
        return Principal(row[0], row[1], row[2], row[3], row[4], row[5], policy)

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
        self, account_id: str, name: str, *, metered: bool, credits: int, now: int
    ) -> Account:
        async with self.pool.acquire() as conn, conn.transaction():
            try:
                await conn.execute(
                    "INSERT INTO accounts (id, name, metered, is_dev, balance, created_at) "
                    "VALUES ($1, $2, $3, FALSE, $4, $5)",
                    account_id,
                    name,
                    metered,
                    credits,
                    now,
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

    async def add_credits(self, name: str, amount: int, *, now: int, note: str) -> Account:
        async with self.pool.acquire() as conn, conn.transaction():
            account_id = await conn.fetchval(
                "UPDATE accounts SET balance = balance + $1 WHERE name = $2 RETURNING id",
                amount,
                name,
            )
            if account_id is None:
                raise NotFoundError(f"No account named '{name}'.", code="account_not_found")
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

    async def list_keys(self, account_id: str) -> list[KeyInfo]:
        rows = await self.pool.fetch(
            f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE account_id = $1 ORDER BY created_at, id",
            account_id,
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

    async def rotate_key(self, key_id: str, *, key_digest: str, prefix: str) -> None:
        await self.pool.execute(
            "UPDATE api_keys SET key_digest = $1, prefix = $2 WHERE id = $3",
            key_digest,
            prefix,
            key_id,
        )

    async def key_spent(self, key_id: str, since: int) -> int:
        spent = await self.pool.fetchval(KEY_SPENT_SQL.format("$1", "$2"), key_id, since)
        return int(spent)

    async def update_key(self, key_id: str, *, name: str | None, policy: KeyPolicy) -> None:
        await self.pool.execute(
            "UPDATE api_keys SET name = $1, policy = $2 WHERE id = $3",
            name,
            policy_json(policy),
            key_id,
        )

    async def revoke_keys(self, prefix: str, now: int) -> int:
        status = await self.pool.execute(
            "UPDATE api_keys SET revoked_at = $1 "
            "WHERE revoked_at IS NULL AND left(prefix, $2) = $3",
            now,
            len(prefix),
            prefix,
        )
        return int(status.split()[-1])

    # -- holds and the ledger ----------------------------------------------------------

    async def place_hold(self, hold: HoldRequest) -> bool:
        if hold.key_budget is not None:
            return await self._place_budgeted_hold(hold, hold.key_budget)
        return bool(await self.pool.fetchval(_PLACE_HOLD, *_hold_args(hold)))

    async def _place_budgeted_hold(self, hold: HoldRequest, budget: KeyBudget) -> bool:
        """Under a transaction lock on the key: its holds are placed one at a time, by
        every process sharing the database."""
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "SELECT pg_advisory_xact_lock($1, hashtext($2))", _KEY_LOCK, hold.key_id
            )
            used = await conn.fetchval(KEY_USED_SQL.format("$1", "$2"), hold.key_id, budget.since)
            if int(used) + hold.amount > budget.limit:
                raise key_budget_error(budget.limit)
            return bool(await conn.fetchval(_PLACE_HOLD, *_hold_args(hold)))

    async def settle(self, settlements: list[Settlement]) -> None:
        """A whole batch in one statement: ledger entries (a request already charged is
        skipped by the unique index), the holds released, each account's balance and
        held amount moved by its sums."""
        # Within one batch a request settles once, the first time (as on SQLite, whose
        # INSERT OR IGNORE keeps the first); the index guards across batches.
        first: dict[str, Settlement] = {}
        for s in settlements:
            first.setdefault(s.request_id, s)
        unique = list(first.values())
        try:
            await self.pool.execute(
                _SETTLE_BATCH,
                [s.hold_id for s in unique],
                [s.account_id for s in unique],
                [s.key_id for s in unique],
                [s.request_id for s in unique],
                [s.charge for s in unique],
                [s.now for s in unique],
                [s.model for s in unique],
                [s.provider for s in unique],
            )
        except asyncpg.IntegrityConstraintViolationError as exc:
            raise ConstraintViolationError(str(exc)) from None

    async def reclaim_expired(self, now: int) -> int:
        async with self.pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(
                "WITH expired AS (UPDATE holds SET released_at = $1, charged = 0 "
                "  WHERE released_at IS NULL AND expires_at <= $1 "
                "  RETURNING account_id, amount) "
                "SELECT account_id, SUM(amount)::bigint, COUNT(*) FROM expired GROUP BY account_id",
                now,
            )
            await conn.executemany(
                "UPDATE accounts SET held = held - $1 WHERE id = $2",
                [(total, account) for account, total, _ in rows],
            )
        return sum(int(count) for _, _, count in rows)

    async def reconcile(self) -> list[Mismatch]:
        rows = await self.pool.fetch(
            f"SELECT a.name, a.balance, {RECONCILE_SUMS} FROM accounts a ORDER BY a.name"
        )
        return mismatches([(row[0], *(int(v) for v in row[1:])) for row in rows])

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
