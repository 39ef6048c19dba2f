"""Stored responses on PostgreSQL: the response and its items as text (``jsonb`` would
reorder the keys of what a client is to get back as it was answered)."""

from __future__ import annotations

import asyncpg

from sluice.storage.base import ConstraintViolationError
from sluice.storage.postgres.tenants import PostgresTenants
from sluice.storage.responses import COLUMNS, StoredResponse, row_of, stored_from_row


class PostgresResponses(PostgresTenants):
    async def save_responses(self, responses: list[StoredResponse]) -> None:
        try:
            await self._insert(responses)
        except asyncpg.DataError as exc:
            raise ConstraintViolationError(str(exc)) from None

    async def _insert(self, responses: list[StoredResponse]) -> None:
        await self.pool.executemany(
            f"INSERT INTO responses ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6) "
            "ON CONFLICT (id) DO UPDATE SET response = EXCLUDED.response, items = EXCLUDED.items",
            [row_of(r) for r in responses],
        )

    async def get_response(self, response_id: str, account_id: str) -> StoredResponse | None:
        row = await self.pool.fetchrow(
            f"SELECT {COLUMNS} FROM responses WHERE id = $1 AND account_id = $2",
            response_id,
            account_id,
        )
        return None if row is None else stored_from_row(row)

    async def delete_response(self, response_id: str, account_id: str) -> bool:
        status = await self.pool.execute(
            "DELETE FROM responses WHERE id = $1 AND account_id = $2", response_id, account_id
        )
        return int(status.split()[-1]) > 0

    async def prune_responses(self, before: int, limit: int) -> int:
        status = await self.pool.execute(
            "DELETE FROM responses WHERE id IN (SELECT id FROM responses "
            "WHERE created_at < $1 ORDER BY created_at, id LIMIT $2 FOR UPDATE SKIP LOCKED)",
            before,
            limit,
        )
        return int(status.split()[-1])
