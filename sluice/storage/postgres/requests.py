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
from sluice.storage.postgres.responses import PostgresResponses
from sluice.storage.request_log import MAX_EXAMINED
from sluice.storage.request_query import Page, all_pages, page_of, page_query
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


class PostgresRequests(PostgresResponses):
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

    async def request_page(
        self,
        filters: RequestFilters,
        limit: int,
        after: RequestPosition | None,
        examine: int = MAX_EXAMINED,
    ) -> Page:
        sql, args = page_query(POSTGRES, filters, limit, after, examine)
        return page_of(await self.pool.fetch(sql, *args), limit, examine)

    async def list_requests(
        self, filters: RequestFilters, limit: int, after: RequestPosition | None
    ) -> list[RequestRecord]:
        return await all_pages(self.request_page, filters, limit, after)

    async def request_log_cutoff(self, keep: int) -> RequestPosition | None:
        row = await self.pool.fetchrow(
            "SELECT created_at, id FROM request_log ORDER BY created_at DESC, id DESC "
            "LIMIT 1 OFFSET $1",
            keep - 1,
        )
        return None if row is None else (int(row[0]), str(row[1]))

    async def prune_requests(self, before: RequestPosition, limit: int) -> int:
        # SKIP LOCKED: replicas pruning at once each take rows the others have not
        status = await self.pool.execute(
            "DELETE FROM request_log WHERE id IN (SELECT id FROM request_log "
            "WHERE (created_at, id) < ($1, $2) ORDER BY created_at, id LIMIT $3 "
            "FOR UPDATE SKIP LOCKED)",
            *before,
            limit,
        )
        return int(status.split()[-1])

    async def spend(
        self, filters: SpendFilters, by: SpendBy, limit: int, after: SpendAfter | None
    ) -> tuple[list[SpendGroup], SpendTotal]:
        sql, args = spend_groups_query(POSTGRES, filters, by, limit, after)
        groups, total = spend_page(await self.pool.fetch(sql, *args), after, limit)
        if total is None:
            sql, args = spend_total_query(POSTGRES, filters)
            total = spend_total(await self.pool.fetchrow(sql, *args))
        return groups, total
