"""Accounts and API keys on SQLite."""

from __future__ import annotations

import sqlite3
from types import MappingProxyType
from typing import Final

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
from sluice.errors import ConflictError, NotFoundError
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
from sluice.storage.sqlite.connection import Row, SqliteBase, Tx

ACCOUNT_COLUMNS = (
    "a.id, a.name, a.metered, a.is_dev, a.balance, a.held, "
    "(SELECT COUNT(*) FROM holds h WHERE h.account_id = a.id AND h.released_at IS NULL), "
    "a.created_at, a.policy"
)


def account_from(row: Row) -> Account:
    return Account(
        row[0],
        row[1],
        bool(row[2]),
        bool(row[3]),
        row[4],
        row[5],
        row[6],
        row[7],
        account_policy_from_json(row[8]),
    )


_KEY_COLUMNS = "id, account_id, prefix, name, created_at, revoked_at, policy"
_NAMED_BY: Final = MappingProxyType(
    {
        "prefix": "substr(prefix, 1, length(?2)) = ?2",
        "digest": "key_digest = ?2",
        "id": "id = ?2",
    }
)
"""What each kind of :class:`KeySelector` matches (``?2`` its value, ``?1`` the time)."""


def _key_from(row: Row) -> KeyInfo:
    return KeyInfo(row[0], row[1], row[2], row[3], row[4], row[5], policy_from_json(row[6]))


def account_by_id(tx: Tx, account_id: str) -> Account:
    row = tx.one(f"SELECT {ACCOUNT_COLUMNS} FROM accounts a WHERE a.id = ?", (account_id,))
    assert row is not None
    return account_from(row)


class SqliteAccounts(SqliteBase):
    async def find_principal(self, key_digest: str) -> Principal | None:
        row = await self.one(
            "SELECT a.id, a.name, k.id, k.prefix, a.metered, a.is_dev, k.policy, a.policy "
            "FROM api_keys k JOIN accounts a ON a.id = k.account_id "
            "WHERE k.key_digest = ? AND k.revoked_at IS NULL",
            (key_digest,),
        )
        if row is None:
            return None
        return Principal(
            row[0],
            row[1],
            row[2],
            row[3],
            bool(row[4]),
            bool(row[5]),
            policy_from_json(row[6]),
            account_policy_from_json(row[7]),
        )

    async def ensure_account(
        self, account_id: str, name: str, *, metered: bool, is_dev: bool, now: int
    ) -> str:
        def work(tx: Tx) -> str:
            tx.execute(
                "INSERT INTO accounts (id, name, metered, is_dev, created_at) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT(name) DO NOTHING",
                (account_id, name, int(metered), int(is_dev), now),
            )
            row = tx.one("SELECT id FROM accounts WHERE name = ?", (name,))
            assert row is not None
            return str(row[0])

        return await self.write(work)

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
        def work(tx: Tx) -> Account:
            try:
                tx.execute(
                    "INSERT INTO accounts (id, name, metered, is_dev, balance, created_at, "
                    "policy) VALUES (?, ?, ?, 0, ?, ?, ?)",
                    (account_id, name, int(metered), credits, now, policy_json(policy)),
                )
            except sqlite3.IntegrityError:
                raise ConflictError(f"An account named '{name}' exists already.") from None
            tx.execute(
                "INSERT INTO ledger (account_id, kind, amount, created_at, note) "
                "VALUES (?, 'credit', ?, ?, 'opening credits')",
                (account_id, credits, now),
            )
            return account_by_id(tx, account_id)

        return await self.write(work)

    async def get_account(self, name: str) -> Account | None:
        row = await self.one(f"SELECT {ACCOUNT_COLUMNS} FROM accounts a WHERE a.name = ?", (name,))
        return None if row is None else account_from(row)

    async def change_account(self, account_id: str, change: AccountChange) -> AccountPolicy | None:
        def work(tx: Tx) -> AccountPolicy | None:
            row = tx.one("SELECT policy FROM accounts WHERE id = ?", (account_id,))
            if row is None:
                return None
            policy = change(account_policy_from_json(row[0]))
            tx.execute(
                "UPDATE accounts SET policy = ? WHERE id = ?", (policy_json(policy), account_id)
            )
            return policy

        return await self.write(work)

    async def add_credits(self, name: str, amount: int, *, now: int, note: str) -> Account:
        def work(tx: Tx) -> Account:
            found = tx.one("SELECT id, balance FROM accounts WHERE name = ?", (name,))
            if found is None:
                raise NotFoundError(f"No account named '{name}'.", code="account_not_found")
            if balance_out_of_range(found[1], amount):
                raise balance_limit_error()
            tx.execute("UPDATE accounts SET balance = balance + ? WHERE id = ?", (amount, found[0]))
            tx.execute(
                "INSERT INTO ledger (account_id, kind, amount, created_at, note) "
                "VALUES (?, 'credit', ?, ?, ?)",
                (found[0], amount, now, note),
            )
            return account_by_id(tx, found[0])

        return await self.write(work)

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
        await self.write(
            lambda tx: tx.execute(
                "INSERT INTO api_keys "
                "(id, account_id, prefix, key_digest, name, created_at, policy) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(key_digest) DO NOTHING",
                (key_id, account_id, prefix, key_digest, name, now, policy_json(policy)),
            )
        )

    async def list_keys(
        self, account_id: str, limit: int | None = None, after: KeyPosition | None = None
    ) -> list[KeyInfo]:
        start = after or (-1, "")
        rows = await self.all(
            f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE account_id = ? "
            "AND (created_at, id) > (?, ?) ORDER BY created_at, id LIMIT ?",
            (account_id, *start, -1 if limit is None else limit),
        )
        return [_key_from(row) for row in rows]

    async def find_key(self, prefix: str) -> KeyInfo | None:
        rows = await self.all(
            f"SELECT {_KEY_COLUMNS} FROM api_keys "
            "WHERE revoked_at IS NULL AND substr(prefix, 1, ?) = ? LIMIT 2",
            (len(prefix), prefix),
        )
        return one_key(prefix, [_key_from(row) for row in rows])

    async def rotate_key(self, key_id: str, *, key_digest: str, prefix: str, was: str) -> bool:
        changed = await self.write(
            lambda tx: tx.execute(
                "UPDATE api_keys SET key_digest = ?, prefix = ? "
                "WHERE id = ? AND prefix = ? AND revoked_at IS NULL",
                (key_digest, prefix, key_id, was),
            )
        )
        return changed == 1

    async def key_spent(self, key_id: str, since: int) -> int:
        row = await self.one(KEY_SPENT_SQL.format("?", "?"), (key_id, since))
        return 0 if row is None else int(row[0])

    async def change_key(
        self, key_id: str, change: KeyChange
    ) -> tuple[str | None, KeyPolicy] | None:
        def work(tx: Tx) -> tuple[str | None, KeyPolicy] | None:
            row = tx.one("SELECT name, policy FROM api_keys WHERE id = ?", (key_id,))
            if row is None:
                return None
            name, policy = change(row[0], policy_from_json(row[1]))
            tx.execute(
                "UPDATE api_keys SET name = ?, policy = ? WHERE id = ?",
                (name, policy_json(policy), key_id),
            )
            return name, policy

        return await self.write(work)

    async def revoke_keys(self, which: KeySelector, now: int) -> list[KeyInfo]:
        rows = await self.write(
            lambda tx: tx.all(
                "UPDATE api_keys SET revoked_at = ?1 "
                f"WHERE revoked_at IS NULL AND {_NAMED_BY[which.by]} "
                f"RETURNING {_KEY_COLUMNS}",
                (now, which.value),
            )
        )
        return [_key_from(row) for row in rows]

    async def list_accounts(self, limit: int, after: str | None) -> list[Account]:
        rows = await self.all(
            f"SELECT {ACCOUNT_COLUMNS} FROM accounts a WHERE a.id > ? ORDER BY a.id LIMIT ?",
            (after or "", limit),
        )
        return [account_from(row) for row in rows]
