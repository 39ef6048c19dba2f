"""Rate limits through the gateway: headers on every chat response, 429 + Retry-After,
shared through Redis by several gateways, fail closed when Redis is gone."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from sluice.server.lifecycle import RunningGateway
from tests.support.databases import unavailable
from tests.support.fake_openai import text_stream
from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.gateway import openai_connection_toml, running_gateway
from tests.support.raw_http import RawResponse, exchange, post

REDIS_URL = "redis://127.0.0.1:6379/0"
BODY = json.dumps(
    {"model": "test/gpt-fake", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
).encode()


def key(gw: RunningGateway) -> str:
    assert gw.dev_key is not None
    return gw.dev_key.key


async def call(gw: RunningGateway, body: bytes = BODY) -> RawResponse:
    return await exchange(gw.host, gw.port, post("/v1/chat/completions", body, key(gw)))


@pytest.fixture
async def redis_prefix() -> str:
    client = aioredis.from_url(REDIS_URL)
    try:
        await client.ping()
    except (OSError, aioredis.ConnectionError) as exc:
        unavailable("Redis", str(exc))
    finally:
        await client.aclose()
    return f"sluice-test:{uuid.uuid4().hex[:8]}:"


async def test_request_limit_headers_and_429(tmp_path: Path, fake: FakeUpstream) -> None:
    fake.default = Reply.stream(*text_stream("ok"))
    config = "[server]\nport = 0\n[limits]\nkey = { requests = 2, window = 60 }\n"
    async with running_gateway(tmp_path, config + openai_connection_toml(fake.base_url)) as gw:
        first, second, third = [await call(gw) for _ in range(3)]
    assert [r.status for r in (first, second, third)] == [200, 200, 429]
    assert first.headers["x-ratelimit-limit-requests"] == "2"
    assert first.headers["x-ratelimit-remaining-requests"] == "1"
    assert second.headers["x-ratelimit-remaining-requests"] == "0"
    assert third.headers["x-ratelimit-remaining-requests"] == "0"
    assert 29 <= int(third.headers["retry-after"]) <= 30  # one request back after 30 s
    assert third.json()["error"]["type"] == "rate_limit_error"
    assert third.json()["error"]["code"] == "rate_limit_exceeded"
    assert len(fake.requests) == 2  # the refused request never reached the upstream
    assert "x-ratelimit-limit-tokens" not in first.headers  # no token limit configured


async def test_token_limit_counts_what_was_used(tmp_path: Path, fake: FakeUpstream) -> None:
    usage = {"prompt_tokens": 40, "completion_tokens": 60, "total_tokens": 100}
    fake.default = Reply.stream(*text_stream("ok", usage=usage))
    config = "[server]\nport = 0\n[limits]\naccount = { tokens = 250, window = 3600 }\n"
    async with running_gateway(tmp_path, config + openai_connection_toml(fake.base_url)) as gw:
        first = await call(gw)
        await asyncio.sleep(0.05)  # the finish settles the difference in the background
        second = await call(gw)
        await asyncio.sleep(0.05)
        third = await call(gw)  # 200 used: its estimate still fits
        await asyncio.sleep(0.05)
        fourth = await call(gw)  # 300 used: over the limit
    assert first.headers["x-ratelimit-limit-tokens"] == "250"
    remaining = int(second.headers["x-ratelimit-remaining-tokens"])
    assert 140 <= remaining <= 150  # 250 - 100 used, minus the second's estimate (~10)
    assert (third.status, fourth.status) == (200, 429)


async def test_gateways_share_one_limit_through_redis(
    tmp_path: Path, fake: FakeUpstream, redis_prefix: str
) -> None:
    fake.default = Reply.stream(*text_stream("ok"))
    config = (
        f'[server]\nport = 0\n[limits]\nredis_url = "{REDIS_URL}"\n'
        f'key_prefix = "{redis_prefix}"\nkey = {{ requests = 5, window = 60 }}\n'
    )
    config += openai_connection_toml(fake.base_url)
    async with running_gateway(tmp_path, config) as one, running_gateway(tmp_path, config) as two:
        assert key(one) == key(two)  # one home: one database, one development key
        statuses = [(await call(gw)).status for gw in (one, two, one, two, one, two, one)]
    assert statuses == [200, 200, 200, 200, 200, 429, 429]  # five in total, not per gateway


async def test_redis_down_fails_closed(tmp_path: Path, fake: FakeUpstream) -> None:
    config = (
        '[server]\nport = 0\n[limits]\nredis_url = "redis://127.0.0.1:1/0"\n'
        "key = { requests = 5 }\n"
    )
    async with running_gateway(tmp_path, config + openai_connection_toml(fake.base_url)) as gw:
        resp = await call(gw)
    assert resp.status == 503
    assert resp.json()["error"]["code"] == "rate_limiter_unavailable"
    assert "6379" not in resp.body.decode() and fake.requests == []


async def test_one_key_can_have_its_own_limit(tmp_path: Path, fake: FakeUpstream) -> None:
    fake.default = Reply.stream(*text_stream("ok"))
    async with running_gateway(tmp_path, "[server]\nport = 0\n") as probe:
        prefix = key(probe)[:18]
    config = (
        f"[server]\nport = 0\n[limits]\nkey = {{ requests = 5 }}\n"
        f'keys = {{ "{prefix}" = {{ requests = 1 }} }}\n'
    )
    async with running_gateway(tmp_path, config + openai_connection_toml(fake.base_url)) as gw:
        statuses = [(await call(gw)).status for _ in range(2)]
    assert statuses == [200, 429]  # the dev key's own limit, not the default 5
