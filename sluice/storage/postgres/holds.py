"""Credit holds, settlements and the ledger on PostgreSQL.

A hold is one statement: a conditional ``UPDATE`` of the account row
(``… WHERE balance - held >= amount``) and the hold's ``INSERT`` in one round trip.
Concurrent holds on one account queue on the row lock and each re-checks the condition
against the committed row, so no interleaving can overdraw. A budgeted hold first takes
a transaction lock on its key (an advisory lock) and on its account (the row), then
sums what the budget has used in a statement of its own, which sees every settlement
committed before the lock was granted.
"""

from __future__ import annotations

from typing import Any

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from sluice.storage.base import ConstraintViolationError, HoldRequest, Settlement
from sluice.storage.budgets import (
    ACCOUNT_USED_SQL,
    KEY_USED_SQL,
    account_budget_error,
    key_budget_error,
)
from sluice.storage.postgres.requests import PostgresRequests
from sluice.storage.reconcile import RECONCILE_SUMS, Mismatch, mismatches
from sluice.storage.reserves import ReserveChange, ReserveRequest

_KEY_LOCK = 0x5111CF  # advisory lock class of a key's budgeted holds
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


_CHARGED = """
), entries AS (
    INSERT INTO ledger (account_id, key_id, request_id, kind, amount, created_at, model,
                        provider)
    SELECT account_id, key_id, request_id, 'charge', -charge, now, model, provider FROM s
    ON CONFLICT (request_id) WHERE kind = 'charge' DO NOTHING
    RETURNING request_id
), fresh AS (
    SELECT s.* FROM s JOIN entries USING (request_id)
), """
"""Both settlements' middle: one ledger entry per request not charged before (the unique
index skips the others), and ``fresh``, the settlements that made one."""

_SETTLE_BATCH = (
    """
WITH s AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[],
                         $6::bigint[], $7::text[], $8::text[])
                  AS t(hold_id, account_id, key_id, request_id, charge, now, model, provider)
"""
    + _CHARGED
    + """released AS (
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
)


_SETTLE_RESERVED = (
    """
WITH s AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[],
                         $6::bigint[], $7::text[], $8::text[], $9::text[], $10::bigint[],
                         $11::bigint[])
                  AS t(hold_id, account_id, key_id, request_id, charge, now, model, provider,
                       reservation, held, held_at)
"""
    + _CHARGED
    + """closed AS (
    INSERT INTO holds (id, account_id, key_id, request_id, amount, created_at, expires_at,
                       released_at, charged)
    SELECT hold_id, account_id, key_id, request_id, held, held_at, now, now, charge FROM fresh
), per_reservation AS (
    SELECT reservation, SUM(charge) AS total FROM fresh GROUP BY reservation
), drawn AS (
    UPDATE holds h SET amount = h.amount - p.total FROM per_reservation p
    WHERE h.id = p.reservation AND h.released_at IS NULL
    RETURNING h.account_id, p.total
), charges AS (
    SELECT account_id, SUM(charge) AS total FROM fresh GROUP BY account_id
), draws AS (
    SELECT account_id, SUM(total) AS total FROM drawn GROUP BY account_id
)
UPDATE accounts a SET balance = a.balance - c.total, held = a.held - COALESCE(d.total, 0)
FROM charges c LEFT JOIN draws d USING (account_id)
WHERE a.id = c.account_id
"""
)
"""Settlements of holds decided in memory (:mod:`sluice.storage.reserves`): each hold
written closed, the charges drawn from their reservations (from ``held`` only while a
reservation is open)."""

_RESERVE = (
    "WITH r AS (SELECT released_at FROM holds WHERE id = $1), "
    "granted AS (UPDATE accounts a SET held = a.held + g.amount "
    "  FROM (SELECT id, LEAST($4::bigint, balance - held) AS amount FROM accounts "
    "        WHERE id = $2 AND balance - held >= $3 FOR UPDATE) g "
    "  WHERE a.id = g.id AND NOT EXISTS (SELECT 1 FROM r WHERE released_at IS NOT NULL) "
    "  RETURNING g.amount), "
    "kept AS (INSERT INTO holds (id, account_id, key_id, request_id, amount, created_at, "
    "  expires_at) SELECT $1, $2, '', $1, amount, $5, $6 FROM granted "
    "  ON CONFLICT (id) DO UPDATE SET amount = holds.amount + EXCLUDED.amount, "
    "  expires_at = EXCLUDED.expires_at RETURNING 1) "
    "SELECT (SELECT amount FROM granted), "
    "  EXISTS (SELECT 1 FROM r WHERE released_at IS NOT NULL), (SELECT count(*) FROM kept)"
)
"""One statement: grow the reservation (or open it) by what the account can give,
unless it was closed meanwhile."""


def _columns(settlements: list[Settlement]) -> list[list[object]]:
    """The columns every settlement statement takes, as arrays ($1 … $8)."""
    return [
        [s.hold_id for s in settlements],
        [s.account_id for s in settlements],
        [s.key_id for s in settlements],
        [s.request_id for s in settlements],
        [s.charge for s in settlements],
        [s.now for s in settlements],
        [s.model for s in settlements],
        [s.provider for s in settlements],
    ]


async def _place_budgeted_hold(
    conn: PoolConnectionProxy[asyncpg.Record], hold: HoldRequest
) -> bool:
    """In a transaction: each budget is checked under its lock (key, then account), so
    the budgeted holds of one key, or of one account, are placed one at a time by every
    process sharing the database."""
    budget = hold.key_budget
    if budget is not None:
        await conn.execute("SELECT pg_advisory_xact_lock($1, hashtext($2))", _KEY_LOCK, hold.key_id)
        used = await conn.fetchval(KEY_USED_SQL.format("$1", "$2"), hold.key_id, budget.since)
        if int(used) + hold.amount > budget.limit:
            raise key_budget_error(budget.limit, int(used), hold.amount)
    budget = hold.account_budget
    if budget is not None:
        await conn.execute("SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE", hold.account_id)
        used = await conn.fetchval(
            ACCOUNT_USED_SQL.format("$1", "$2"), hold.account_id, budget.since
        )
        if used is not None and int(used) + hold.amount > budget.limit:
            raise account_budget_error(budget.limit, int(used), hold.amount)
    return bool(await conn.fetchval(_PLACE_HOLD, *_hold_args(hold)))


class PostgresHolds(PostgresRequests):
    async def place_hold(self, hold: HoldRequest) -> bool:
        if hold.key_budget is None and hold.account_budget is None:
            return bool(await self.pool.fetchval(_PLACE_HOLD, *_hold_args(hold)))
        async with self.pool.acquire() as conn, conn.transaction():
            return await _place_budgeted_hold(conn, hold)

    async def settle(self, settlements: list[Settlement]) -> None:
        """A whole batch in one statement: ledger entries (a request already charged is
        skipped by the unique index), the holds released, each account's balance and
        held amount moved by its sums."""
        # Within one batch a request settles once, the first time (as on SQLite, whose
        # INSERT OR IGNORE keeps the first); the index guards across batches.
        first: dict[str, Settlement] = {}
        for s in settlements:
            first.setdefault(s.request_id, s)
        held = [s for s in first.values() if s.reservation is None]
        drawn = [s for s in first.values() if s.reservation is not None]
        statements: list[tuple[str, list[Any]]] = []
        if held:
            statements.append((_SETTLE_BATCH, _columns(held)))
        if drawn:
            extra = [[s.reservation for s in drawn], [s.held for s in drawn]]
            statements.append(
                (_SETTLE_RESERVED, [*_columns(drawn), *extra, [s.held_at for s in drawn]])
            )
        try:
            if len(statements) == 1:  # one statement is one transaction: one round trip
                await self.pool.execute(statements[0][0], *statements[0][1])
                return
            async with self.pool.acquire() as conn, conn.transaction():
                for sql, args in statements:
                    await conn.execute(sql, *args)
        except asyncpg.IntegrityConstraintViolationError as exc:
            raise ConstraintViolationError(str(exc)) from None

    async def reserve(self, grow: ReserveRequest) -> int | None:
        row = await self.pool.fetchrow(
            _RESERVE,
            grow.hold_id,
            grow.account_id,
            grow.need,
            grow.want,
            grow.now,
            grow.expires_at,
        )
        assert row is not None
        if row[1]:
            return None
        return 0 if row[0] is None else int(row[0])

    async def tend_reserves(self, changes: list[ReserveChange]) -> list[str]:
        gone = []
        async with self.pool.acquire() as conn, conn.transaction():
            for c in changes:
                released = await conn.fetchval(
                    "WITH r AS (SELECT id, CASE WHEN $5 THEN amount ELSE LEAST($2, amount) END "
                    "  AS give FROM holds WHERE id = $1 AND released_at IS NULL FOR UPDATE), "
                    "h AS (UPDATE holds SET amount = holds.amount - "
                    "  CASE WHEN $5 THEN 0 ELSE r.give END, expires_at = $3, "
                    "  released_at = CASE WHEN $5 THEN $4::bigint END, "
                    "  charged = CASE WHEN $5 THEN 0::bigint END FROM r WHERE holds.id = r.id "
                    "  RETURNING r.give) "
                    "UPDATE accounts SET held = held - h.give FROM h WHERE accounts.id = $6 "
                    "RETURNING h.give",
                    c.hold_id,
                    c.release,
                    c.expires_at,
                    c.now,
                    c.close,
                    c.account_id,
                )
                if released is None:
                    gone.append(c.hold_id)
        return gone

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

    async def open_holds(self) -> tuple[int, int]:
        row = await self.pool.fetchrow(
            "SELECT COUNT(*), COALESCE(SUM(amount), 0) FROM holds WHERE released_at IS NULL"
        )
        return (0, 0) if row is None else (int(row[0]), int(row[1]))

    async def reconcile(self) -> list[Mismatch]:
        rows = await self.pool.fetch(
            f"SELECT a.name, a.balance, {RECONCILE_SUMS} FROM accounts a ORDER BY a.name"
        )
        return mismatches([(row[0], *(int(v) for v in row[1:])) for row in rows])
