"""Whole answers and the response cache (issue 26, docs/cache.md#whole-answers): a
request for a whole answer is served from a kept streamed answer, folded as a
provider's whole answer is (text, tool calls, usage), through the official SDKs; a
whole answer is kept too and streams again to a streamed request; one cut at `length`
is not kept."""

from __future__ import annotations

from pathlib import Path

import pytest
from anthropic import AsyncAnthropic
from openai import AsyncOpenAI

from tests.server.test_cache import (
    FUNDS,
    PIECES,
    USAGE,
    ask,
    chat_body,
    config,
    contents,
    fake,
    row,
)
from tests.support.accounts import metered_key
from tests.support.fake_openai import DONE, chunk, completion
from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.gateway import running_gateway

__all__ = ["fake"]  # the fixture

CALL = {"index": 0, "id": "call_1", "type": "function"}


async def test_a_whole_request_is_served_from_a_streamed_answer(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    async with running_gateway(tmp_path, config(fake)) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        await ask(gw, key)
        client = AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=key, max_retries=0)
        raw = await client.chat.completions.with_raw_response.create(
            model="test/m",
            max_tokens=100,
            messages=[{"role": "user", "content": "What is the answer?"}],
        )
        answer = raw.parse()
        logged = await row(gw, key, raw.headers["x-request-id"])
        anthropic = AsyncAnthropic(base_url=gw.base_url, api_key=key, max_retries=0)
        message = await anthropic.messages.create(
            model="test/m",
            max_tokens=100,
            messages=[{"role": "user", "content": "What is the answer?"}],
        )
        await client.close()
        await anthropic.close()
    assert len(fake.requests) == 1 and raw.headers["x-sluice-cache"] == "hit"
    assert answer.choices[0].message.content == "".join(PIECES)
    assert answer.choices[0].finish_reason == "stop"
    usage = answer.usage
    assert usage is not None and usage.completion_tokens == USAGE["completion_tokens"]
    assert usage.model_extra is not None and usage.model_extra["price_source"] == "cache"
    assert logged["cache"] == "hit" and logged["credits_charged"] == 0
    assert [b.text for b in message.content if b.type == "text"] == ["".join(PIECES)]


async def test_tool_calls_fold_into_a_whole_answer(tmp_path: Path, fake: FakeUpstream) -> None:
    fake.default = Reply.stream(
        chunk(
            role="assistant", tool_calls=[{**CALL, "function": {"name": "add", "arguments": ""}}]
        ),
        chunk(tool_calls=[{"index": 0, "function": {"arguments": '{"a": 1, '}}]),
        chunk(tool_calls=[{"index": 0, "function": {"arguments": '"b": 2}'}}]),
        chunk(finish="tool_calls"),
        chunk(usage=USAGE, choices=False),
        DONE,
    )
    async with running_gateway(tmp_path, config(fake)) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        await ask(gw, key)
        client = AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=key, max_retries=0)
        answer = await client.chat.completions.create(
            model="test/m",
            max_tokens=100,
            messages=[{"role": "user", "content": "What is the answer?"}],
        )
        await client.close()
    assert len(fake.requests) == 1
    choice = answer.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    [call] = choice.message.tool_calls or []
    assert call.id == "call_1" and call.type == "function"
    assert call.function.name == "add" and call.function.arguments == '{"a": 1, "b": 2}'


async def test_a_whole_answer_is_kept_and_streams_again(tmp_path: Path, fake: FakeUpstream) -> None:
    fake.default = Reply.json(completion("".join(PIECES), usage=USAGE))
    async with running_gateway(tmp_path, config(fake)) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        whole = await ask(gw, key, chat_body(stream=False))
        streamed = await ask(gw, key)
        again = await ask(gw, key, chat_body(stream=False))
    assert len(fake.requests) == 1
    assert [a.headers["x-sluice-cache"] for a in (whole, streamed, again)] == ["miss", "hit", "hit"]
    assert contents(streamed.body) == "".join(PIECES)
    assert streamed.body.endswith(b"data: [DONE]\n\n")
    assert again.json()["choices"][0]["message"]["content"] == "".join(PIECES)


@pytest.mark.parametrize("finish", ["length", "content_filter"])
async def test_a_whole_answer_cut_short_is_not_kept(
    tmp_path: Path, fake: FakeUpstream, finish: str
) -> None:
    fake.default = Reply.json(completion("The answer", usage=USAGE, finish=finish))
    async with running_gateway(tmp_path, config(fake)) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        answers = [await ask(gw, key, chat_body(stream=False)) for _ in range(2)]
    assert [a.headers["x-sluice-cache"] for a in answers] == ["miss", "miss"]
    assert len(fake.requests) == 2
