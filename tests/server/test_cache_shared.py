"""The response cache shared by replicas through Redis (issue 26, docs/cache.md#the-store):
two gateways on one PostgreSQL and one Redis. A streamed answer one filled is a hit on
the other, through the official OpenAI SDK, folded into the same text, logged with the
request that filled it, counted in the other's ``/metrics``; another account never hits
an account's entry in Redis."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from openai import AsyncOpenAI
from redis.asyncio import Redis

from sluice.server.lifecycle import RunningGateway
from sluice.storage.redis_answers import RedisAnswers
from tests.server.test_cache import FUNDS, PIECES, USAGE, ask, config, contents, fake, row
from tests.server.test_metrics_mix import samples
from tests.server.test_relay_shared import REDIS, shared
from tests.server.test_reload import ADMIN, ENV
from tests.support.accounts import metered_key
from tests.support.databases import fresh_postgres
from tests.support.fake_openai import text_stream
from tests.support.fake_upstream import FakeUpstream, Reply, WaitFor
from tests.support.gateway import running_gateway
from tests.support.raw_http import exchange, get

__all__ = ["fake"]


@asynccontextmanager
async def two(tmp_path: Path, fake: FakeUpstream) -> AsyncIterator[tuple[RunningGateway, ...]]:
    """Two gateways sharing a fresh database and a Redis key prefix of their own."""
    prefix = f"sluice-test:{uuid.uuid4().hex}:"
    try:
        async with fresh_postgres() as dsn:
            text = shared(dsn, prefix) + config(fake)
            async with (
                running_gateway(tmp_path / "a", text, env=ENV) as a,
                running_gateway(tmp_path / "b", text, env=ENV) as b,
            ):
                yield a, b
    finally:
        client = Redis.from_url(REDIS)
        async for name in client.scan_iter(match=prefix + "*"):
            await client.delete(name)
        await client.aclose()


async def kept(gw: RunningGateway, count: int) -> None:
    """``gw`` has put ``count`` answers in Redis (its put is off the response path)."""
    store = gw.gateway.services.answers.kept
    assert isinstance(store, RedisAnswers)
    async with asyncio.timeout(5):
        while store.entries < count:
            await asyncio.sleep(0.01)


async def streamed(gw: RunningGateway, key: str) -> tuple[str, Any, Any]:
    """The question asked through the OpenAI SDK, streamed: its text as the SDK folds
    it, its usage and the response's headers."""
    client = AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=key, max_retries=0)
    raw = await client.chat.completions.with_raw_response.create(
        model="test/m",
        max_tokens=100,
        stream=True,
        stream_options={"include_usage": True},
        messages=[{"role": "user", "content": "What is the answer?"}],
    )
    text, usage = "", None
    async for event in raw.parse():
        text += "".join(c.delta.content or "" for c in event.choices)
        usage = event.usage or usage
    await client.close()
    return text, usage, raw.headers


async def test_a_fill_on_one_replica_is_a_hit_on_the_other(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    async with two(tmp_path, fake) as (a, b):
        key = await metered_key(a.gateway.store, "team", FUNDS)
        filled = await streamed(a, key)
        await kept(a, 1)
        served = await streamed(b, key)
        logged = await row(b, key, served[2]["x-request-id"])
        scraped = await exchange(b.host, b.port, get("/metrics", ADMIN))
        viewed = (await exchange(b.host, b.port, get("/admin/cache", ADMIN))).json()
    assert len(fake.requests) == 1
    assert [filled[2]["x-sluice-cache"], served[2]["x-sluice-cache"]] == ["miss", "hit"]
    assert filled[0] == served[0] == "".join(PIECES)
    assert served[1].completion_tokens == 5 and served[1].model_extra["price_source"] == "cache"
    assert logged["cache"] == "hit" and logged["cache_filled_by"] == filled[2]["x-request-id"]
    found = samples(scraped.body.decode())
    assert found["sluice_cache_requests_total", (("outcome", "hit"),)] == 1
    assert found["sluice_cache_entries", ()] == 1 and found["sluice_cache_bytes", ()] > 500
    # the operator's view on b: the shared store's entry, b's own requests (one hit)
    assert viewed["store"]["kind"] == "redis" and viewed["store"]["entries"] == 1
    assert viewed["requests"] == {"hit": 1, "miss": 0, "bypass": 0} and viewed["hit_ratio"] == 1


async def test_another_account_never_hits_an_accounts_entry_through_redis(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    async with two(tmp_path, fake) as (a, b):
        mine = await metered_key(a.gateway.store, "mine", FUNDS)
        theirs = await metered_key(a.gateway.store, "theirs", FUNDS)
        await ask(a, mine)
        await kept(a, 1)
        missed = await ask(b, theirs)  # mine's entry is in Redis: not theirs to hit
        await kept(b, 2)
        hits = [(await ask(gw, k)).headers["x-sluice-cache"] for gw, k in ((b, mine), (a, theirs))]
    assert missed.headers["x-sluice-cache"] == "miss" and hits == ["hit", "hit"]
    assert len(fake.requests) == 2  # one fill each


async def test_identical_requests_in_flight_join_per_replica(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    """A burst of identical streams spread over two replicas reaches the upstream once
    per replica (flights are each process's; docs/cache.md#identical-requests-in-flight)."""
    gate = asyncio.Event()
    fake.default = Reply.stream(*text_stream(*PIECES, usage=USAGE)[:2], WaitFor(gate),
                                *text_stream(*PIECES, usage=USAGE)[2:])  # fmt: skip
    async with two(tmp_path, fake) as (a, b):
        key = await metered_key(a.gateway.store, "team", FUNDS)
        burst = [asyncio.ensure_future(ask(gw, key)) for gw in (a, b) for _ in range(10)]
        async with asyncio.timeout(5):
            while sum(gw.gateway.services.flights.joiners for gw in (a, b)) < 18:
                await asyncio.sleep(0.01)
        gate.set()
        answers = await asyncio.gather(*burst)
        await kept(a, 1)
        later = [(await ask(gw, key)).headers["x-sluice-cache"] for gw in (a, b)]
    assert len(fake.requests) == 2
    assert sorted(x.headers["x-sluice-cache"] for x in answers) == ["hit"] * 18 + ["miss"] * 2
    assert all(contents(x.body) == "".join(PIECES) for x in answers)
    assert later == ["hit", "hit"]
