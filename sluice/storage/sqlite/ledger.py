"""Credit holds, settlements and the ledger on SQLite (one writer at a time)."""

from __future__ import annotations

import sqlite3

from sluice.storage.base import ConstraintViolationError, HoldRequest, Settlement
from sluice.storage.budgets import (
    ACCOUNT_USED_SQL,
    KEY_USED_SQL,
    account_budget_error,
    key_budget_error,
)
from sluice.storage.reconcile import RECONCILE_SUMS, Mismatch, mismatches
from sluice.storage.reserves import ReserveChange, ReserveRequest
from sluice.storage.sqlite import settling
from sluice.storage.sqlite.connection import SqliteBase, Tx


def _reserve(tx: Tx, grow: ReserveRequest) -> int | None:
    row = tx.one("SELECT released_at FROM holds WHERE id = ?", (grow.hold_id,))
    if row is not None and row[0] is not None:
        return None
    available = tx.one("SELECT balance - held FROM accounts WHERE id = ?", (grow.account_id,))
    if available is None or int(available[0]) < grow.need:
        return 0
    amount = min(grow.want, int(available[0]))
    tx.execute("UPDATE accounts SET held = held + ? WHERE id = ?", (amount, grow.account_id))
    if row is None:
        tx.execute(
            "INSERT INTO holds (id, account_id, key_id, request_id, amount, created_at, "
            "expires_at) VALUES (?, ?, '', ?, ?, ?, ?)",
            (grow.hold_id, grow.account_id, grow.hold_id, amount, grow.now, grow.expires_at),
        )
    else:
        tx.execute(
            "UPDATE holds SET amount = amount + ?, expires_at = ? WHERE id = ?",
            (amount, grow.expires_at, grow.hold_id),
        )
    return amount


def _tend(tx: Tx, changes: list[ReserveChange]) -> list[str]:
    gone = []
    for c in changes:
        row = tx.one("SELECT amount FROM holds WHERE id = ? AND released_at IS NULL", (c.hold_id,))
        if row is None:
            gone.append(c.hold_id)
            continue
        release = int(row[0]) if c.close else min(c.release, int(row[0]))
        tx.execute(
            "UPDATE holds SET amount = amount - ?, expires_at = ?, released_at = ?, "
            "charged = ? WHERE id = ?",
            (
                0 if c.close else release,
                c.expires_at,
                c.now if c.close else None,
                0 if c.close else None,
                c.hold_id,
            ),
        )
        tx.execute("UPDATE accounts SET held = held - ? WHERE id = ?", (release, c.account_id))
    return gone


def _reclaim(tx: Tx, now: int) -> int:
    rows = tx.all(
        "SELECT account_id, SUM(amount), COUNT(*) FROM holds "
        "WHERE released_at IS NULL AND expires_at <= ? GROUP BY account_id",
        (now,),
    )
    if not rows:
        return 0
    tx.execute(
        "UPDATE holds SET released_at = ?, charged = 0 "
        "WHERE released_at IS NULL AND expires_at <= ?",
        (now, now),
    )
    tx.many(
        "UPDATE accounts SET held = held - ? WHERE id = ?",
        [(total, account) for account, total, _ in rows],
    )
    return sum(int(count) for _, _, count in rows)


class SqliteLedger(SqliteBase):
    async def place_hold(self, hold: HoldRequest) -> bool:
        def work(tx: Tx) -> bool:
            budget = hold.key_budget
            if budget is not None:  # the writer lock serializes every hold
                row = tx.one(
                    KEY_USED_SQL.format("?", "?"), (hold.key_id, hold.key_id, budget.since)
                )
                if row is not None and int(row[0]) + hold.amount > budget.limit:
                    raise key_budget_error(budget.limit, int(row[0]), hold.amount)
            budget = hold.account_budget
            if budget is not None:
                args = (hold.account_id, budget.since, hold.account_id)
                row = tx.one(ACCOUNT_USED_SQL.format("?", "?"), args)
                if row is not None and int(row[0]) + hold.amount > budget.limit:
                    raise account_budget_error(budget.limit, int(row[0]), hold.amount)
            if not tx.execute(
                "UPDATE accounts SET held = held + ? WHERE id = ? AND balance - held >= ?",
                (hold.amount, hold.account_id, hold.amount),
            ):
                return False
            tx.execute(
                "INSERT INTO holds (id, account_id, key_id, request_id, amount, created_at, "
                "expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    hold.hold_id,
                    hold.account_id,
                    hold.key_id,
                    hold.request_id,
                    hold.amount,
                    hold.now,
                    hold.expires_at,
                ),
            )
            return True

        return await self.write(work)

    async def settle(self, settlements: list[Settlement]) -> None:
        try:
            await self.write(lambda tx: settling.settle(tx, settlements))
        except sqlite3.IntegrityError as exc:
            raise ConstraintViolationError(str(exc)) from None

    async def reclaim_expired(self, now: int) -> int:
        return await self.write(lambda tx: _reclaim(tx, now))

    async def reserve(self, grow: ReserveRequest) -> int | None:
        return await self.write(lambda tx: _reserve(tx, grow))

    async def tend_reserves(self, changes: list[ReserveChange]) -> list[str]:
        return await self.write(lambda tx: _tend(tx, changes))

    async def open_holds(self) -> tuple[int, int]:
        row = await self.one(
            "SELECT COUNT(*), COALESCE(SUM(amount), 0) FROM holds WHERE released_at IS NULL"
        )
        return (0, 0) if row is None else (int(row[0]), int(row[1]))

    async def reconcile(self) -> list[Mismatch]:
        rows = await self.all(
            f"SELECT a.name, a.balance, {RECONCILE_SUMS} FROM accounts a ORDER BY a.name"
        )
        return mismatches([tuple(row) for row in rows])
