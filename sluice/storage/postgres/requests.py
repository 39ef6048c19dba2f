"""The request log on PostgreSQL: the record as ``jsonb``, keyed by request id and
account."""

from __future__ import annotations

import asyncpg
import msgspec

from sluice.storage.base import (
    ConstraintViolationError,
    RequestFilters,
    RequestPosition,
    RequestRecord,
)
from sluice.storage.dialect import POSTGRES
from sluice.storage.postgres.jsonb import jsonb_text
from sluice.storage.postgres.tenants import PostgresTenants
from sluice.storage.request_query import list_requests_query
from sluice.storage.spend import (
    SpendAfter,
    SpendBy,
    SpendFilters,
    SpendGroup,
    SpendTotal,
    spend_groups_query,
    spend_page,
    spend_total,
    spend_total_query,
)

_RECORD = msgspec.json.Decoder(RequestRecord)


class PostgresRequests(PostgresTenants):
    async def write_requests(self, records: list[RequestRecord]) -> None:
        try:
            await self.pool.executemany(
                "INSERT INTO request_log (id, account_id, created_at, record) "
                "VALUES ($1, $2, $3, $4::jsonb) ON CONFLICT (id) DO UPDATE SET record = "
                "EXCLUDED.record",
                [(r.id, r.account_id, r.created_at, jsonb_text(r)) for r in records],
            )
        except asyncpg.DataError as exc:
            raise ConstraintViolationError(str(exc)) from None

    async def get_request(self, request_id: str, account_id: str) -> RequestRecord | None:
        raw = await self.pool.fetchval(
            "SELECT record::text FROM request_log WHERE id = $1 AND account_id = $2",
            request_id,
            account_id,
        )
        return None if raw is None else _RECORD.decode(raw)

    async def list_requests(
        self, filters: RequestFilters, limit: int, after: RequestPosition | None
    ) -> list[RequestRecord]:
        sql, args = list_requests_query(POSTGRES, filters, limit, after)
        return [_RECORD.decode(row[0]) for row in await self.pool.fetch(sql, *args)]

    async def spend(
        self, filters: SpendFilters, by: SpendBy, limit: int, after: SpendAfter | None
    ) -> tuple[list[SpendGroup], SpendTotal]:
        sql, args = spend_groups_query(POSTGRES, filters, by, limit, after)
        groups, total = spend_page(await self.pool.fetch(sql, *args), after, limit)
        if total is None:
            sql, args = spend_total_query(POSTGRES, filters)
            total = spend_total(await self.pool.fetchrow(sql, *args))
        return groups, total
