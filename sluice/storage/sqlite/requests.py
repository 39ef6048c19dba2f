"""The request log on SQLite: the record as JSON, keyed by request id and account."""

from __future__ import annotations

import msgspec

from sluice.storage.base import RequestFilters, RequestPosition, RequestRecord
from sluice.storage.dialect import SQLITE
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
from sluice.storage.sqlite.connection import SqliteBase

_RECORD = msgspec.json.Decoder(RequestRecord)
_ENCODER = msgspec.json.Encoder()


class SqliteRequests(SqliteBase):
    async def write_requests(self, records: list[RequestRecord]) -> None:
        rows = [(r.id, r.account_id, r.created_at, _ENCODER.encode(r).decode()) for r in records]
        await self.write(
            lambda tx: tx.many(
                "INSERT OR REPLACE INTO request_log (id, account_id, created_at, record) "
                "VALUES (?, ?, ?, ?)",
                rows,
            )
        )

    async def get_request(self, request_id: str, account_id: str) -> RequestRecord | None:
        row = await self.one(
            "SELECT record FROM request_log WHERE id = ? AND account_id = ?",
            (request_id, account_id),
        )
        return None if row is None else _RECORD.decode(row[0])

    async def list_requests(
        self, filters: RequestFilters, limit: int, after: RequestPosition | None
    ) -> list[RequestRecord]:
        sql, args = list_requests_query(SQLITE, filters, limit, after)
        return [_RECORD.decode(row[0]) for row in await self.all(sql, args)]

    async def spend(
        self, filters: SpendFilters, by: SpendBy, limit: int, after: SpendAfter | None
    ) -> tuple[list[SpendGroup], SpendTotal]:
        rows = await self.all(*spend_groups_query(SQLITE, filters, by, limit, after))
        groups, total = spend_page(rows, after, limit)
        if total is None:
            total = spend_total(await self.one(*spend_total_query(SQLITE, filters)))
        return groups, total
