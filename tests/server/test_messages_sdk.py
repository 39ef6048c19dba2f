"""``POST /v1/messages`` read by the official anthropic SDK, unchanged, over real sockets:
whole answers and streams from an OpenAI-compatible upstream, an Anthropic upstream and
the demo; tool calls the SDK parses; signed thinking kept byte for byte; errors raised
as the SDK's own exceptions with parsed bodies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import pytest
from anthropic import AsyncAnthropic

from sluice.server.lifecycle import RunningGateway
from tests.server.test_anthropic_gateway import config as anthropic_toml
from tests.support import fake_anthropic as fa
from tests.support.fake_openai import chunk, completion, text_stream
from tests.support.fake_upstream import Cut, FakeUpstream, Reply
from tests.support.gateway import openai_connection_toml, running_gateway
from tests.support.raw_http import exchange, get, post

USER: list[Any] = [{"role": "user", "content": "Say hello"}]
USAGE = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
SIGNATURE = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgx+/=="
WEATHER: Any = {
    "name": "get_weather",
    "description": "Weather for a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def sdk(gw: RunningGateway) -> AsyncAnthropic:
    assert gw.dev_key is not None
    return AsyncAnthropic(base_url=gw.base_url, api_key=gw.dev_key.key, max_retries=0)


async def test_a_whole_answer_from_an_openai_upstream(tmp_path: Path, fake: FakeUpstream) -> None:
    fake.queue(Reply.json(completion("Hello there", usage=USAGE)))
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        assert gw.dev_key is not None
        async with sdk(gw) as client:
            raw = await client.messages.with_raw_response.create(
                model="test/gpt-fake", max_tokens=100, messages=USER
            )
            message = await raw.parse()
            assert message._request_id == message.id  # the SDK reads request-id
        logged = await exchange(gw.host, gw.port, get(f"/v1/requests/{message.id}", gw.dev_key.key))
    row = logged.json()
    assert message.id == raw.headers["x-request-id"]
    assert (message.model, message.role, message.stop_reason) == (
        "test/gpt-fake",
        "assistant",
        "end_turn",
    )
    assert [(b.type, b.text) for b in message.content] == [("text", "Hello there")]  # type: ignore[union-attr]
    assert (message.usage.input_tokens, message.usage.output_tokens) == (10, 2)
    extra = message.model_extra or {}
    assert (extra["provider"], extra["connection"], extra["route"]) == (
        "openai-compatible",
        "conn_fake",
        "primary",
    )
    sent = json.loads(fake.requests[0].body)
    assert (sent["max_tokens"], sent["messages"]) == (100, USER)
    assert (row["front_door"], row["served_model"], row["status"]) == (
        "messages",
        "test/gpt-fake",
        "complete",
    )


async def test_a_stream_reads_as_text_and_a_final_message(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.queue(Reply.stream(*text_stream("Hello", " world", usage=USAGE)))
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        async with sdk(gw) as client:
            async with client.messages.stream(
                model="test/gpt-fake", max_tokens=100, messages=USER
            ) as stream:
                events = [event async for event in stream]
                final = await stream.get_final_message()
    pieces = [e.text for e in events if e.type == "text"]
    [ending] = [e for e in events if e.type == "message_delta"]
    assert pieces == ["Hello", " world"]
    assert [b.text for b in final.content] == ["Hello world"]  # type: ignore[union-attr]
    assert final.stop_reason == "end_turn"
    assert (final.usage.input_tokens, final.usage.output_tokens) == (10, 2)
    assert (ending.usage.model_extra or {})["price_source"] == "list"
    assert [e.type for e in events if e.type.startswith(("message", "content"))] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]


async def test_a_forced_tool_call_is_parsed_by_the_sdk(tmp_path: Path, fake: FakeUpstream) -> None:
    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_weather"}}
    fake.queue(
        Reply.stream(
            chunk(role="assistant", content=""),
            chunk(tool_calls=[{**call, "function": {"name": "get_weather", "arguments": ""}}]),
            chunk(tool_calls=[{"index": 0, "function": {"arguments": '{"city":'}}]),
            chunk(tool_calls=[{"index": 0, "function": {"arguments": '"Oslo"}'}}]),
            chunk(finish="tool_calls"),
            chunk(usage=USAGE, choices=False),
        )
    )
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        async with sdk(gw) as client:
            async with client.messages.stream(
                model="test/gpt-fake",
                max_tokens=100,
                messages=USER,
                tools=[WEATHER],
                tool_choice={"type": "tool", "name": "get_weather"},
            ) as stream:
                final = await stream.get_final_message()
    assert final.stop_reason == "tool_use"
    [block] = final.content
    assert block.type == "tool_use"
    assert (block.id, block.name, block.input) == ("call_1", "get_weather", {"city": "Oslo"})
    sent = json.loads(fake.requests[0].body)
    assert sent["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert sent["tools"][0]["function"]["parameters"] == WEATHER["input_schema"]


def thinking_stream() -> list[bytes]:
    return [
        fa.message_start(20, cache_read=5),
        fa.block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        fa.block_delta(0, {"type": "thinking_delta", "thinking": "Two plus two."}),
        fa.block_delta(0, {"type": "signature_delta", "signature": SIGNATURE}),
        fa.block_stop(0),
        *fa.text_block(1, "4"),
        *fa.message_end("end_turn", fa.usage(20, 9, cache_read=5)),
    ]


async def test_signed_thinking_from_an_anthropic_upstream_reaches_the_client_intact(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.queue(Reply.stream(*thinking_stream()))
    async with running_gateway(tmp_path, anthropic_toml(fake)) as gw:
        async with sdk(gw) as client:
            async with client.messages.stream(
                model="test/claude",
                max_tokens=4000,
                thinking={"type": "enabled", "budget_tokens": 2000},
                messages=USER,
            ) as stream:
                final = await stream.get_final_message()
    thinking, text = final.content
    assert thinking.type == "thinking" and text.type == "text"
    assert (thinking.thinking, thinking.signature, text.text) == ("Two plus two.", SIGNATURE, "4")
    usage = final.usage
    assert (usage.input_tokens, usage.cache_read_input_tokens, usage.output_tokens) == (20, 5, 9)
    sent = json.loads(fake.requests[0].body)
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 2000}
    assert sent["max_tokens"] == 4000


async def test_a_conversation_with_a_tool_result_and_signed_thinking_goes_back_as_sent(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.queue(Reply.json(fa.message([{"type": "text", "text": "Sunny."}])))
    turns: list[Any] = [
        {"role": "user", "content": "Weather in Oslo?"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Use the tool.", "signature": SIGNATURE},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "get_weather",
                    "input": {"city": "Oslo"},
                },
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}],
        },
    ]
    async with running_gateway(tmp_path, anthropic_toml(fake)) as gw:
        async with sdk(gw) as client:
            message = await client.messages.create(
                model="test/claude",
                max_tokens=4000,
                messages=turns,
                tools=[WEATHER],
                thinking={"type": "enabled", "budget_tokens": 1024},
            )
    assert [b.text for b in message.content] == ["Sunny."]  # type: ignore[union-attr]
    assert json.loads(fake.requests[0].body)["messages"] == turns


async def test_the_demo_streams_through_the_sdk(tmp_path: Path) -> None:
    async with running_gateway(tmp_path) as gw:
        async with sdk(gw) as client:
            async with client.messages.stream(
                model="sluice/demo", max_tokens=50, messages=USER
            ) as stream:
                text = "".join([piece async for piece in stream.text_stream])
                final = await stream.get_final_message()
    assert text and final.stop_reason in ("end_turn", "max_tokens")


async def test_errors_are_the_sdks_own_exceptions(tmp_path: Path, fake: FakeUpstream) -> None:
    fake.queue(Reply.json({"error": {"message": "slow down", "type": "rate_limit"}}, 429))
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        async with sdk(gw) as client:
            with pytest.raises(anthropic.NotFoundError) as missing:
                await client.messages.create(model="test/nope", max_tokens=5, messages=USER)
            with pytest.raises(anthropic.RateLimitError) as limited:
                await client.messages.create(model="test/gpt-fake", max_tokens=5, messages=USER)
        bad = AsyncAnthropic(base_url=gw.base_url, api_key="sk-sluice-" + "x" * 40, max_retries=0)
        async with bad:
            with pytest.raises(anthropic.AuthenticationError) as refused:
                await bad.messages.create(model="test/gpt-fake", max_tokens=5, messages=USER)
    for err, kind in (
        (missing, "not_found_error"),
        (limited, "rate_limit_error"),
        (refused, "authentication_error"),
    ):
        body: Any = err.value.body
        assert body["type"] == "error" and body["error"]["type"] == kind
        assert body["error"]["message"]


async def test_a_body_refused_by_the_http_layer_is_answered_in_the_messages_shape(
    tmp_path: Path,
) -> None:
    """Refused on its head (past max_body_bytes), before any front door read it: the
    target still says which door's error shape the client reads."""
    async with running_gateway(tmp_path, "[server]\nmax_body_bytes = 2000\n") as gw:
        async with sdk(gw) as client:
            with pytest.raises(anthropic.APIStatusError) as large:
                await client.messages.create(
                    model="sluice/demo",
                    max_tokens=5,
                    messages=[{"role": "user", "content": "x" * 4000}],
                )
        chat = await exchange(
            gw.host,
            gw.port,
            post("/v1/chat/completions", b"x" * 4000, gw.dev_key.key if gw.dev_key else None),
        )
    assert large.value.status_code == 413
    body: Any = large.value.body
    assert body["type"] == "error" and body["error"]["type"] == "request_too_large"
    assert large.value.request_id is not None and large.value.request_id.startswith("req_")
    assert chat.status == 413 and chat.json()["error"]["type"] == "invalid_request_error"
    assert "type" not in chat.json()  # the chat door's shape, as before


async def test_a_mid_stream_failure_raises_during_iteration(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.queue(Reply.stream(chunk(role="assistant", content=""), chunk(content="Hel"), Cut()))
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        async with sdk(gw) as client:
            seen: list[str] = []
            with pytest.raises(anthropic.APIStatusError) as failed:
                async with client.messages.stream(
                    model="test/gpt-fake", max_tokens=100, messages=USER
                ) as stream:
                    async for text in stream.text_stream:
                        seen.append(text)
    assert seen == ["Hel"]
    body: Any = failed.value.body
    assert body["type"] == "error" and body["error"]["type"] == "api_error"
    assert body["usage"]["output_tokens"] >= 1


async def test_a_missing_max_tokens_is_a_400_naming_it(tmp_path: Path) -> None:
    async with running_gateway(tmp_path) as gw:
        assert gw.dev_key is not None
        body = json.dumps({"model": "sluice/demo", "messages": USER}).encode()
        request = post("/v1/messages", body, None, extra=f"x-api-key: {gw.dev_key.key}\r\n")
        answer = await exchange(gw.host, gw.port, request)
    assert answer.status == 400
    assert answer.json() == {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "Missing required parameter: 'max_tokens'.",
            "code": "missing_required_parameter",
            "param": "max_tokens",
            "details": {"error_code": "missing_required_parameter"},
        },
    }
    assert answer.headers["request-id"] == answer.headers["x-request-id"]


@pytest.mark.parametrize(
    ("messages", "param"),
    [
        ([{"role": "user", "content": []}], "messages[0].content"),
        (
            [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": []},
                {"role": "user", "content": "again"},
            ],
            "messages[1].content",
        ),
    ],
)
async def test_an_empty_turn_is_a_400_naming_it(
    tmp_path: Path, messages: list[Any], param: str
) -> None:
    """Found by an adversarial pass: an empty user turn reached the demo as no message
    at all and answered 500. Only a final assistant turn may be empty (a prefill)."""
    async with running_gateway(tmp_path) as gw:
        assert gw.dev_key is not None
        header = f"x-api-key: {gw.dev_key.key}\r\n"
        body = {"model": "sluice/demo", "max_tokens": 5, "messages": messages}
        refused = await exchange(
            gw.host, gw.port, post("/v1/messages", json.dumps(body).encode(), None, extra=header)
        )
        prefill = {
            **body,
            "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": []}],
        }
        allowed = await exchange(
            gw.host, gw.port, post("/v1/messages", json.dumps(prefill).encode(), None, extra=header)
        )
    assert refused.status == 400, refused.body
    error = refused.json()["error"]
    assert (error["type"], error["param"]) == ("invalid_request_error", param)
    assert allowed.status == 200, allowed.body


@pytest.mark.parametrize(
    ("extra", "param", "code"),
    [
        (
            {"thinking": {"type": "enabled", "budget_tokens": 64}},
            "thinking.budget_tokens",
            "invalid_value",
        ),
        ({"thinking": {"type": "enabled"}}, "thinking.budget_tokens", "missing_required_parameter"),
        ({"tool_choice": {"type": "tool"}}, "tool_choice.name", "missing_required_parameter"),
        (
            {"tools": [{"type": "web_search_20250305", "name": "web_search"}]},
            "tools[0]",
            "unsupported_parameter",
        ),
    ],
)
async def test_each_refusal_of_the_decoder_names_its_field_and_a_code(
    tmp_path: Path, extra: dict[str, Any], param: str, code: str
) -> None:
    """Found by an adversarial pass: these were 400s with ``code: null`` and no
    ``details``, where every other one has both."""
    async with running_gateway(tmp_path) as gw:
        assert gw.dev_key is not None
        body = {"model": "sluice/demo", "max_tokens": 64, "messages": USER, **extra}
        answer = await exchange(
            gw.host,
            gw.port,
            post(
                "/v1/messages",
                json.dumps(body).encode(),
                None,
                extra=f"x-api-key: {gw.dev_key.key}\r\n",
            ),
        )
    assert answer.status == 400, answer.body
    error = answer.json()["error"]
    assert (error["param"], error["code"], error["details"]) == (param, code, {"error_code": code})


async def test_x_api_key_is_a_key_on_the_messages_paths_only(tmp_path: Path) -> None:
    async with running_gateway(tmp_path) as gw:
        assert gw.dev_key is not None
        header = f"x-api-key: {gw.dev_key.key}\r\n"
        models = await exchange(gw.host, gw.port, get("/v1/models", None, extra=header))
        chat = await exchange(
            gw.host,
            gw.port,
            post(
                "/v1/chat/completions",
                json.dumps({"model": "sluice/demo", "messages": USER}).encode(),
                None,
                extra=header,
            ),
        )
    assert models.status == chat.status == 401
