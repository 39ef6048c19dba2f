"""The response cache shared by the workers of one machine through a SQLite file (issue
26, docs/cache.md#the-store): two gateways on one SQLite database, as two of
``[server] workers = 2`` would be, keep their answers in the file beside it by default.
A streamed answer one filled is a hit on the other, through the official OpenAI SDK,
folded into the same text, logged with the request that filled it, counted in the
other's ``/metrics``; with ``store = "memory"`` each keeps its own."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from sluice.server.lifecycle import RunningGateway
from sluice.storage.answers import MemoryAnswers
from sluice.storage.sqlite.answers import SqliteAnswers
from tests.server.test_cache import FUNDS, PIECES, ask, config, fake, row
from tests.server.test_cache_shared import streamed
from tests.server.test_metrics_mix import samples
from tests.server.test_reload import ADMIN, ENV
from tests.support.accounts import metered_key
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import running_gateway
from tests.support.raw_http import exchange, get

__all__ = ["fake"]


@asynccontextmanager
async def two(
    tmp_path: Path, fake: FakeUpstream, cache: str = ""
) -> AsyncIterator[tuple[RunningGateway, ...]]:
    """Two gateways of ``[server] workers = 2`` on one SQLite database."""
    database = (tmp_path / "shared.db").as_posix()
    text = (
        f'[server]\nport = 0\nworkers = 2\n[storage]\nurl = "sqlite:///{database}"\n'
        f"[cache]\n{cache}\n" + config(fake)
    )
    async with (
        running_gateway(tmp_path / "a", text, env=ENV) as a,
        running_gateway(tmp_path / "b", text, env=ENV) as b,
    ):
        yield a, b


async def kept(gw: RunningGateway, count: int) -> None:
    """``gw`` has written ``count`` answers to the file (its put is off the response
    path)."""
    store = gw.gateway.services.answers.kept
    assert isinstance(store, SqliteAnswers)
    async with asyncio.timeout(5):
        while store.entries < count:
            await asyncio.sleep(0.01)


async def test_a_fill_on_one_worker_is_a_hit_on_the_other(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    async with two(tmp_path, fake) as (a, b):
        store = a.gateway.services.answers.kept
        assert isinstance(store, SqliteAnswers)
        assert store.path == tmp_path / "shared-cache.db"
        key = await metered_key(a.gateway.store, "team", FUNDS)
        filled = await streamed(a, key)
        await kept(a, 1)
        served = await streamed(b, key)
        logged = await row(b, key, served[2]["x-request-id"])
        scraped = await exchange(b.host, b.port, get("/metrics", ADMIN))
    assert len(fake.requests) == 1
    assert [filled[2]["x-sluice-cache"], served[2]["x-sluice-cache"]] == ["miss", "hit"]
    assert filled[0] == served[0] == "".join(PIECES)
    assert served[1].completion_tokens == 5 and served[1].model_extra["price_source"] == "cache"
    assert logged["cache"] == "hit" and logged["cache_filled_by"] == filled[2]["x-request-id"]
    found = samples(scraped.body.decode())
    assert found["sluice_cache_requests_total", (("outcome", "hit"),)] == 1
    assert found["sluice_cache_entries", ()] == 1 and found["sluice_cache_bytes", ()] > 500


async def test_with_the_memory_store_each_worker_keeps_its_own(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    async with two(tmp_path, fake, cache='store = "memory"') as (a, b):
        assert isinstance(a.gateway.services.answers.kept, MemoryAnswers)
        key = await metered_key(a.gateway.store, "team", FUNDS)
        outcomes = [(await ask(gw, key)).headers["x-sluice-cache"] for gw in (a, b, b)]
    assert outcomes == ["miss", "miss", "hit"] and len(fake.requests) == 2
    assert not (tmp_path / "shared-cache.db").exists()
