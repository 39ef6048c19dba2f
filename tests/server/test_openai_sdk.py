"""The official openai SDK, pointed at the gateway, over real sockets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from openai import APIError, AsyncOpenAI
from openai.types.chat import ChatCompletionMessageParam

from sluice.server.lifecycle import RunningGateway
from tests.support.fake_openai import completion, text_stream
from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.gateway import UPSTREAM_KEY, openai_connection_toml, running_gateway
from tests.support.transcript import FIXTURES

USER: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Say hello"}]
USAGE = {
    "prompt_tokens": 10,
    "completion_tokens": 2,
    "total_tokens": 12,
    "prompt_tokens_details": {"cached_tokens": 4},
}


def sdk(gw: RunningGateway) -> AsyncOpenAI:
    assert gw.dev_key is not None
    return AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=gw.dev_key.key, max_retries=0)


def extra(obj: Any) -> dict[str, Any]:
    return dict(obj.model_extra or {})


async def test_streams_text_usage_and_extension_fields(tmp_path: Path, fake: FakeUpstream) -> None:
    fake.queue(Reply.stream(*text_stream("Hello", " world", usage=USAGE)))
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        async with (
            sdk(gw) as client,
            client.chat.completions.with_streaming_response.create(
                model="test/gpt-fake",
                messages=USER,
                stream=True,
                stream_options={"include_usage": True},
            ) as response,
        ):
            request_id = response.headers["x-request-id"]
            chunks = [c async for c in await response.parse()]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Hello world"
    assert request_id.startswith("req_")
    for c in chunks:
        assert c.id == request_id
        assert c.model == "test/gpt-fake"
        fields = extra(c)
        assert {k: fields[k] for k in ("provider", "connection", "route", "route_name")} == {
            "provider": "openai-compatible",
            "connection": "conn_fake",
            "route": "primary",
            "route_name": None,
        }
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    usage = chunks[-1].usage
    assert chunks[-1].choices == [] and usage is not None
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (10, 2, 12)
    assert usage.prompt_tokens_details is not None
    assert usage.prompt_tokens_details.cached_tokens == 4
    # 6 fresh input at $2/M + 4 cached at $0.5/M + 2 output at $8/M
    assert extra(usage)["cost"] == pytest.approx((6 * 2 + 4 * 0.5 + 2 * 8) / 1e6, abs=1e-15)
    assert extra(usage)["price_source"] == "list"
    sent = fake.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.json()["model"] == "gpt-fake"
    assert sent.json()["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize(
    ("fixture", "expected"),
    [
        ("tool_call_fragments", {0: ("get_weather", {"city": "Berlin", "unit": "celsius"})}),
        (
            "parallel_tool_calls",
            {0: ("get_weather", {"city": "Paris"}), 1: ("get_time", {"tz": "CET"})},
        ),
        ("tools_without_index", {0: ("get_weather", {"city": "Oslo"}), 1: ("get_time", {})}),
    ],
)
async def test_tool_call_arguments_reassemble_to_valid_json(
    tmp_path: Path, fake: FakeUpstream, fixture: str, expected: dict[int, tuple[str, Any]]
) -> None:
    fake.queue(Reply.stream((FIXTURES / "openai" / f"{fixture}.raw").read_bytes()))
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        async with (
            sdk(gw) as client,
            client.chat.completions.stream(
                model="test/gpt-fake",
                messages=USER,
            ) as stream,
        ):
            final = await stream.get_final_completion()
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = choice.message.tool_calls or []
    got = {i: (c.function.name, json.loads(c.function.arguments)) for i, c in enumerate(calls)}
    assert got == expected
    assert all(c.id for c in calls)


async def test_non_stream_response(tmp_path: Path, fake: FakeUpstream) -> None:
    fake.queue(Reply.json(completion("Hi there", usage=USAGE)))
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        async with sdk(gw) as client:
            raw = await client.chat.completions.with_raw_response.create(
                model="test/gpt-fake",
                messages=USER,
            )
        result = raw.parse()
    assert result.id == raw.headers["x-request-id"]
    assert result.object == "chat.completion"
    assert result.choices[0].message.content == "Hi there"
    assert result.choices[0].finish_reason == "stop"
    assert extra(result)["connection"] == "conn_fake"
    assert result.usage is not None and result.usage.total_tokens == 12
    assert extra(result.usage)["price_source"] == "list"
    assert "stream" not in fake.requests[0].json()


async def test_unpriced_model_has_null_cost(tmp_path: Path, fake: FakeUpstream) -> None:
    fake.queue(Reply.stream(*text_stream("x", usage=USAGE)))
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        async with sdk(gw) as client:
            stream = await client.chat.completions.create(
                model="test/unpriced",
                messages=USER,
                stream=True,
                stream_options={"include_usage": True},
            )
            chunks = [c async for c in stream]
    usage = chunks[-1].usage
    assert usage is not None and usage.total_tokens == 12
    assert extra(usage)["cost"] is None and extra(usage)["price_source"] is None


async def test_mid_stream_error_raises_in_the_sdk(tmp_path: Path, fake: FakeUpstream) -> None:
    fake.queue(Reply.stream((FIXTURES / "openai" / "error_midstream.raw").read_bytes()))
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        seen = []
        async with sdk(gw) as client:
            stream = await client.chat.completions.create(
                model="test/gpt-fake",
                messages=USER,
                stream=True,
            )
            with pytest.raises(APIError) as info:
                async for chunk in stream:
                    seen.append(chunk)
    assert "".join(c.choices[0].delta.content or "" for c in seen if c.choices) == "Partial"
    assert "server had an error" in info.value.message


async def test_demo_provider_through_the_sdk(tmp_path: Path) -> None:
    config = (
        '[[connections]]\nid = "conn_demo"\nprovider = "demo"\n'
        "options = { first_token_ms = 0, token_ms = 0 }\n"
    )
    async with running_gateway(tmp_path, config) as gw, sdk(gw) as client:
        stream = await client.chat.completions.create(
            model="sluice/demo",
            messages=USER,
            stream=True,
            max_tokens=3,
        )
        chunks = [c async for c in stream]
        listed = await client.models.list()
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    assert extra(chunks[0])["provider"] == "demo"
    ids = [m.id for m in listed.data]
    assert ids == ["sluice/demo", "sluice/demo-fast", "sluice/demo-embed"]
    assert extra(listed.data[0])["pricing"] == {"input": 0.5, "output": 1.5, "cache_read": 0.05}


async def test_upstream_receives_the_configured_key(tmp_path: Path, fake: FakeUpstream) -> None:
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        async with sdk(gw) as client:
            stream = await client.chat.completions.create(
                model="test/gpt-fake",
                messages=USER,
                stream=True,
            )
            _ = [c async for c in stream]
    assert fake.requests[0].headers["authorization"] == f"Bearer {UPSTREAM_KEY}"
