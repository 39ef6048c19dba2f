"""Identical requests in flight (issue 26, docs/cache.md#identical-requests-in-flight):
while a cacheable miss streams, identical requests join it rather than call the
upstream again. 50 concurrent identical streams reach the fake upstream once and every
client gets the whole transcript, each in its own wire format and metered as a hit;
the first client leaving changes nothing for the others; an upstream failure
mid-stream is every joiner's error event and nothing is kept."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from anthropic import AsyncAnthropic

from sluice.server.lifecycle import RunningGateway
from tests.server.test_cache import FUNDS, PIECES, USAGE, ask, chat_body, config, contents, row
from tests.server.test_metrics_mix import samples
from tests.server.test_reload import ADMIN, ENV
from tests.support.accounts import metered_key
from tests.support.fake_openai import text_stream
from tests.support.fake_upstream import Cut, FakeUpstream, Reply, WaitFor
from tests.support.gateway import running_gateway
from tests.support.raw_http import RawClient, RawResponse, exchange, get, post

JOINERS = 49


@asynccontextmanager
async def gated(
    tmp_path: Path, *, cut: bool = False, cache: str = "{ ttl = 600 }"
) -> AsyncIterator[tuple[RunningGateway, FakeUpstream, asyncio.Event]]:
    """A gateway before a fake upstream that sends the first two pieces, then waits for
    the returned gate (then ends whole, or is cut)."""
    gate = asyncio.Event()
    steps = text_stream(*PIECES, usage=USAGE)
    tail = [Cut()] if cut else steps[3:]
    fake = FakeUpstream()
    await fake.start()
    fake.default = Reply.stream(*steps[:3], WaitFor(gate), *tail)
    try:
        async with running_gateway(tmp_path, config(fake, cache), env=ENV) as gw:
            yield gw, fake, gate
    finally:
        gate.set()
        await fake.close()


async def leading(gw: RunningGateway, key: str) -> tuple[RawClient, dict[str, str]]:
    """The first request, read up to its first content (the upstream waits there)."""
    client = await RawClient.connect(gw.host, gw.port)
    await client.send(post("/v1/chat/completions", chat_body(), key))
    _, head = await client.read_head()
    seen = b""
    while b"The " not in seen:
        piece = await client.read_chunk()
        assert piece is not None
        seen += piece
    return client, head


async def joined(gw: RunningGateway, key: str, count: int) -> list[asyncio.Task[RawResponse]]:
    """``count`` identical requests, started once each is seen in flight by the gateway."""
    tasks = [asyncio.ensure_future(ask(gw, key)) for _ in range(count)]
    while gw.gateway.current.services.flights.joiners < count:
        await asyncio.sleep(0.01)
    return tasks


async def rest_of(client: RawClient) -> bytes:
    body = b""
    while (piece := await client.read_chunk()) is not None:
        body += piece
    return body


async def test_fifty_identical_streams_reach_the_upstream_once(tmp_path: Path) -> None:
    async with gated(tmp_path) as (gw, fake, gate):
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        first, head = await leading(gw, key)
        tasks = await joined(gw, key, JOINERS)
        scraped = await exchange(gw.host, gw.port, get("/metrics", ADMIN))
        gate.set()
        answers = await asyncio.gather(*tasks)
        led = await rest_of(first)
        await first.close()
        logged = await row(gw, key, answers[0].headers["x-request-id"])
        later = await ask(gw, key)
    assert len(fake.requests) == 1
    assert head["x-sluice-cache"] == "miss" and b"forty-" in led
    assert {a.headers["x-sluice-cache"] for a in answers} == {"hit"}
    assert all(contents(a.body) == "".join(PIECES) for a in answers)
    assert all(a.body.endswith(b"data: [DONE]\n\n") for a in answers)
    assert logged["cache"] == "hit" and logged["credits_charged"] == 0
    assert logged["cache_filled_by"] == head["x-request-id"]
    assert later.headers["x-sluice-cache"] == "hit" and len(fake.requests) == 1
    found = samples(scraped.body.decode())
    assert found["sluice_cache_flights", ()] == 1
    assert found["sluice_cache_flight_joiners", ()] == JOINERS


async def test_the_first_client_leaving_changes_nothing_for_the_others(tmp_path: Path) -> None:
    async with gated(tmp_path) as (gw, fake, gate):
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        first, head = await leading(gw, key)
        tasks = await joined(gw, key, JOINERS)
        await first.close()
        await asyncio.sleep(0.2)  # the gateway has seen it go
        gate.set()
        answers = await asyncio.gather(*tasks)
        left = await row(gw, key, head["x-request-id"])
        later = await ask(gw, key)
    assert len(fake.requests) == 1 and not fake.hung_up.is_set()
    assert all(contents(a.body) == "".join(PIECES) for a in answers)
    assert all(a.body.endswith(b"data: [DONE]\n\n") for a in answers)
    assert left["status"] == "cancelled" and left["completion_tokens"] == USAGE["completion_tokens"]
    assert left["credits_charged"] > 0  # the leader's upstream call, read whole, is its own
    assert later.headers["x-sluice-cache"] == "hit"  # drained whole, unguarded: kept


async def test_an_upstream_failure_mid_stream_is_every_clients_error_and_nothing_is_kept(
    tmp_path: Path,
) -> None:
    async with gated(tmp_path, cut=True) as (gw, fake, gate):
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        first, _ = await leading(gw, key)
        tasks = await joined(gw, key, JOINERS)
        gate.set()
        answers = await asyncio.gather(*tasks)
        led = await rest_of(first)
        await first.close()
        later = await ask(gw, key)
    assert b'"error"' in led and b"[DONE]" not in led
    for answer in answers:
        assert b'"error"' in answer.body and b"[DONE]" not in answer.body
        assert contents(answer.body) == "".join(PIECES[:2])
    assert later.headers["x-sluice-cache"] == "miss" and len(fake.requests) == 2


async def test_joiners_are_served_in_their_own_wire_format(tmp_path: Path) -> None:
    async with gated(tmp_path) as (gw, fake, gate):
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        first, _ = await leading(gw, key)
        client = AsyncAnthropic(base_url=gw.base_url, api_key=key, max_retries=0)
        tasks = [asyncio.ensure_future(_messages(client)) for _ in range(3)]
        while gw.gateway.current.services.flights.joiners < len(tasks):
            await asyncio.sleep(0.01)
        gate.set()
        folded = await asyncio.gather(*tasks)
        await rest_of(first)
        await first.close()
        await client.close()
    assert len(fake.requests) == 1
    assert folded == [("hit", "".join(PIECES), USAGE["completion_tokens"])] * 3


async def _messages(client: AsyncAnthropic) -> tuple[str, str, int]:
    async with client.messages.stream(
        model="test/m",
        max_tokens=100,
        messages=[{"role": "user", "content": "What is the answer?"}],
    ) as stream:
        message = await stream.get_final_message()
        outcome = stream.response.headers["x-sluice-cache"]
    text = "".join(b.text for b in message.content if b.type == "text")
    return outcome, text, message.usage.output_tokens


async def test_a_no_cache_request_does_not_join(tmp_path: Path) -> None:
    async with gated(tmp_path) as (gw, fake, gate):
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        first, _ = await leading(gw, key)
        fresh = asyncio.ensure_future(ask(gw, key, headers="Cache-Control: no-cache\r\n"))
        while len(fake.requests) < 2:
            await asyncio.sleep(0.01)
        gate.set()
        answer = await fresh
        await rest_of(first)
        await first.close()
    assert answer.headers["x-sluice-cache"] == "miss" and contents(answer.body) == "".join(PIECES)


async def test_joiners_of_a_request_left_before_its_first_event_go_upstream_themselves(
    tmp_path: Path,
) -> None:
    async with gated(tmp_path) as (gw, fake, gate):
        fake.default = Reply.stream(WaitFor(gate), *text_stream(*PIECES, usage=USAGE))
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        first = await RawClient.connect(gw.host, gw.port)
        await first.send(post("/v1/chat/completions", chat_body(), key))
        while not fake.requests:
            await asyncio.sleep(0.01)
        tasks = await joined(gw, key, 3)
        await first.close()
        while len(fake.requests) < 4:
            await asyncio.sleep(0.01)
        gate.set()
        answers = await asyncio.gather(*tasks)
        charged = [
            (await row(gw, key, a.headers["x-request-id"]))["credits_charged"] for a in answers
        ]
    assert [a.headers["x-sluice-cache"] for a in answers] == ["miss"] * 3
    assert all(contents(a.body) == "".join(PIECES) for a in answers)
    assert all(c > 0 for c in charged)  # each went upstream: charged as a miss
