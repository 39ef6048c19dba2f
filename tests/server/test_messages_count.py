"""``POST /v1/messages/count_tokens``: the Anthropic upstream's own count where it serves
the model, the estimator otherwise or when the upstream cannot answer; the source said
in the answer, the model checked like a request's."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import anthropic
import pytest
from anthropic import AsyncAnthropic

from sluice.core.principal import KeyPolicy
from sluice.core.tokens import estimate_prompt_tokens
from sluice.frontdoors.messages.decode import decode_count_request
from sluice.server.lifecycle import RunningGateway
from tests.server.test_admin import ADMIN, ENV
from tests.server.test_anthropic_gateway import config as anthropic_toml
from tests.support.accounts import metered_key
from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.gateway import openai_connection_toml, running_gateway
from tests.support.raw_http import exchange, get, post

PROMPT: dict[str, Any] = {
    "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
    "messages": [{"role": "user", "content": "How many tokens is this?"}],
    "tools": [{"name": "f", "description": "F.", "input_schema": {"type": "object"}}],
}


def sdk(gw: RunningGateway) -> AsyncAnthropic:
    assert gw.dev_key is not None
    return AsyncAnthropic(base_url=gw.base_url, api_key=gw.dev_key.key, max_retries=0)


async def test_an_anthropic_upstream_counts_for_itself(tmp_path: Path, fake: FakeUpstream) -> None:
    fake.queue(Reply.json({"input_tokens": 1234}))
    async with running_gateway(tmp_path, anthropic_toml(fake)) as gw, sdk(gw) as client:
        raw = await client.messages.with_raw_response.count_tokens(model="test/claude", **PROMPT)
        counted = await raw.parse()
    assert counted.input_tokens == 1234
    assert (counted.model_extra or {})["source"] == "provider"
    [sent] = fake.requests
    assert (sent.method, sent.path) == ("POST", "/v1/messages/count_tokens")
    assert json.loads(sent.body) == {**PROMPT, "model": "claude-test"}
    assert "max_tokens" not in json.loads(sent.body)


@pytest.mark.parametrize(
    "failure", [Reply.json({"error": {"type": "api_error"}}, 500), Reply.json([])]
)
async def test_an_upstream_that_cannot_count_leaves_the_estimate(
    tmp_path: Path, fake: FakeUpstream, failure: Reply
) -> None:
    fake.queue(failure)
    async with running_gateway(tmp_path, anthropic_toml(fake)) as gw, sdk(gw) as client:
        counted = await client.messages.count_tokens(model="test/claude", **PROMPT)
    body = json.dumps({"model": "test/claude", **PROMPT}).encode()
    assert counted.input_tokens == estimate_prompt_tokens(decode_count_request(body))
    assert (counted.model_extra or {})["source"] == "estimate"


async def test_a_provider_without_a_count_endpoint_is_estimated(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        async with sdk(gw) as client:
            counted = await client.messages.count_tokens(model="test/gpt-fake", **PROMPT)
    assert counted.input_tokens > 0 and (counted.model_extra or {})["source"] == "estimate"
    assert fake.requests == []


async def test_the_model_is_checked_like_a_requests(tmp_path: Path, fake: FakeUpstream) -> None:
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        scoped = await metered_key(gw.gateway.store, "team", 10**9, KeyPolicy(models=("x/*",)))
        async with sdk(gw) as client:
            with pytest.raises(anthropic.NotFoundError) as missing:
                await client.messages.count_tokens(model="test/nope", **PROMPT)
        body = json.dumps({"model": "test/gpt-fake", **PROMPT}).encode()
        refused = await exchange(
            gw.host,
            gw.port,
            post("/v1/messages/count_tokens", body, None, extra=f"x-api-key: {scoped}\r\n"),
        )
    assert missing.value.status_code == 404
    assert refused.status == 403
    assert refused.json()["error"]["type"] == "permission_error"


def count_body(text: str = "How many tokens is this?") -> bytes:
    return json.dumps(
        {"model": "test/claude", "messages": [{"role": "user", "content": text}]}
    ).encode()


async def count(gw: RunningGateway, key: str, body: bytes) -> Any:
    headers = f"x-api-key: {key}\r\n"
    return await exchange(
        gw.host, gw.port, post("/v1/messages/count_tokens", body, None, extra=headers)
    )


async def test_counting_counts_against_the_keys_request_limit(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    """Found by an attacker's pass: a $0 tenant limited to 1 request a minute made 500
    upstream calls in 0.3 s through count_tokens."""
    fake.default = Reply.json({"input_tokens": 7})
    async with running_gateway(tmp_path, anthropic_toml(fake)) as gw:
        key = await metered_key(gw.gateway.store, "team", 0, KeyPolicy(rpm=2))
        answers = [await count(gw, key, count_body(f"text {i}")) for i in range(5)]
    assert [a.status for a in answers] == [200, 200, 429, 429, 429]
    assert answers[2].json()["error"]["type"] == "rate_limit_error"
    assert len(fake.requests) == 2


async def test_the_same_prompt_is_counted_once(tmp_path: Path, fake: FakeUpstream) -> None:
    fake.default = Reply.json({"input_tokens": 7})
    async with running_gateway(tmp_path, anthropic_toml(fake)) as gw:
        key = await metered_key(gw.gateway.store, "team", 10**9)
        again = [await count(gw, key, count_body()) for _ in range(3)]
        other = await count(gw, key, count_body("something else"))
    assert [a.json() for a in again] == [{"input_tokens": 7, "source": "provider"}] * 3
    assert other.status == 200 and len(fake.requests) == 2


async def test_a_connection_the_breaker_holds_off_is_not_asked_to_count(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    """Found by an attacker's pass: counts went to the provider past an open breaker."""
    config = "[routing]\nbreaker_failures = 1\n" + anthropic_toml(fake)
    message = json.dumps(
        {"model": "test/claude", "max_tokens": 5, "messages": [{"role": "user", "content": "a"}]}
    ).encode()
    async with running_gateway(tmp_path, config) as gw:
        key = await metered_key(gw.gateway.store, "team", 10**9)
        fake.queue(Reply.json({"type": "error", "error": {"type": "api_error"}}, 500))
        failed = await exchange(
            gw.host, gw.port, post("/v1/messages", message, None, extra=f"x-api-key: {key}\r\n")
        )
        counted = await count(gw, key, count_body())
    assert failed.status >= 500
    assert counted.status == 200 and counted.json()["source"] == "estimate"
    assert [r.path for r in fake.requests] == ["/v1/messages"]  # no count was asked for


async def test_every_count_gets_a_request_log_row(tmp_path: Path, fake: FakeUpstream) -> None:
    fake.queue(Reply.json({"input_tokens": 1234}))
    async with running_gateway(tmp_path, anthropic_toml(fake)) as gw:
        key = await metered_key(gw.gateway.store, "team", 10**9)
        answer = await count(gw, key, count_body())
        request_id = answer.headers["x-request-id"]
        row = await exchange(gw.host, gw.port, get(f"/v1/requests/{request_id}", key))
    assert row.status == 200, row.body
    logged = row.json()
    assert (logged["front_door"], logged["status"], logged["prompt_tokens"]) == (
        "count_tokens",
        "complete",
        1234,
    )
    assert (logged["provider"], logged["connection"], logged["usage_estimated"]) == (
        "anthropic",
        "conn_claude",
        False,
    )


async def test_counts_that_cost_nothing_share_a_row(tmp_path: Path, fake: FakeUpstream) -> None:
    """A count answered from the cache (or estimated) is free to repeat: like a refusal,
    one row a minute per key and model counts them."""
    fake.default = Reply.json({"input_tokens": 7})
    async with running_gateway(tmp_path, anthropic_toml(fake), env=ENV) as gw:
        key = await metered_key(gw.gateway.store, "team", 10**9)
        answers = [await count(gw, key, count_body()) for _ in range(6)]
        await asyncio.sleep(1.3)  # the window's row is written again with its count
        await gw.gateway.writer.flush()
        listing = await exchange(gw.host, gw.port, get("/admin/requests?account=team", ADMIN))
    assert {a.status for a in answers} == {200} and len(fake.requests) == 1
    rows = sorted(listing.json()["data"], key=lambda r: r["coalesced"])
    assert [(r["front_door"], r["coalesced"]) for r in rows] == [
        ("count_tokens", 0),  # the provider's count
        ("count_tokens", 4),  # the first answer from the cache, and 4 more
    ]
