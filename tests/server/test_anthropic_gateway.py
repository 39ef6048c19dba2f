"""The official openai SDK, through the gateway, to a fake Anthropic upstream."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from openai import APIError, APIStatusError, AsyncOpenAI
from openai.types.chat import ChatCompletionMessageParam

from sluice.server.lifecycle import RunningGateway
from sluice.wire.sse import SSEDecoder
from tests.support.fake_anthropic import error_body, message, usage
from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.gateway import UPSTREAM_KEY, running_gateway
from tests.support.transcript import FIXTURES

ASK: list[ChatCompletionMessageParam] = [
    {"role": "system", "content": "Answer from the document."},
    {"role": "user", "content": "What is the answer?"},
]


def config(fake: FakeUpstream) -> str:
    return f"""
[[connections]]
id = "conn_claude"
provider = "anthropic"
base_url = "{fake.root_url}"
api_key_env = "FAKE_UPSTREAM_KEY"

[[models]]
id = "test/claude"
providers = {{ conn_claude = "claude-test" }}
price = {{ input = 3.0, output = 15.0, cache_read = 0.3, cache_write = 3.75 }}
"""


def sdk(gw: RunningGateway) -> AsyncOpenAI:
    assert gw.dev_key is not None
    return AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=gw.dev_key.key, max_retries=0)


def fixture(name: str) -> bytes:
    return (FIXTURES / "anthropic" / f"{name}.raw").read_bytes()


def sent_arguments(raw: bytes) -> list[str]:
    """The exact input JSON text the upstream streamed, per tool_use block in order."""
    calls: dict[int, str] = {}
    for event in SSEDecoder().feed(raw):
        doc = json.loads(event.data)
        if doc["type"] == "content_block_start" and doc["content_block"]["type"] == "tool_use":
            calls[doc["index"]] = ""
        elif doc["type"] == "content_block_delta" and doc["delta"]["type"] == "input_json_delta":
            calls[doc["index"]] += doc["delta"]["partial_json"]
    return [calls[i] or "{}" for i in sorted(calls)]


async def test_streams_text_finish_and_cache_usage(tmp_path: Path, fake: FakeUpstream) -> None:
    fake.queue(Reply.stream(fixture("prompt_cache")))
    async with running_gateway(tmp_path, config(fake)) as gw, sdk(gw) as client:
        stream = await client.chat.completions.create(
            model="test/claude",
            messages=ASK,
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [c async for c in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Based on the document, the answer is 42."
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert all(dict(c.model_extra or {})["provider"] == "anthropic" for c in chunks)
    usage = chunks[-1].usage
    assert chunks[-1].choices == [] and usage is not None
    assert (usage.prompt_tokens, usage.completion_tokens) == (14 + 512 + 2048, 11)
    assert usage.prompt_tokens_details is not None
    assert usage.prompt_tokens_details.cached_tokens == 2048
    cost = (14 * 3.0 + 2048 * 0.3 + 512 * 3.75 + 11 * 15.0) / 1e6
    assert dict(usage.model_extra or {})["cost"] == pytest.approx(cost, abs=1e-12)


async def test_upstream_request_path_headers_and_body(tmp_path: Path, fake: FakeUpstream) -> None:
    fake.queue(Reply.stream(fixture("text")))
    async with running_gateway(tmp_path, config(fake)) as gw, sdk(gw) as client:
        stream = await client.chat.completions.create(
            model="test/claude", messages=ASK, stream=True, max_tokens=256, temperature=0.3
        )
        _ = [c async for c in stream]
    (sent,) = fake.requests
    assert (sent.method, sent.path) == ("POST", "/v1/messages")
    assert sent.headers["x-api-key"] == UPSTREAM_KEY
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert sent.headers["accept"] == "text/event-stream"
    assert "authorization" not in sent.headers
    assert sent.json() == {
        "model": "claude-test",
        "max_tokens": 256,
        "system": "Answer from the document.",
        "messages": [{"role": "user", "content": "What is the answer?"}],
        "temperature": 0.3,
        "stream": True,
    }


@pytest.mark.parametrize(
    ("name", "names"),
    [
        ("tool_call_fragments", ["get_weather"]),
        ("parallel_tool_calls", ["get_weather", "get_time"]),
        ("text_then_tool", ["get_weather"]),
        ("tool_without_arguments", ["get_time"]),
    ],
)
async def test_tool_arguments_reassemble_to_the_exact_json_sent(
    tmp_path: Path, fake: FakeUpstream, name: str, names: list[str]
) -> None:
    raw = fixture(name)
    fake.queue(Reply.stream(raw))
    async with (
        running_gateway(tmp_path, config(fake)) as gw,
        sdk(gw) as client,
        client.chat.completions.stream(model="test/claude", messages=ASK) as stream,
    ):
        final = await stream.get_final_completion()
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = choice.message.tool_calls or []
    assert [c.function.name for c in calls] == names
    assert [c.function.arguments for c in calls] == sent_arguments(raw)
    assert all(c.id.startswith("toolu_") for c in calls)


async def test_mid_stream_error_reaches_the_sdk(tmp_path: Path, fake: FakeUpstream) -> None:
    fake.queue(Reply.stream(fixture("error_midstream")))
    seen = []
    async with running_gateway(tmp_path, config(fake)) as gw, sdk(gw) as client:
        stream = await client.chat.completions.create(
            model="test/claude", messages=ASK, stream=True
        )
        with pytest.raises(APIError) as info:
            async for chunk in stream:
                seen.append(chunk)
    assert "".join(c.choices[0].delta.content or "" for c in seen if c.choices) == "Partial"
    assert "Overloaded" in info.value.message
    body: Any = info.value.body
    assert body["type"] == "service_unavailable"


async def test_non_stream_completion(tmp_path: Path, fake: FakeUpstream) -> None:
    content = [
        {"type": "thinking", "thinking": "Easy.", "signature": "EqQB"},
        {"type": "text", "text": "42."},
    ]
    fake.queue(Reply.json(message(content, final_usage=usage(20, 7))))
    async with running_gateway(tmp_path, config(fake)) as gw, sdk(gw) as client:
        result = await client.chat.completions.create(model="test/claude", messages=ASK)
    choice = result.choices[0]
    assert (choice.message.content, choice.finish_reason) == ("42.", "stop")
    assert dict(choice.message.model_extra or {})["reasoning_content"] == "Easy."
    assert result.usage is not None
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (20, 7)
    assert "stream" not in fake.requests[0].json()


@pytest.mark.parametrize(
    ("status", "kind", "http", "wire_type"),
    [
        (400, "invalid_request_error", 400, "invalid_request_error"),
        (529, "overloaded_error", 503, "service_unavailable"),
    ],
)
async def test_upstream_http_errors(
    tmp_path: Path, fake: FakeUpstream, status: int, kind: str, http: int, wire_type: str
) -> None:
    fake.queue(Reply.json(error_body(kind, "upstream says no"), status))
    async with running_gateway(tmp_path, config(fake)) as gw, sdk(gw) as client:
        with pytest.raises(APIStatusError) as info:
            await client.chat.completions.create(model="test/claude", messages=ASK)
    assert info.value.status_code == http
    body: Any = info.value.body
    assert body["type"] == wire_type and "upstream says no" in body["message"]


async def test_n_above_one_is_refused_before_any_upstream_call(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    async with running_gateway(tmp_path, config(fake)) as gw, sdk(gw) as client:
        with pytest.raises(APIStatusError) as info:
            await client.chat.completions.create(model="test/claude", messages=ASK, n=2)
    assert info.value.status_code == 400
    body: Any = info.value.body
    assert body["param"] == "n"
    assert fake.requests == []
