"""Stores under test: memory, and Redis on 127.0.0.1:6379 (``SLUICE_TEST_REDIS``).

Redis unreachable: its tests skip with the reason, except under ``CI=true``, where they
fail. Each test gets its own key prefix; its keys are deleted and its clients closed.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Callable
from typing import NoReturn

import pytest
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from sluice.limits.base import Limiter
from sluice.limits.stores.memory import MemoryLimiter
from sluice.limits.stores.redis import RedisLimiter, connect

REDIS_URL = os.environ.get("SLUICE_TEST_REDIS", "redis://127.0.0.1:6379/0")


def redis_unavailable(reason: str) -> NoReturn:
    message = f"Redis is not reachable at {REDIS_URL} ({reason}); start it: scripts/services.sh"
    if os.environ.get("CI") == "true":
        pytest.fail(message + " — CI=true requires it")
    pytest.skip(message)


class Clock:
    """Seconds, moved by the test."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class RedisEnv:
    """Limiters on the test server under one prefix unique to the test."""

    def __init__(self, admin: Redis) -> None:
        self.admin = admin
        self.prefix = f"sluice-test:{uuid.uuid4().hex}:"
        self._limiters: list[RedisLimiter] = []

    def limiter(
        self, clock: Callable[[], float] | None = None, client: Redis | None = None
    ) -> RedisLimiter:
        """A limiter with its own client (its own connections: another gateway process)."""
        # a test's 500 admissions at once on a loaded CI machine may wait past the
        # production client's 1 s fail-fast; what these tests judge is the count
        client = connect(REDIS_URL, timeout=5.0) if client is None else client
        limiter = RedisLimiter(client, prefix=self.prefix, clock=clock)
        self._limiters.append(limiter)
        return limiter

    async def keys(self) -> list[bytes]:
        return sorted([key async for key in self.admin.scan_iter(match=self.prefix + "*")])

    async def close(self) -> None:
        for limiter in self._limiters:
            await limiter.close()
        keys = await self.keys()
        if keys:
            await self.admin.delete(*keys)
        await self.admin.aclose()


@pytest.fixture
async def redis_env() -> AsyncIterator[RedisEnv]:
    admin = Redis.from_url(REDIS_URL, socket_connect_timeout=1, retry=Retry(NoBackoff(), 0))
    try:
        await admin.ping()
    except (RedisConnectionError, RedisTimeoutError) as exc:
        await admin.aclose()
        redis_unavailable(str(exc))
    env = RedisEnv(admin)
    try:
        yield env
    finally:
        await env.close()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["memory", "redis"])
def limiter(request: pytest.FixtureRequest, clock: Clock) -> Limiter:
    """Each store, on the test's clock (Redis too: its script takes ``now`` then)."""
    if request.param == "memory":
        return MemoryLimiter(clock)
    env: RedisEnv = request.getfixturevalue("redis_env")
    return env.limiter(clock)
