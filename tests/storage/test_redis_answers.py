"""The response cache's answers in Redis (sluice/storage/redis_answers.py), on a real
Redis under a key prefix of each test's own: an answer one process kept is found by
another; each lives its time to live; the least recently used go first once
``max_bytes`` is reached, however many processes fill it; Redis down or silent, a
lookup is a miss soon, a put is dropped, the log says so once."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from sluice.cache.store import AnswerStore
from sluice.storage.redis_answers import PAUSE, TIMEOUT, RedisAnswers
from tests.cache.test_store import answer, size

REDIS = "redis://127.0.0.1:6379/0"


@pytest.fixture
async def prefix() -> AsyncIterator[str]:
    """A key prefix of the test's own, its keys deleted afterwards."""
    mine = f"sluice-test:{uuid.uuid4().hex}:"
    yield mine
    client = Redis.from_url(REDIS)
    async for name in client.scan_iter(match=mine + "*"):
        await client.delete(name)
    await client.aclose()


def shared(prefix: str, max_bytes: int = 100_000, url: str = REDIS) -> AnswerStore:
    return AnswerStore(RedisAnswers.from_url(url, prefix, max_bytes, time.monotonic), 100_000)


def redis_of(store: AnswerStore) -> RedisAnswers:
    assert isinstance(store.kept, RedisAnswers)
    return store.kept


async def settled(*stores: AnswerStore) -> None:
    """Every put on its way has reached Redis."""
    for store in stores:
        pending = redis_of(store)._pending
        if pending:
            await asyncio.wait(set(pending))


async def test_an_answer_one_process_kept_is_found_by_another(prefix: str) -> None:
    here, there = shared(prefix), shared(prefix)
    try:
        assert here.put("k", answer("kept"), ttl=60)
        await settled(here)
        assert await there.get("k") == answer("kept")
        assert await there.get("other") is None
        assert (redis_of(there).entries, redis_of(there).kept_bytes) == (1, size("kept"))
    finally:
        await redis_of(here).close()
        await redis_of(there).close()


async def test_an_answer_lives_its_ttl_and_then_counts_no_more(prefix: str) -> None:
    store = shared(prefix)
    client = Redis.from_url(REDIS)
    try:
        store.put("short", answer("a"), ttl=0.2)
        store.put("long", answer("b"), ttl=60)
        await settled(store)
        assert 0 < await client.pttl(f"{prefix}answer:short") <= 200
        assert await store.get("short") is not None
        await asyncio.sleep(0.3)
        assert await store.get("short") is None
        assert (redis_of(store).entries, redis_of(store).kept_bytes) == (1, size("b"))
        store.put("short", answer("a"), ttl=0.05)
        await settled(store)
        await asyncio.sleep(0.1)
        store.put("next", answer("c"), ttl=60)  # a put forgets what expired, unread too
        await settled(store)
        assert redis_of(store).entries == 2
        assert await client.zrange(f"{prefix}answers:used", 0, -1) == [b"long", b"next"]
    finally:
        await redis_of(store).close()
        await client.aclose()


async def test_least_recently_used_answers_go_first(prefix: str) -> None:
    store = shared(prefix, max_bytes=3 * size("a"))
    try:
        for name in "abc":
            store.put(name, answer(name), ttl=60)
            await settled(store)
        assert await store.get("a") is not None  # a is used: b is now the least recent
        store.put("d", answer("d"), ttl=60)
        await settled(store)
        assert await store.get("b") is None
        assert all([await store.get(name) is not None for name in "acd"])
        kept = redis_of(store)
        assert (kept.entries, kept.kept_bytes, kept.evictions) == (3, 3 * size("a"), 1)
    finally:
        await redis_of(store).close()


async def test_many_processes_filling_at_once_stay_within_max_bytes(prefix: str) -> None:
    most = 10 * size("a")
    stores = [shared(prefix, max_bytes=most) for _ in range(4)]
    client = Redis.from_url(REDIS)
    try:
        for n in range(30):
            for i, store in enumerate(stores):
                store.put(f"{i}-{n}", answer("a"), ttl=60)
            if n % 10 == 9:  # within MOST_PENDING each: none dropped
                await settled(*stores)
        names = [n async for n in client.scan_iter(match=f"{prefix}answer:*")]
        held = sum([await client.strlen(n) for n in names])
        total = int(await client.get(f"{prefix}answers:bytes") or 0)
        assert len(names) == 10 and held == total == most
        assert sum(redis_of(s).evictions for s in stores) == 4 * 30 - 10
    finally:
        for store in stores:
            await redis_of(store).close()
        await client.aclose()


async def test_redis_down_a_lookup_is_a_miss_and_a_put_is_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = shared("p:", url="redis://127.0.0.1:1/0")
    with caplog.at_level(logging.WARNING, "sluice.storage"):
        for _ in range(3):
            assert store.put("k", answer("a"), ttl=60)  # accepted, never kept
            await settled(store)
            assert await store.get("k") is None
        await redis_of(store).close()
    warned = [r for r in caplog.records if "while Redis fails" in r.message]
    assert len(warned) == 1 and not any(r.exc_info for r in caplog.records)


async def test_a_silent_redis_makes_a_lookup_a_miss_soon_then_at_once() -> None:
    """A Redis that accepts connections and never answers: the first lookup waits its
    timeout, the next ones (within the pause) none."""

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(-1)
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    store = shared("p:", url=f"redis://127.0.0.1:{port}/0")
    try:
        started = time.monotonic()
        assert await store.get("k") is None
        first = time.monotonic() - started
        assert await store.get("k") is None
        second = time.monotonic() - started - first
        store.put("k", answer("a"), ttl=60)
        assert not redis_of(store)._pending  # dropped: Redis is known to be silent
    finally:
        await redis_of(store).close()
        server.close()
    assert TIMEOUT * 0.9 <= first < PAUSE and second < 0.05
