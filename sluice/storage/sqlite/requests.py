"""The request log on SQLite: the record as JSON, keyed by request id and account.

Its reads (lookups, listings, spend reports) run on the reading connection, never on
the thread that places holds and settles (:mod:`~sluice.storage.sqlite.connection`).
"""

from __future__ import annotations

import msgspec

from sluice.storage.base import RequestFilters, RequestPosition, RequestRecord
from sluice.storage.dialect import SQLITE
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
from sluice.storage.sqlite import settling
from sluice.storage.sqlite.connection import SqliteBase, Tx

_RECORD = msgspec.json.Decoder(RequestRecord)
_ENCODER = msgspec.json.Encoder()


class SqliteRequests(SqliteBase):
    async def write_requests(self, records: list[RequestRecord]) -> None:
        await self.write(lambda tx: settling.log(tx, records))

    async def get_request(self, request_id: str, account_id: str) -> RequestRecord | None:
        row = await self.query(
            lambda tx: tx.one(
                "SELECT record FROM request_log WHERE id = ? AND account_id = ?",
                (request_id, account_id),
            )
        )
        return None if row is None else _RECORD.decode(row[0])

    async def request_page(
        self,
        filters: RequestFilters,
        limit: int,
        after: RequestPosition | None,
        examine: int = MAX_EXAMINED,
    ) -> Page:
        sql, args = page_query(SQLITE, filters, limit, after, examine)
        return page_of(await self.query(lambda tx: tx.all(sql, args)), limit, examine)

    async def list_requests(
        self, filters: RequestFilters, limit: int, after: RequestPosition | None
    ) -> list[RequestRecord]:
        return await all_pages(self.request_page, filters, limit, after)

    async def request_log_cutoff(self, keep: int) -> RequestPosition | None:
        row = await self.query(
            lambda tx: tx.one(
                "SELECT created_at, id FROM request_log INDEXED BY request_log_newest "
                "ORDER BY created_at DESC, id DESC LIMIT 1 OFFSET ?",
                (keep - 1,),
            )
        )
        return None if row is None else (int(row[0]), str(row[1]))

    async def prune_requests(self, before: RequestPosition, limit: int) -> int:
        return await self.write(
            lambda tx: tx.execute(
                "DELETE FROM request_log WHERE id IN (SELECT id FROM request_log "
                "INDEXED BY request_log_newest WHERE (created_at, id) < (?, ?) "
                "ORDER BY created_at, id LIMIT ?)",
                (*before, limit),
            )
        )

    async def spend(
        self, filters: SpendFilters, by: SpendBy, limit: int, after: SpendAfter | None
    ) -> tuple[list[SpendGroup], SpendTotal]:
        def report(tx: Tx) -> tuple[list[SpendGroup], SpendTotal]:
            groups, total = spend_page(
                tx.all(*spend_groups_query(SQLITE, filters, by, limit, after)), after, limit
            )
            if total is None:
                total = spend_total(tx.one(*spend_total_query(SQLITE, filters)))
            return groups, total

        return await self.query(report)
