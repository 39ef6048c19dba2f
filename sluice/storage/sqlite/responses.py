"""Stored responses on SQLite: the response and its items as JSON text."""

from __future__ import annotations

from sluice.storage.responses import COLUMNS, StoredResponse, row_of, stored_from_row
from sluice.storage.sqlite.connection import SqliteBase


class SqliteResponses(SqliteBase):
    async def save_responses(self, responses: list[StoredResponse]) -> None:
        rows = [row_of(r) for r in responses]
        await self.write(
            lambda tx: tx.many(
                f"INSERT INTO responses ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) "
                "DO UPDATE SET response = excluded.response, items = excluded.items",
                rows,
            )
        )

    async def get_response(self, response_id: str, account_id: str) -> StoredResponse | None:
        row = await self.query(
            lambda tx: tx.one(
                f"SELECT {COLUMNS} FROM responses WHERE id = ? AND account_id = ?",
                (response_id, account_id),
            )
        )
        return None if row is None else stored_from_row(row)

    async def delete_response(self, response_id: str, account_id: str) -> bool:
        deleted = await self.write(
            lambda tx: tx.execute(
                "DELETE FROM responses WHERE id = ? AND account_id = ?", (response_id, account_id)
            )
        )
        return deleted > 0

    async def prune_responses(self, before: int, limit: int) -> int:
        return await self.write(
            lambda tx: tx.execute(
                "DELETE FROM responses WHERE id IN (SELECT id FROM responses "
                "WHERE created_at < ? ORDER BY created_at, id LIMIT ?)",
                (before, limit),
            )
        )
