"""Credit holds, settlement, credits_used and the request log, through a real gateway."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from sluice.core.tokens import estimate_prompt_tokens, prompt_token_ceiling, tokens_for_chars
from sluice.core.usage import Price, TokenUsage
from sluice.frontdoors.chat import decode_chat_request
from sluice.metering.charges import nano_from_pico
from sluice.metering.pricing import cost_pico
from sluice.server.lifecycle import RunningGateway
from tests.support.accounts import metered_key, settled
from tests.support.fake_openai import chunk, text_stream
from tests.support.fake_upstream import Cut, FakeUpstream, Pause, Reply, Step
from tests.support.gateway import openai_connection_toml, running_gateway
from tests.support.raw_http import RawClient, exchange, get, post

USD = 10**9
PRICE = Price.per_million(2.0, 8.0, cache_read=0.5)  # test/gpt-fake in openai_connection_toml
USAGE = {
    "prompt_tokens": 1000,
    "completion_tokens": 500,
    "total_tokens": 1500,
    "prompt_tokens_details": {"cached_tokens": 200},
}
MESSAGES = [{"role": "user", "content": "hello there"}]


def body(**extra: object) -> bytes:
    return json.dumps({"model": "test/gpt-fake", "messages": MESSAGES, **extra}).encode()


def sse(resp_body: bytes) -> list[dict[str, object]]:
    return [
        json.loads(e.removeprefix(b"data: "))
        for e in resp_body[:-2].split(b"\n\n")
        if e.startswith(b"data: {")
    ]


async def balance(gw: RunningGateway, name: str) -> tuple[int, int]:
    await settled(gw.gateway)
    account = await gw.gateway.store.get_account(name)
    assert account is not None
    return account.balance, account.held


async def test_a_metered_stream_is_held_charged_and_logged(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.queue(Reply.stream(*text_stream("Hi", " there", usage=USAGE)))
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        key = await metered_key(gw.gateway.store, "team", 1 * USD)
        other = await metered_key(gw.gateway.store, "other", 1 * USD)
        resp = await exchange(
            gw.host,
            gw.port,
            post(
                "/v1/chat/completions",
                body(stream=True, max_tokens=1000, stream_options={"include_usage": True}),
                key,
            ),
        )
        charged = nano_from_pico(
            cost_pico(
                TokenUsage(prompt_tokens=1000, completion_tokens=500, cached_tokens=200), PRICE
            )
        )
        assert await balance(gw, "team") == (1 * USD - charged, 0)
        assert await gw.gateway.store.reconcile() == []
        rid = resp.headers["x-request-id"]
        mine = await exchange(gw.host, gw.port, get(f"/v1/requests/{rid}", key))
        theirs = await exchange(gw.host, gw.port, get(f"/v1/requests/{rid}", other))
    usage_chunk = sse(resp.body)[-1]
    assert usage_chunk["credits_used"] == charged / USD
    usage = usage_chunk["usage"]
    assert isinstance(usage, dict)
    full = TokenUsage(prompt_tokens=1000, completion_tokens=500, cached_tokens=200)
    assert usage["cost"] == cost_pico(full, PRICE) / 1e12
    assert theirs.status == 404 and theirs.json()["error"]["code"] == "request_not_found"
    row = mine.json()
    ceiling = prompt_token_ceiling(decode_chat_request(body(max_tokens=1000)))
    held = TokenUsage(prompt_tokens=ceiling, completion_tokens=1000)
    assert row["credits_held"] == nano_from_pico(cost_pico(held, PRICE)) / USD
    assert {
        k: row[k]
        for k in (
            "id",
            "status",
            "finish_reason",
            "requested_model",
            "served_model",
            "route",
            "route_name",
            "provider",
            "connection",
            "prompt_tokens",
            "completion_tokens",
            "cached_tokens",
            "price_source",
            "credits_charged",
            "http_status",
            "stream",
            "usage_estimated",
        )
    } == {
        "id": rid,
        "status": "complete",
        "finish_reason": "stop",
        "requested_model": "test/gpt-fake",
        "served_model": "test/gpt-fake",
        "route": "primary",
        "route_name": None,
        "provider": "openai-compatible",
        "connection": "conn_fake",
        "prompt_tokens": 1000,
        "completion_tokens": 500,
        "cached_tokens": 200,
        "price_source": "list",
        "credits_charged": charged / USD,
        "http_status": 200,
        "stream": True,
        "usage_estimated": False,
    }
    assert row["ttft_ms"] > 0 and row["duration_ms"] >= row["ttft_ms"]
    assert row["attempts"][0]["outcome"] == "served"


async def test_insufficient_credits_is_402_before_any_upstream_call(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        key = await metered_key(gw.gateway.store, "poor", 1000)  # a millionth of a dollar
        resp = await exchange(
            gw.host, gw.port, post("/v1/chat/completions", body(max_tokens=4000), key)
        )
        assert await balance(gw, "poor") == (1000, 0)
        row = await exchange(
            gw.host, gw.port, get(f"/v1/requests/{resp.headers['x-request-id']}", key)
        )
    assert resp.status == 402
    assert resp.json()["error"]["type"] == "budget_exceeded"
    assert "with its max_tokens" in resp.json()["error"]["message"]
    assert fake.requests == []
    assert row.json()["status"] == "error" and row.json()["error_type"] == "budget_exceeded"


async def test_a_402_without_max_tokens_says_what_the_hold_assumed(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        key = await metered_key(gw.gateway.store, "poor", 1000)
        resp = await exchange(gw.host, gw.port, post("/v1/chat/completions", body(), key))
    message = resp.json()["error"]["message"]
    assert resp.status == 402 and "max_tokens)" not in message
    assert "with the model's longest answer; a lower max_tokens holds less" in message


async def test_a_cancelled_stream_pays_only_for_what_was_streamed(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    steps: list[Step] = [chunk(role="assistant", content="")]
    for _ in range(100):
        steps += [chunk(content="abcdefgh"), Pause(0.02)]
    fake.queue(Reply.stream(*steps))
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        key = await metered_key(gw.gateway.store, "team", 1 * USD)
        client = await RawClient.connect(gw.host, gw.port)
        await client.send(post("/v1/chat/completions", body(stream=True, max_tokens=2000), key))
        await client.read_head()
        seen = b""
        while seen.count(b"abcdefgh") < 5:
            piece = await client.read_chunk()
            assert piece is not None
            seen += piece
        await client.close()
        await asyncio.wait_for(fake.hung_up.wait(), 2)
        await asyncio.sleep(0.05)
        balance_after, held = await balance(gw, "team")
        request_id = seen.split(b'"id":"')[1].split(b'"')[0].decode()
        row = await exchange(gw.host, gw.port, get(f"/v1/requests/{request_id}", key))
    record = row.json()
    streamed = record["completion_tokens"]
    assert record["status"] == "cancelled" and record["usage_estimated"] is True
    # the estimate covers what was streamed: at least the 5 chunks read, not all 100
    assert tokens_for_chars(5 * 8) <= streamed < tokens_for_chars(100 * 8)
    prompt = estimate_prompt_tokens(decode_chat_request(body()))
    expected = nano_from_pico(
        cost_pico(TokenUsage(prompt_tokens=prompt, completion_tokens=streamed), PRICE)
    )
    assert held == 0 and balance_after == 1 * USD - expected
    assert record["credits_charged"] == expected / USD


async def test_a_failed_request_releases_its_hold_and_charges_nothing(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.queue(Reply.json({"error": {"message": "down"}}, status=503))
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        key = await metered_key(gw.gateway.store, "team", 1 * USD)
        resp = await exchange(
            gw.host, gw.port, post("/v1/chat/completions", body(stream=True), key)
        )
        assert await balance(gw, "team") == (1 * USD, 0)
        row = await exchange(
            gw.host, gw.port, get(f"/v1/requests/{resp.headers['x-request-id']}", key)
        )
        assert await gw.gateway.store.reconcile() == []
    assert resp.status == 503
    record = row.json()
    assert record["status"] == "error" and record["credits_charged"] == 0
    assert record["attempts"][0]["outcome"] == "service_unavailable"


async def test_connection_price_beats_the_list_price(tmp_path: Path, fake: FakeUpstream) -> None:
    fake.queue(
        Reply.json(
            {
                "id": "x",
                "object": "chat.completion",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "ok"},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 10},
            }
        )
    )
    config = openai_connection_toml(fake.base_url).replace(
        'api_key_env = "FAKE_UPSTREAM_KEY"',
        'api_key_env = "FAKE_UPSTREAM_KEY"\n'
        'prices = { "test/gpt-fake" = { input = 1.0, output = 1.0 } }',
    )
    async with running_gateway(tmp_path, config) as gw:
        key = await metered_key(gw.gateway.store, "team", 1 * USD)
        resp = await exchange(gw.host, gw.port, post("/v1/chat/completions", body(), key))
        assert await balance(gw, "team") == (1 * USD - 20_000, 0)  # 20 tokens at $1/M
    usage = resp.json()["usage"]
    assert (usage["cost"], usage["price_source"]) == (2e-5, "custom_provider")
    assert resp.json()["credits_used"] == 2e-5


async def test_a_charge_never_exceeds_the_hold(tmp_path: Path, fake: FakeUpstream) -> None:
    """The provider bills far more than the hold covered (a huge image, say): the account
    pays what was held and no more, so no balance goes below zero."""
    huge = {"prompt_tokens": 5_000_000, "completion_tokens": 10, "total_tokens": 5_000_010}
    fake.default = Reply.stream(*text_stream("x", usage=huge))
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        request = body(stream=True, max_tokens=10, stream_options={"include_usage": True})
        held = nano_from_pico(
            cost_pico(
                TokenUsage(
                    prompt_tokens=prompt_token_ceiling(decode_chat_request(request)),
                    completion_tokens=10,
                ),
                PRICE,
            )
        )
        key = await metered_key(gw.gateway.store, "team", 3 * held)
        responses = await asyncio.gather(
            *[
                exchange(gw.host, gw.port, post("/v1/chat/completions", request, key))
                for _ in range(3)
            ]
        )
        assert await balance(gw, "team") == (0, 0)
        assert await gw.gateway.store.reconcile() == []
    assert [r.status for r in responses] == [200, 200, 200]
    assert sse(responses[0].body)[-1]["credits_used"] == held / USD


async def test_a_cut_anthropic_stream_pays_for_what_streamed_not_its_first_count(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    """Anthropic's message_start reports 1 output token; a stream cut before its
    message_delta must still be charged for the text that went out."""
    from tests.support import fake_anthropic

    pieces = ["forty characters of streamed answer text"] * 50
    fake.queue(
        Reply.stream(
            fake_anthropic.message_start(20), *fake_anthropic.text_block(0, *pieces)[:-1], Cut()
        )
    )
    config = f"""
[[connections]]
id = "conn_claude"
provider = "anthropic"
base_url = "{fake.root_url}"
api_key_env = "FAKE_UPSTREAM_KEY"

[[models]]
id = "test/claude"
providers = {{ conn_claude = "claude-test" }}
price = {{ input = 2.0, output = 8.0 }}
"""
    async with running_gateway(tmp_path, config) as gw:
        key = await metered_key(gw.gateway.store, "team", 1 * USD)
        request = json.dumps(
            {"model": "test/claude", "stream": True, "max_tokens": 2000, "messages": MESSAGES}
        ).encode()
        resp = await exchange(gw.host, gw.port, post("/v1/chat/completions", request, key))
        row = (
            await exchange(
                gw.host, gw.port, get(f"/v1/requests/{resp.headers['x-request-id']}", key)
            )
        ).json()
    streamed = tokens_for_chars(sum(len(p) for p in pieces))
    assert row["status"] == "incomplete" and row["usage_estimated"] is True
    assert row["prompt_tokens"] == 20  # the provider's count, kept
    assert row["completion_tokens"] == streamed  # not the 1 of message_start
    assert (
        row["credits_charged"]
        == nano_from_pico(
            cost_pico(TokenUsage(prompt_tokens=20, completion_tokens=streamed), PRICE)
        )
        / USD
    )
