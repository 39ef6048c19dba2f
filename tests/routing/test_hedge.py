"""Hedged first tokens (issue 25): a route target with ``hedge_after_ms`` whose first
content has not come by then starts the next target beside it; the first to produce
content is streamed, the other is cancelled at once and charged nothing; the log
records both; a budget keeps hedges to a share of the streams; ``/metrics`` counts
hedges fired and won."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.server.test_admin import ADMIN, ENV
from tests.server.test_metrics_mix import samples
from tests.support.accounts import metered_key
from tests.support.fake_openai import text_stream
from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.gateway import running_gateway
from tests.support.raw_http import RawClient, exchange, get, post

USAGE = {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
FUNDS = 10**9


@pytest.fixture
async def pair() -> AsyncIterator[tuple[FakeUpstream, FakeUpstream]]:
    slow, fast = FakeUpstream(), FakeUpstream()
    await slow.start()
    await fast.start()
    slow.default = Reply.stream(*text_stream("from", " slow", usage=USAGE), delay=2.0)
    fast.default = Reply.stream(*text_stream("from", " fast", usage=USAGE), delay=0.1)
    yield slow, fast
    await slow.close()
    await fast.close()


def config(slow: FakeUpstream, fast: FakeUpstream, hedge_ms: int, budget: float = 0.1) -> str:
    connections = "".join(
        f'[[connections]]\nid = "conn_{name}"\nprovider = "openai-compatible"\n'
        f'base_url = "{fake.base_url}"\n'
        f'[[models]]\nid = "test/{name}"\nproviders = {{ conn_{name} = "m-{name}" }}\n'
        "price = { input = 1.0, output = 2.0 }\n"
        for name, fake in (("slow", slow), ("fast", fast))
    )
    return (
        f"[server]\nport = 0\nsse_keepalive_interval = 0\n[routing]\nhedge_budget = {budget}\n"
        f"{connections}"
        '[[routes]]\nname = "bot"\n'
        f'chain = [ {{ model = "test/slow", hedge_after_ms = {hedge_ms} }}, '
        '{ model = "test/fast" } ]\n'
    )


def body() -> bytes:
    doc = {"model": "bot", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    return json.dumps(doc).encode()


async def first_content(client: RawClient) -> tuple[float, bytes]:
    """The time the first content arrived, and the whole body."""
    got, first = b"", 0.0
    while (chunk := await client.read_chunk()) is not None:
        if not first and b'"content":"from"' in chunk:
            first = time.monotonic()
        got += chunk
    return first, got


async def test_a_slow_first_token_is_hedged_and_the_loser_closed_at_once(
    tmp_path: Path, pair: tuple[FakeUpstream, FakeUpstream]
) -> None:
    slow, fast = pair
    async with running_gateway(tmp_path, config(slow, fast, 300), env=ENV) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        client = await RawClient.connect(gw.host, gw.port)
        sent = time.monotonic()
        await client.send(post("/v1/chat/completions", body(), key))
        status, head = await client.read_head()
        loop_first, answer = await first_content(client)
        loop = asyncio.get_running_loop()
        content_at = loop.time() - (time.monotonic() - loop_first)
        await client.close()
        await asyncio.wait_for(slow.hung_up.wait(), 2)
        await gw.gateway.writer.flush()
        row = (
            await exchange(gw.host, gw.port, get(f"/v1/requests/{head['x-request-id']}", key))
        ).json()
        metrics = samples((await exchange(gw.host, gw.port, get("/metrics", ADMIN))).body.decode())
    assert status == 200 and b" fast" in answer and b" slow" not in answer
    assert loop_first - sent < 0.5  # the hedge's 100 ms, not the primary's 2 s
    assert slow.hangups[0] - content_at < 0.05  # the loser closed at once
    attempts = {a["connection"]: a for a in row["attempts"]}
    assert attempts["conn_slow"]["outcome"] == "hedge_lost"
    assert attempts["conn_fast"]["outcome"] == "served" and attempts["conn_fast"]["hedge"]
    assert row["connection"] == "conn_fast" and row["completion_tokens"] == 3
    assert row["credits_charged"] == row["cost"]  # one charge: the winner's
    assert metrics[("sluice_hedges_total", (("outcome", "fired"),))] == 1
    assert metrics[("sluice_hedges_total", (("outcome", "won"),))] == 1


async def test_content_before_the_hedge_time_fires_no_hedge(
    tmp_path: Path, pair: tuple[FakeUpstream, FakeUpstream]
) -> None:
    slow, fast = pair
    slow.default = Reply.stream(*text_stream("from", " slow", usage=USAGE), delay=0.05)
    async with running_gateway(tmp_path, config(slow, fast, 300), env=ENV) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        answer = await exchange(gw.host, gw.port, post("/v1/chat/completions", body(), key))
    assert b" slow" in answer.body and len(fast.requests) == 0


async def test_the_budget_keeps_hedges_to_a_share_of_streams(
    tmp_path: Path, pair: tuple[FakeUpstream, FakeUpstream]
) -> None:
    """A primary slow on every request: at a 10 % budget the next target gets about one
    request in ten (the bucket starts with one hedge)."""
    slow, fast = pair
    slow.default = Reply.stream(*text_stream("from", " slow", usage=USAGE), delay=0.3)
    fast.default = Reply.stream(*text_stream("from", " fast", usage=USAGE))
    async with running_gateway(tmp_path, config(slow, fast, 50, budget=0.1), env=ENV) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        gate = asyncio.Semaphore(10)

        async def one() -> bytes:
            async with gate:
                return (
                    await exchange(gw.host, gw.port, post("/v1/chat/completions", body(), key))
                ).body

        answers = await asyncio.gather(*(one() for _ in range(60)))
    hedges = len(fast.requests)
    assert all(a.endswith(b"data: [DONE]\n\n") for a in answers)
    assert len(slow.requests) == 60
    assert 4 <= hedges <= 7, hedges  # 60 x 0.1, plus the one the bucket starts with


async def test_an_error_that_allows_no_failover_ends_the_race_at_once(
    tmp_path: Path, pair: tuple[FakeUpstream, FakeUpstream]
) -> None:
    """The primary answers 400 after the hedge started: the request's own fault, so
    the slow hedge is not waited for."""
    slow, fast = pair
    error = {"error": {"message": "context too long", "type": "invalid_request_error"}}
    slow.default = Reply(
        400, {"content-type": "application/json"}, json.dumps(error).encode(), delay=0.4
    )
    fast.default = Reply.stream(*text_stream("from", " fast", usage=USAGE), delay=3.0)
    async with running_gateway(tmp_path, config(slow, fast, 100), env=ENV) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        began = time.monotonic()
        answer = await exchange(gw.host, gw.port, post("/v1/chat/completions", body(), key))
        took = time.monotonic() - began
    assert answer.status == 400 and took < 2.0, (answer.status, took)
