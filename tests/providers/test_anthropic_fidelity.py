"""The fake Anthropic upstream and the recorded fixtures, read by the official anthropic SDK.

If the SDK parses what the fake sends (and what the fixtures hold) into the text, tool
inputs and usage our translator produced from the same bytes, the fake and the
fixtures speak Anthropic's wire format, and the gateway tests built on them mean
something.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from anthropic import APIStatusError, AsyncAnthropic
from anthropic.types import Message, MessageParam

from tests.support.fake_anthropic import (
    message,
    message_end,
    message_start,
    text_block,
    text_stream,
    tool_block,
    usage,
)
from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.transcript import FIXTURES

COMPLETE = [
    "text",
    "tool_call_fragments",
    "parallel_tool_calls",
    "text_then_tool",
    "tool_without_arguments",
    "thinking",
    "length",
    "prompt_cache",
    "refusal",
]
FINISH = {
    "end_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "refusal": "content_filter",
}
ASK: list[MessageParam] = [{"role": "user", "content": "x"}]


def client(fake: FakeUpstream) -> AsyncAnthropic:
    return AsyncAnthropic(base_url=fake.root_url, api_key="sk-ant-test", max_retries=0)


async def final_message(fake: FakeUpstream) -> Message:
    async with (
        client(fake) as sdk,
        sdk.messages.stream(model="claude-test", max_tokens=100, messages=ASK) as stream,
    ):
        async for _ in stream:
            pass
        return await stream.get_final_message()


def ours(name: str) -> dict[str, Any]:
    """What our translator made of a fixture: text, reasoning, tool inputs, finish, usage."""
    lines = [
        json.loads(line)
        for line in (FIXTURES / "anthropic" / f"{name}.chunks.jsonl").read_text().splitlines()
    ]
    text, reasoning, finish = "", "", None
    arguments: dict[int, str] = {}
    for line in lines[:-1]:
        choice = line["choices"][0]
        delta = choice["delta"]
        text += delta.get("content", "")
        reasoning += delta.get("reasoning_content", "")
        for call in delta.get("tool_calls", []):
            arguments[call["index"]] = (
                arguments.get(call["index"], "") + call["function"]["arguments"]
            )
        finish = choice["finish_reason"] or finish
    inputs = [json.loads(arguments[i]) for i in sorted(arguments)]
    return {"text": text, "reasoning": reasoning, "inputs": inputs, "finish": finish, **lines[-1]}


def seen_by_sdk(final: Message) -> dict[str, Any]:
    return {
        "text": "".join(b.text for b in final.content if b.type == "text"),
        "reasoning": "".join(b.thinking for b in final.content if b.type == "thinking"),
        "inputs": [b.input for b in final.content if b.type == "tool_use"],
        "finish": FINISH[final.stop_reason or ""],
    }


async def test_sdk_reads_the_fakes_text_stream(fake: FakeUpstream) -> None:
    fake.queue(Reply.stream(*text_stream("Hel", "lo", final_usage=usage(3, 2))))
    async with (
        client(fake) as sdk,
        sdk.messages.stream(model="claude-test", max_tokens=100, messages=ASK) as stream,
    ):
        text = "".join([piece async for piece in stream.text_stream])
        final = await stream.get_final_message()
    assert text == "Hello"
    assert (final.usage.input_tokens, final.usage.output_tokens) == (3, 2)
    assert fake.requests[0].path == "/v1/messages"


async def test_sdk_reads_the_fakes_tool_stream(fake: FakeUpstream) -> None:
    fake.queue(
        Reply.stream(
            message_start(),
            *text_block(0, "Checking."),
            *tool_block(1, "toolu_1", "get_weather", '{"city": ', '"Oslo"}'),
            *message_end("tool_use", usage(12, 20)),
        )
    )
    final = await final_message(fake)
    tool = final.content[1]
    assert tool.type == "tool_use" and (tool.id, tool.name) == ("toolu_1", "get_weather")
    assert tool.input == {"city": "Oslo"}
    assert final.stop_reason == "tool_use"


async def test_sdk_reads_the_fakes_message(fake: FakeUpstream) -> None:
    content: list[dict[str, Any]] = [
        {"type": "text", "text": "Hi"},
        {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}},
    ]
    fake.queue(Reply.json(message(content, stop_reason="tool_use")))
    async with client(fake) as sdk:
        result = await sdk.messages.create(model="claude-test", max_tokens=100, messages=ASK)
    assert [b.type for b in result.content] == ["text", "tool_use"]
    assert result.usage.output_tokens == 5


@pytest.mark.parametrize("name", COMPLETE)
async def test_sdk_and_translator_agree_on_every_complete_fixture(
    fake: FakeUpstream, name: str
) -> None:
    fake.queue(Reply.stream((FIXTURES / "anthropic" / f"{name}.raw").read_bytes()))
    final = await final_message(fake)
    expected = ours(name)
    assert seen_by_sdk(final) == {k: expected[k] for k in ("text", "reasoning", "inputs", "finish")}
    sdk_usage = final.usage
    cache_write = sdk_usage.cache_creation_input_tokens or 0
    cache_read = sdk_usage.cache_read_input_tokens or 0
    assert expected["usage"]["prompt_tokens"] == sdk_usage.input_tokens + cache_write + cache_read
    assert expected["usage"]["completion_tokens"] == sdk_usage.output_tokens
    assert expected["usage"]["cached_tokens"] == cache_read


async def test_sdk_raises_on_the_error_fixture(fake: FakeUpstream) -> None:
    fake.queue(Reply.stream((FIXTURES / "anthropic" / "error_midstream.raw").read_bytes()))
    with pytest.raises(APIStatusError) as info:
        await final_message(fake)
    assert "overloaded_error" in info.value.message


async def test_sdk_sees_the_cut_fixture_unfinished(fake: FakeUpstream) -> None:
    fake.queue(Reply.stream((FIXTURES / "anthropic" / "cut.raw").read_bytes()))
    final = await final_message(fake)
    assert final.stop_reason is None
    assert ours("cut")["end"] == {"type": "upstream_error", "code": "stream_incomplete"}


def test_every_fixture_is_classified() -> None:
    names = {p.stem for p in (FIXTURES / "anthropic").glob("*.raw")}
    assert names == {*COMPLETE, "error_midstream", "cut"}
