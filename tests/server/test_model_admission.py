"""What a request needs of its model, its connection and its price, refused before any
upstream call (routing/capabilities.py, metering/charges.py ``priced_plan``), through a
real gateway and the official openai SDK."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from openai import AsyncOpenAI, BadRequestError
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolParam

from sluice.server.lifecycle import RunningGateway
from tests.support.accounts import metered_key
from tests.support.fake_openai import completion
from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.gateway import openai_connection_toml, running_gateway

USER: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Say hello"}]
TOOL: ChatCompletionToolParam = {
    "type": "function",
    "function": {"name": "f", "parameters": {"type": "object", "properties": {}}},
}
TEXT_ONLY = """
[[models]]
id = "test/text-only"
providers = { conn_fake = "text-only" }
price = { input = 1.0, output = 1.0 }
capabilities = { chat = true, tools = false, vision = false }
"""
DEMO = '\n[[connections]]\nid = "conn_demo"\nprovider = "demo"\n'


def sdk(gw: RunningGateway, key: str | None = None) -> AsyncOpenAI:
    assert gw.dev_key is not None
    return AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=key or gw.dev_key.key, max_retries=0)


async def refused(gw: RunningGateway, key: str | None = None, **request: Any) -> BadRequestError:
    async with sdk(gw, key) as client:
        with pytest.raises(BadRequestError) as info:
            await client.chat.completions.create(messages=USER, **request)
    return info.value


def param(err: BadRequestError) -> Any:
    body: Any = err.body
    return body["param"]


async def test_a_model_that_cannot_serve_the_request_is_refused_before_any_upstream_call(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    config = openai_connection_toml(fake.base_url) + TEXT_ONLY + DEMO
    async with running_gateway(tmp_path, config) as gw:
        tools = await refused(gw, model="test/text-only", tools=[TOOL])
        chat = await refused(gw, model="sluice/demo-embed")
    assert (tools.code, param(tools)) == ("model_capability_missing", "tools")
    assert "'test/text-only' does not support tools" in tools.message
    assert chat.code == "model_capability_missing"
    assert "does not support chat completions" in chat.message
    assert fake.requests == []


async def test_an_extra_field_no_connection_allows_is_refused_by_name(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        err = await refused(gw, model="test/gpt-fake", extra_body={"min_p": 0.05})
    assert (err.code, param(err)) == ("unknown_parameter", "min_p")
    assert fake.requests == []


ALLOWING = """
allow_extra_fields = ["min_p", "top_k", "chat_template_kwargs"]
"""


async def test_allowed_extra_fields_reach_the_upstream_as_sent(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    config = openai_connection_toml(fake.base_url).replace(
        'api_key_env = "FAKE_UPSTREAM_KEY"', 'api_key_env = "FAKE_UPSTREAM_KEY"' + ALLOWING
    )
    extras = {"min_p": 0.05, "top_k": 20, "chat_template_kwargs": {"enable_thinking": False}}
    fake.queue(Reply.json(completion("Hi")))
    async with running_gateway(tmp_path, config) as gw, sdk(gw) as client:
        await client.chat.completions.create(
            model="test/gpt-fake", messages=USER, extra_body=extras
        )
    sent = fake.requests[0].json()
    assert {k: sent[k] for k in extras} == extras


async def test_a_metered_key_is_refused_an_unpriced_model(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        key = await metered_key(gw.gateway.store, "team", 10**9)
        err = await refused(gw, key, model="test/unpriced")
        await gw.gateway.writer.flush()
        account = await gw.gateway.store.get_account("team")
    assert err.code == "model_unpriced" and "allow_unpriced" in err.message
    assert account is not None and (account.balance, account.held) == (10**9, 0)
    assert fake.requests == []


async def test_allow_unpriced_serves_metered_keys_for_free(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.queue(Reply.json(completion("Hi")))
    config = openai_connection_toml(fake.base_url).replace(
        'api_key_env = "FAKE_UPSTREAM_KEY"',
        'api_key_env = "FAKE_UPSTREAM_KEY"\nallow_unpriced = true',
    )
    async with running_gateway(tmp_path, config) as gw:
        key = await metered_key(gw.gateway.store, "team", 10**9)
        async with sdk(gw, key) as client:
            answer = await client.chat.completions.create(model="test/unpriced", messages=USER)
    assert answer.choices[0].message.content == "Hi"
