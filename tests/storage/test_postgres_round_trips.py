"""A hold on PostgreSQL is one query: the pool's release sends no reset query
(asyncpg's default sends one per release, doubling the round trips of every hold)."""

from __future__ import annotations

import asyncio
import contextlib

from asyncpg.connection import LoggedQuery

from sluice.storage.base import HoldRequest
from sluice.storage.factory import open_store
from sluice.storage.postgres.store import PostgresStore
from tests.support.databases import fresh_postgres


async def test_a_hold_is_one_query_on_the_wire() -> None:
    async with fresh_postgres() as dsn:
        store = await open_store(dsn)
        assert isinstance(store, PostgresStore)
        try:
            account = await store.create_account(
                "acct_rt", "round-trips", metered=True, credits=10_000, now=1
            )
            sent: list[str] = []

            def seen(query: LoggedQuery) -> None:
                sent.append(query.query)

            async with contextlib.AsyncExitStack() as every:  # each pooled connection
                borrowed = await asyncio.gather(
                    *(every.enter_async_context(store.pool.acquire()) for _ in range(10))
                )
                for conn in borrowed:
                    conn.add_query_logger(seen)
            sent.clear()
            for n in range(20):
                hold = HoldRequest(f"hold_{n}", account.id, "key_rt", f"req_{n}", 10, 1, 100)
                assert await store.place_hold(hold)
            assert len(sent) == 20, sent[:3]
        finally:
            await store.close()
