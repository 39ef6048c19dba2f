"""What only the Redis store does: one limit shared by several gateway processes, the
server's clock, one round trip per admission, expiring keys, a clear failure."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from sluice.config import LimitSpec
from sluice.errors import ServiceUnavailableError
from sluice.limits.base import LimiterUnavailableError
from sluice.limits.decision import Quota, Subject, Ticket
from sluice.limits.stores.memory import MemoryLimiter
from sluice.limits.stores.redis import RedisLimiter, connect
from tests.limits.conftest import REDIS_URL, Clock, RedisEnv, redis_unavailable

DAY = 86_400.0  # one request drains every 864 s at 100 per day: none during a test


@pytest.mark.parametrize(
    ("spec", "tokens"),
    [(LimitSpec(requests=100, window=DAY), 0), (LimitSpec(tokens=100_000, window=DAY), 1000)],
    ids=["requests", "tokens"],
)
async def test_two_processes_racing_admit_exactly_the_limit(
    redis_env: RedisEnv, spec: LimitSpec, tokens: int
) -> None:
    gateways = [redis_env.limiter(), redis_env.limiter()]  # two clients, server time
    subject = Subject("key_1", "acct_1", key=spec, account=LimitSpec(requests=10**6, window=DAY))
    decisions = await asyncio.gather(*(gateways[i % 2].admit(subject, tokens) for i in range(500)))
    assert sum(d.allowed for d in decisions) == 100
    assert {sum(d.allowed for d in decisions[i::2]) > 0 for i in (0, 1)} == {True}


@pytest.mark.parametrize("seed", range(4))
async def test_script_decides_like_the_core_on_random_traffic(
    redis_env: RedisEnv, seed: int
) -> None:
    """The Lua copy of the arithmetic against the memory store (the pure core), step by
    step: admissions on three keys of one account, settlements above and below the
    estimate, time moving in uneven steps."""
    rng = random.Random(seed)
    clock = Clock()
    memory, shared = MemoryLimiter(clock), redis_env.limiter(clock)
    key_spec = LimitSpec(requests=rng.randint(1, 6), tokens=rng.randint(50, 500), window=2)
    account_spec = LimitSpec(requests=rng.randint(3, 12), tokens=rng.randint(300, 1500), window=5)
    open_tickets: list[Ticket] = []
    for _ in range(300):
        clock.now += rng.choice((0, 0, 0.001, 0.05, 0.3, 1.7))
        if open_tickets and rng.random() < 0.3:
            ticket = open_tickets.pop(rng.randrange(len(open_tickets)))
            tokens = rng.randint(0, 2 * ticket.estimated_tokens + 10)
            await memory.finish(ticket, tokens)
            await shared.finish(ticket, tokens)
            continue
        subject = Subject(f"key_{rng.randint(1, 3)}", "acct_1", key_spec, account_spec)
        estimate = rng.randint(0, 150)
        expected = await memory.admit(subject, estimate)
        assert await shared.admit(subject, estimate) == expected
        if expected.ticket is not None:
            open_tickets.append(expected.ticket)


async def test_server_time_decision_and_expiring_keys(redis_env: RedisEnv) -> None:
    limiter = redis_env.limiter()
    subject = Subject("key_1", "acct_1", key=LimitSpec(requests=5, tokens=1000, window=3600))
    decision = await limiter.admit(subject, 250)
    assert decision.requests == Quota(limit=5, remaining=4, reset_ms=720_000)
    assert decision.tokens == Quota(limit=1000, remaining=750, reset_ms=900_000)
    prefix = redis_env.prefix
    requests_key = f"{prefix}{{acct_1}}:key:key_1:requests:5/3600000".encode()
    tokens_key = f"{prefix}{{acct_1}}:key:key_1:tokens:1000/3600000".encode()
    assert await redis_env.keys() == [requests_key, tokens_key]
    assert 0 < await redis_env.admin.pttl(requests_key) <= 720_001
    assert decision.ticket is not None
    await limiter.finish(decision.ticket, 0)  # every estimated token refunded: bucket empty
    assert await redis_env.keys() == [requests_key]


async def test_one_round_trip_per_admission_and_none_for_an_exact_estimate(
    redis_env: RedisEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = connect(REDIS_URL)
    sent: list[Any] = []
    execute: Callable[..., Awaitable[Any]] = client.execute_command

    async def counting(*args: Any, **options: Any) -> Any:
        sent.append(args[0])
        return await execute(*args, **options)

    monkeypatch.setattr(client, "execute_command", counting)
    limiter = redis_env.limiter(client=client)
    subject = Subject(
        "k", "a", key=LimitSpec(requests=10, tokens=1000), account=LimitSpec(10, 1000)
    )
    await limiter.admit(subject, 10)  # may load the script first
    sent.clear()
    decisions = [await limiter.admit(subject, 10) for _ in range(5)]
    assert sent == ["EVALSHA"] * 5
    sent.clear()
    ticket = decisions[-1].ticket
    assert ticket is not None
    await limiter.finish(ticket, 10)
    assert sent == []
    await limiter.finish(ticket, 20)
    assert sent == ["EVALSHA"]


async def test_script_is_loaded_again_after_a_flush(redis_env: RedisEnv) -> None:
    limiter = redis_env.limiter()
    subject = Subject("k", "a", key=LimitSpec(requests=2))
    assert (await limiter.admit(subject, 0)).allowed
    await redis_env.admin.script_flush()
    assert (await limiter.admit(subject, 0)).allowed
    assert not (await limiter.admit(subject, 0)).allowed


async def test_unreachable_redis_is_a_503() -> None:
    limiter = RedisLimiter.from_url("redis://127.0.0.1:1/0")  # nothing listens on port 1
    subject = Subject("k", "a", key=LimitSpec(requests=2))
    try:
        with pytest.raises(LimiterUnavailableError) as caught:
            await limiter.admit(subject, 0)
    finally:
        await limiter.close()
    assert isinstance(caught.value, ServiceUnavailableError)
    assert (caught.value.status, caught.value.code) == (503, "rate_limiter_unavailable")
    assert "127.0.0.1" not in caught.value.message  # no internal address on the wire


async def test_redis_that_never_answers_is_a_503() -> None:
    async def swallow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # reads until the client gives up; answers nothing
        writer.close()

    server = await asyncio.start_server(swallow, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    limiter = RedisLimiter(connect(f"redis://127.0.0.1:{port}/0", timeout=0.1))
    try:
        with pytest.raises(LimiterUnavailableError):
            await limiter.admit(Subject("k", "a", key=LimitSpec(requests=2)), 0)
    finally:
        await limiter.close()
        server.close()
        await server.wait_closed()


async def test_requests_without_limits_never_reach_redis() -> None:
    limiter = RedisLimiter.from_url("redis://127.0.0.1:1/0")
    try:
        decision = await limiter.admit(Subject("k", "a"), 100)
        assert decision.allowed and decision.ticket is not None
        await limiter.finish(decision.ticket, 500)
    finally:
        await limiter.close()


def test_missing_redis_skips_but_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="not reachable"):
        redis_unavailable("refused")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true requires it"):
        redis_unavailable("refused")
