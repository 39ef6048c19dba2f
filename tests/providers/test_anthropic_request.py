"""Our request → Anthropic's Messages request: every mapping, one table row or test each."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sluice.core.connection import ConnectionSettings, Secret, Target
from sluice.errors import InvalidRequestError
from sluice.frontdoors.chat import decode_chat_request
from sluice.providers.anthropic import AnthropicAdapter
from sluice.providers.anthropic.request import DEFAULT_MAX_TOKENS
from tests.support.gateway import counting_ids

CONN = ConnectionSettings("conn_a", "anthropic", "https://api.anthropic.com", Secret("sk-ant-1"))
TARGET = Target("anthropic/claude-sonnet-4-5", "claude-sonnet-4-5", CONN)
USER = {"role": "user", "content": "hi"}
EPHEMERAL = {"type": "ephemeral"}
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def call(name: str, arguments: str, call_id: str = "toolu_1") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def build(fields: dict[str, Any], target: Target = TARGET) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "anthropic/claude-sonnet-4-5", "messages": [USER], **fields}
    req = decode_chat_request(json.dumps(body).encode())
    up = AnthropicAdapter("anthropic", counting_ids()).build_request(req, target)
    doc: dict[str, Any] = json.loads(up.body)
    return doc


def rejected(fields: dict[str, Any]) -> InvalidRequestError:
    with pytest.raises(InvalidRequestError) as info:
        build(fields)
    return info.value


def test_stream_request_url_headers_and_body() -> None:
    req = decode_chat_request(
        json.dumps({"model": "x", "stream": True, "messages": [USER]}).encode()
    )
    up = AnthropicAdapter("anthropic", counting_ids()).build_request(req, TARGET)
    assert (up.method, up.url, up.stream) == ("POST", "https://api.anthropic.com/v1/messages", True)
    assert up.headers == {
        "content-type": "application/json",
        "anthropic-version": "2023-06-01",
        "accept": "text/event-stream",
        "accept-encoding": "identity",
        "x-api-key": "sk-ant-1",
    }
    assert json.loads(up.body) == {
        "model": "claude-sonnet-4-5",
        "max_tokens": DEFAULT_MAX_TOKENS,
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
    }


def test_non_stream_request_has_no_stream_field_or_accept() -> None:
    req = decode_chat_request(json.dumps({"model": "x", "messages": [USER]}).encode())
    up = AnthropicAdapter("anthropic", counting_ids()).build_request(req, TARGET)
    assert "stream" not in json.loads(up.body)
    assert "accept" not in up.headers and up.stream is False


@pytest.mark.parametrize(
    "base_url",
    ["https://api.anthropic.com", "https://api.anthropic.com/", "https://api.anthropic.com/v1"],
)
def test_base_url_spellings_reach_v1_messages(base_url: str) -> None:
    conn = ConnectionSettings("c", "anthropic", base_url, None)
    req = decode_chat_request(json.dumps({"model": "x", "messages": [USER]}).encode())
    up = AnthropicAdapter("anthropic", counting_ids()).build_request(req, Target("m", "n", conn))
    assert up.url == "https://api.anthropic.com/v1/messages"
    assert "x-api-key" not in up.headers


def test_system_and_developer_messages_are_lifted_into_system() -> None:
    body = build(
        {
            "messages": [
                {"role": "system", "content": "Be brief."},
                USER,
                {"role": "developer", "content": [{"type": "text", "text": "Answer in French."}]},
                {"role": "user", "content": "again"},
            ]
        }
    )
    assert body["system"] == "Be brief.\n\nAnswer in French."
    assert body["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": "again"}],
        }
    ]


def test_system_with_cache_control_becomes_blocks_that_keep_it() -> None:
    body = build(
        {
            "messages": [
                {
                    "role": "system",
                    "content": [
                        {"type": "text", "text": "A long manual.", "cache_control": EPHEMERAL},
                        {"type": "text", "text": ""},
                    ],
                },
                {"role": "system", "content": "Be brief."},
                USER,
            ]
        }
    )
    assert body["system"] == [
        {"type": "text", "text": "A long manual.", "cache_control": EPHEMERAL},
        {"type": "text", "text": "Be brief."},
    ]


def test_user_parts_keep_cache_control_and_images_become_sources() -> None:
    content = [
        {"type": "text", "text": "Compare these", "cache_control": EPHEMERAL},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        {
            "type": "image_url",
            "image_url": {"url": "https://example.com/cat.jpg", "detail": "high"},
            "cache_control": EPHEMERAL,
        },
    ]
    body = build({"messages": [{"role": "user", "content": content}]})
    assert body["messages"][0]["content"] == [
        {"type": "text", "text": "Compare these", "cache_control": EPHEMERAL},
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
        },
        {
            "type": "image",
            "source": {"type": "url", "url": "https://example.com/cat.jpg"},
            "cache_control": EPHEMERAL,
        },
    ]


@pytest.mark.parametrize(
    "url", ["ftp://example.com/a.png", "data:image/png,rawbytes", "file:///etc/passwd"]
)
def test_unusable_image_urls_are_refused(url: str) -> None:
    image = {"type": "image_url", "image_url": {"url": url}}
    err = rejected({"messages": [{"role": "user", "content": [image]}]})
    assert err.param == "messages[0].content[0].image_url.url"


def test_audio_parts_are_refused() -> None:
    audio = {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}
    err = rejected(
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "x"}, audio]}]}
    )
    assert err.param == "messages[0].content[1]"


def test_function_role_messages_are_refused() -> None:
    err = rejected({"messages": [USER, {"role": "function", "name": "f", "content": "1"}]})
    assert err.param == "messages[1]"


def test_same_role_neighbours_merge_and_empty_messages_drop() -> None:
    body = build(
        {
            "messages": [
                USER,
                {"role": "user", "content": ""},
                {"role": "assistant", "content": "Hello."},
                {"role": "assistant", "content": None},
                {"role": "assistant", "content": [{"type": "text", "text": "How can I help?"}]},
                {"role": "user", "content": "Tell me a joke"},
            ]
        }
    )
    assert body["messages"] == [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Hello."},
                {"type": "text", "text": "How can I help?"},
            ],
        },
        {"role": "user", "content": "Tell me a joke"},
    ]


def test_tool_calls_and_results_become_blocks_in_alternating_turns() -> None:
    body = build(
        {
            "messages": [
                USER,
                {
                    "role": "assistant",
                    "content": "Checking both.",
                    "tool_calls": [
                        call("get_weather", '{"city": "Paris"}', "toolu_a"),
                        call("get_time", "", "toolu_b"),
                    ],
                },
                {"role": "tool", "tool_call_id": "toolu_a", "content": "18C, sunny"},
                {
                    "role": "tool",
                    "tool_call_id": "toolu_b",
                    "content": [{"type": "text", "text": "14:05", "cache_control": EPHEMERAL}],
                },
                {"role": "user", "content": "Thanks, and?"},
            ]
        }
    )
    assert body["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking both."},
                {
                    "type": "tool_use",
                    "id": "toolu_a",
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                },
                {"type": "tool_use", "id": "toolu_b", "name": "get_time", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "18C, sunny"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_b",
                    "content": [{"type": "text", "text": "14:05", "cache_control": EPHEMERAL}],
                },
                {"type": "text", "text": "Thanks, and?"},
            ],
        },
    ]


@pytest.mark.parametrize("arguments", ['{"city": "Par', "[1, 2]", '"text"'])
def test_tool_call_arguments_that_are_not_a_json_object_are_refused(arguments: str) -> None:
    assistant = {"role": "assistant", "tool_calls": [call("get_weather", arguments)]}
    err = rejected({"messages": [USER, assistant]})
    assert err.param == "messages[1].tool_calls[0].function.arguments"


def test_tools_become_input_schemas() -> None:
    bare = {"type": "function", "function": {"name": "now", "strict": True}}
    body = build({"tools": [WEATHER, bare]})
    assert body["tools"] == [
        {
            "name": "get_weather",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
            "description": "Weather for a city",
        },
        {"name": "now", "input_schema": {"type": "object", "properties": {}}, "strict": True},
    ]
    assert "tool_choice" not in body


NAMED = {"type": "function", "function": {"name": "get_weather"}}


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"tool_choice": "auto"}, {"type": "auto"}),
        ({"tool_choice": "required"}, {"type": "any"}),
        ({"tool_choice": "none"}, {"type": "none"}),
        ({"tool_choice": NAMED}, {"type": "tool", "name": "get_weather"}),
        ({"parallel_tool_calls": False}, {"type": "auto", "disable_parallel_tool_use": True}),
        (
            {"tool_choice": "required", "parallel_tool_calls": False},
            {"type": "any", "disable_parallel_tool_use": True},
        ),
        (
            {"tool_choice": NAMED, "parallel_tool_calls": False},
            {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True},
        ),
        ({"tool_choice": "none", "parallel_tool_calls": False}, {"type": "none"}),
        ({"parallel_tool_calls": True}, None),
    ],
    ids=[
        "auto",
        "required",
        "none",
        "named",
        "parallel-false",
        "required-single",
        "named-single",
        "none-single",
        "parallel-true",
    ],
)
def test_tool_choice(fields: dict[str, Any], expected: dict[str, Any] | None) -> None:
    assert build({"tools": [WEATHER], **fields}).get("tool_choice") == expected


def test_tool_choice_without_tools_is_not_sent() -> None:
    assert "tool_choice" not in build({"tool_choice": "required", "parallel_tool_calls": False})


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"stop": "END"}, {"stop_sequences": ["END"]}),
        ({"stop": ["a", "b"]}, {"stop_sequences": ["a", "b"]}),
        ({"max_tokens": 300}, {"max_tokens": 300}),
        ({"max_completion_tokens": 200, "max_tokens": 300}, {"max_tokens": 200}),
        ({"temperature": 0.2, "top_p": 0.9}, {"temperature": 0.2, "top_p": 0.9}),
        ({"user": "user-42"}, {"metadata": {"user_id": "user-42"}}),
        ({"seed": 7, "presence_penalty": 1, "logprobs": True}, {}),
    ],
    ids=["stop", "stop-list", "max-tokens", "max-completion-tokens", "sampling", "user", "dropped"],
)
def test_scalar_fields(fields: dict[str, Any], expected: dict[str, Any]) -> None:
    body = build(fields)
    base = {"model": "claude-sonnet-4-5", "max_tokens": DEFAULT_MAX_TOKENS, "messages": [USER]}
    assert body == {**base, **expected}


@pytest.mark.parametrize(
    ("fields", "max_tokens", "budget"),
    [
        ({"reasoning_effort": "none"}, DEFAULT_MAX_TOKENS, None),
        ({"reasoning_effort": "minimal"}, DEFAULT_MAX_TOKENS + 1024, 1024),
        ({"reasoning_effort": "low"}, DEFAULT_MAX_TOKENS + 2048, 2048),
        ({"reasoning_effort": "medium"}, DEFAULT_MAX_TOKENS + 8192, 8192),
        ({"reasoning_effort": "high"}, DEFAULT_MAX_TOKENS + 16384, 16384),
        ({"reasoning_effort": "high", "max_tokens": 32000}, 32000, 16384),
        ({"reasoning_effort": "high", "max_completion_tokens": 5000}, 5000, 4999),
    ],
    ids=["none", "minimal", "low", "medium", "high", "high-capped-above", "high-capped-below"],
)
def test_reasoning_effort_becomes_a_thinking_budget(
    fields: dict[str, Any], max_tokens: int, budget: int | None
) -> None:
    body = build(fields)
    assert body["max_tokens"] == max_tokens
    thinking = None if budget is None else {"type": "enabled", "budget_tokens": budget}
    assert body.get("thinking") == thinking


def test_reasoning_needs_room_above_the_minimum_budget() -> None:
    assert rejected({"reasoning_effort": "low", "max_tokens": 1024}).param == "max_tokens"


def test_unknown_reasoning_effort_is_refused() -> None:
    assert rejected({"reasoning_effort": "extreme"}).param == "reasoning_effort"


def test_more_than_one_choice_is_refused() -> None:
    assert rejected({"n": 2}).param == "n"
    assert "n" not in build({"n": 1})
