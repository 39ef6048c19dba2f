"""``POST /v1/messages/count_tokens``: the Anthropic upstream's own count where it serves
the model, the estimator otherwise or when the upstream cannot answer; the source said
in the answer, the model checked like a request's."""

from __future__ import annotations

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
from tests.server.test_anthropic_gateway import config as anthropic_toml
from tests.support.accounts import metered_key
from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.gateway import openai_connection_toml, running_gateway
from tests.support.raw_http import exchange, post

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
