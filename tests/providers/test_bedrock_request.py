"""Our request → a Converse body: messages, tools, inference settings, reasoning."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sluice.errors import InvalidRequestError
from sluice.frontdoors.chat import decode_chat_request
from sluice.providers.bedrock.request import converse_body

CLAUDE = "anthropic.claude-test-v1:0"
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQ=="
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def body(model: str = CLAUDE, **request: Any) -> dict[str, Any]:
    request.setdefault("messages", [{"role": "user", "content": "hi"}])
    req = decode_chat_request(json.dumps({"model": "m", **request}).encode())
    doc: dict[str, Any] = json.loads(converse_body(req, model))
    return doc


def test_minimal_request() -> None:
    assert body() == {"messages": [{"role": "user", "content": [{"text": "hi"}]}]}


def test_conversation_with_tools_system_and_merged_turns() -> None:
    doc = body(
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Paris and Oslo?"},
            {
                "role": "assistant",
                "content": "Checking.",
                "tool_calls": [
                    {
                        "id": "tooluse_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    },
                    {
                        "id": "tooluse_2",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": ""},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "tooluse_1", "content": '{"temp": 21}'},
            {"role": "tool", "tool_call_id": "tooluse_2", "content": "cold"},
            {"role": "user", "content": [{"type": "text", "text": "Thanks!"}]},
            {"role": "developer", "content": [{"type": "text", "text": "No emoji."}]},
        ],
        tools=[WEATHER],
    )
    assert doc["system"] == [{"text": "Be brief."}, {"text": "No emoji."}]
    assert doc["messages"] == [
        {"role": "user", "content": [{"text": "Weather in Paris and Oslo?"}]},
        {
            "role": "assistant",
            "content": [
                {"text": "Checking."},
                {
                    "toolUse": {
                        "toolUseId": "tooluse_1",
                        "name": "get_weather",
                        "input": {"city": "Paris"},
                    }
                },
                {"toolUse": {"toolUseId": "tooluse_2", "name": "get_weather", "input": {}}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"toolResult": {"toolUseId": "tooluse_1", "content": [{"json": {"temp": 21}}]}},
                {"toolResult": {"toolUseId": "tooluse_2", "content": [{"text": "cold"}]}},
                {"text": "Thanks!"},
            ],
        },
    ]
    assert doc["toolConfig"] == {
        "tools": [
            {
                "toolSpec": {
                    "name": "get_weather",
                    "inputSchema": {"json": WEATHER["function"]["parameters"]},  # type: ignore[index]
                    "description": "Weather for a city",
                }
            }
        ]
    }


def test_inference_config() -> None:
    doc = body(max_completion_tokens=300, temperature=0.2, top_p=0.9, stop=["END", ""])
    assert doc["inferenceConfig"] == {
        "maxTokens": 300,
        "temperature": 0.2,
        "topP": 0.9,
        "stopSequences": ["END"],
    }


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("auto", {"auto": {}}),
        ("required", {"any": {}}),
        (
            {"type": "function", "function": {"name": "get_weather"}},
            {"tool": {"name": "get_weather"}},
        ),
    ],
    ids=["auto", "required", "named"],
)
def test_tool_choice(choice: Any, expected: dict[str, Any]) -> None:
    assert body(tools=[WEATHER], tool_choice=choice)["toolConfig"]["toolChoice"] == expected


def test_tool_choice_none_leaves_tools_out_unless_the_history_needs_them() -> None:
    assert "toolConfig" not in body(tools=[WEATHER], tool_choice="none")
    history = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "t1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "t1", "content": "sunny"},
    ]
    config = body(messages=history, tools=[WEATHER], tool_choice="none")["toolConfig"]
    assert "toolChoice" not in config and len(config["tools"]) == 1


def test_image_data_url_and_cache_point() -> None:
    doc = body(
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
                    {"type": "text", "text": "Describe.", "cache_control": {"type": "ephemeral"}},
                ],
            }
        ]
    )
    assert doc["messages"][0]["content"] == [
        {"image": {"format": "png", "source": {"bytes": PNG}}},
        {"text": "Describe."},
        {"cachePoint": {"type": "default"}},
    ]


@pytest.mark.parametrize(
    "url",
    ["https://example.com/cat.png", "data:image/png,notbase64", "data:image/tiff;base64,AAAA"],
    ids=["http", "not-base64", "tiff"],
)
def test_unusable_images_are_rejected_with_param(url: str) -> None:
    with pytest.raises(InvalidRequestError) as info:
        body(
            messages=[
                {"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}
            ]
        )
    assert info.value.param == "messages[0].content[0].image_url"


def test_rejections() -> None:
    with pytest.raises(InvalidRequestError) as info:
        body(n=2)
    assert info.value.param == "n"
    bad_args = {
        "role": "assistant",
        "tool_calls": [
            {"id": "t", "type": "function", "function": {"name": "f", "arguments": "{oops"}}
        ],
    }
    with pytest.raises(InvalidRequestError) as info:
        body(messages=[{"role": "user", "content": "x"}, bad_args])
    assert info.value.param == "messages[1].tool_calls[0].function.arguments"
    audio = {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}
    with pytest.raises(InvalidRequestError) as info:
        body(messages=[{"role": "user", "content": [audio]}])
    assert info.value.param == "messages[0].content[0]"
    with pytest.raises(InvalidRequestError) as info:
        body(messages=[{"role": "function", "name": "f", "content": "x"}])
    assert info.value.param == "messages[0]"


def test_reasoning_effort_sets_a_thinking_budget_on_anthropic_models() -> None:
    doc = body(reasoning_effort="medium")
    assert doc["additionalModelRequestFields"] == {
        "thinking": {"type": "enabled", "budget_tokens": 4096}
    }
    assert doc["inferenceConfig"] == {"maxTokens": 4096 + 4096}
    capped = body(reasoning_effort="high", max_tokens=3000)
    assert capped["additionalModelRequestFields"]["thinking"]["budget_tokens"] == 2999
    assert capped["inferenceConfig"] == {"maxTokens": 3000}
    profile = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-x-v1:0"
    assert "additionalModelRequestFields" in body(profile, reasoning_effort="low")
    assert "additionalModelRequestFields" not in body(reasoning_effort="minimal")
    assert "additionalModelRequestFields" not in body(
        "amazon.nova-pro-v1:0", reasoning_effort="high"
    )


@pytest.mark.parametrize(
    ("request_fields", "param"),
    [
        ({"reasoning_effort": "extreme"}, "reasoning_effort"),
        ({"reasoning_effort": "low", "max_tokens": 800}, "max_tokens"),
    ],
    ids=["unknown-effort", "no-room"],
)
def test_reasoning_effort_errors(request_fields: dict[str, Any], param: str) -> None:
    with pytest.raises(InvalidRequestError) as info:
        body(**request_fields)
    assert info.value.param == param
