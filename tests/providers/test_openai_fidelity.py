"""The fake OpenAI upstream and the recorded fixtures, read by the official openai SDK.

If the SDK parses what the fake sends (and what the fixtures hold) into the content we
expect, the fake speaks OpenAI's wire format, so the gateway tests built on it mean
something.
"""

from __future__ import annotations

import json

import pytest
from openai import APIError, AsyncOpenAI

from sluice.wire.sse import SSEDecoder
from tests.support.fake_openai import completion, text_stream
from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.transcript import FIXTURES

COMPLETE = [
    "text",
    "tool_call_fragments",
    "parallel_tool_calls",
    "text_then_tool",
    "deepseek_reasoning",
    "length",
    "content_filter",
    "prompt_cache",
    "two_choices",
    "tools_without_index",
    "compat_quirks",
]


def raw_finish_reasons(raw: bytes) -> list[str]:
    reasons = []
    for event in SSEDecoder().feed(raw):
        if not event.is_done:
            reasons += [
                c["finish_reason"]
                for c in json.loads(event.data).get("choices", [])
                if c.get("finish_reason")
            ]
    return reasons


def client(fake: FakeUpstream) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=fake.base_url, api_key="sk-test", max_retries=0)


async def test_sdk_reads_the_fakes_text_stream(fake: FakeUpstream) -> None:
    fake.queue(
        Reply.stream(
            *text_stream(
                "Hel", "lo", usage={"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
            )
        )
    )
    async with client(fake) as sdk:
        stream = await sdk.chat.completions.create(
            model="gpt-fake", messages=[{"role": "user", "content": "x"}], stream=True
        )
        chunks = [c async for c in stream]
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Hello"
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens == 5


async def test_sdk_reads_the_fakes_completion(fake: FakeUpstream) -> None:
    fake.queue(
        Reply.json(
            completion(
                "Hi",
                tool_calls=[
                    {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            )
        )
    )
    async with client(fake) as sdk:
        result = await sdk.chat.completions.create(
            model="gpt-fake", messages=[{"role": "user", "content": "x"}]
        )
    assert result.choices[0].message.content == "Hi"
    assert result.choices[0].message.tool_calls is not None


@pytest.mark.parametrize("name", COMPLETE)
async def test_sdk_reads_every_complete_fixture(fake: FakeUpstream, name: str) -> None:
    raw = (FIXTURES / "openai" / f"{name}.raw").read_bytes()
    fake.queue(Reply.stream(raw))
    async with client(fake) as sdk:
        stream = await sdk.chat.completions.create(
            model="gpt-fake", messages=[{"role": "user", "content": "x"}], stream=True
        )
        chunks = [c async for c in stream]
    expected = [
        json.loads(line)
        for line in (FIXTURES / "openai" / f"{name}.chunks.jsonl").read_text().splitlines()
    ]
    want = "".join(line["choices"][0]["delta"].get("content", "") for line in expected[:-1])
    got = "".join(choice.delta.content or "" for c in chunks for choice in c.choices)
    assert got == want
    finishes = [c.finish_reason for ch in chunks for c in ch.choices if c.finish_reason]
    assert finishes == raw_finish_reasons(raw)  # as the upstream sent them, not normalized


async def test_sdk_raises_on_the_error_fixture(fake: FakeUpstream) -> None:
    fake.queue(Reply.stream((FIXTURES / "openai" / "error_midstream.raw").read_bytes()))
    async with client(fake) as sdk:
        stream = await sdk.chat.completions.create(
            model="gpt-fake", messages=[{"role": "user", "content": "x"}], stream=True
        )
        with pytest.raises(APIError):
            async for _ in stream:
                pass


def test_every_fixture_is_classified() -> None:
    names = {p.stem for p in (FIXTURES / "openai").glob("*.raw")}
    assert names == {*COMPLETE, "error_midstream", "cut"}
