"""Our request's extensions (signed thinking, documents, tool results with images or
``is_error``, ``cache_control`` on tools and calls, ``top_k``, an exact thinking budget,
``betas``): sent as given where the provider has them, removed or refused by name where
it does not."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sluice.core.connection import ConnectionSettings, Secret, Target
from sluice.errors import InvalidRequestError
from sluice.frontdoors.chat import decode_chat_request
from sluice.providers.anthropic import AnthropicAdapter
from sluice.providers.bedrock import BedrockAdapter
from sluice.providers.gemini import GeminiAdapter
from sluice.providers.openai import OpenAIAdapter
from tests.support.gateway import counting_ids

ANTHROPIC = Target(
    "test/claude",
    "claude-x",
    ConnectionSettings("conn_a", "anthropic", "https://api.anthropic.com", Secret("sk-ant-1")),
)
OPENAI = Target(
    "test/gpt", "gpt-x", ConnectionSettings("conn_o", "openai", "https://o.test/v1", Secret("k"))
)
GEMINI = Target(
    "test/gem", "gem-x", ConnectionSettings("conn_g", "gemini", "https://g.test", Secret("k"))
)
EPHEMERAL = {"type": "ephemeral"}
SIGNED = {"type": "thinking", "thinking": "Let me see.", "signature": "c2lnbmVk+/=="}
SIGNED_TEXT = {"text": SIGNED["thinking"], "signature": SIGNED["signature"]}
REDACTED = {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"}
CALL = {"id": "toolu_1", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}
IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
DOCUMENT = {
    "type": "document",
    "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0x"},
    "title": "Spec",
    "citations": {"enabled": True},
    "cache_control": EPHEMERAL,
}
AGENT_TURNS: list[dict[str, Any]] = [
    {"role": "user", "content": "Run it."},
    {
        "role": "assistant",
        "thinking_blocks": [SIGNED, REDACTED],
        "content": "Running.",
        "tool_calls": [{**CALL, "cache_control": EPHEMERAL}],
    },
    {
        "role": "tool",
        "tool_call_id": "toolu_1",
        "is_error": True,
        "content": [{"type": "text", "text": "exit 1"}, IMAGE],
        "cache_control": EPHEMERAL,
    },
]
TOOL = {
    "type": "function",
    "function": {"name": "f", "parameters": {"type": "object"}},
    "cache_control": EPHEMERAL,
}


def request(**fields: Any) -> Any:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], **fields}
    return decode_chat_request(json.dumps(body).encode())


def anthropic_body(**fields: Any) -> tuple[dict[str, Any], dict[str, str]]:
    up = AnthropicAdapter("anthropic", counting_ids()).build_request(request(**fields), ANTHROPIC)
    doc: dict[str, Any] = json.loads(up.body)
    return doc, up.headers


def test_an_agents_turns_reach_the_messages_api_as_sent() -> None:
    body, headers = anthropic_body(messages=AGENT_TURNS, tools=[TOOL], betas=["a-1", "b-2"])
    assert body["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                SIGNED,
                REDACTED,
                {"type": "text", "text": "Running."},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "f",
                    "input": {"a": 1},
                    "cache_control": EPHEMERAL,
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [
                        {"type": "text", "text": "exit 1"},
                        {
                            "type": "image",
                            "source": {
                                "type": "base64",
                                "media_type": "image/png",
                                "data": "iVBORw0KGgo=",
                            },
                        },
                    ],
                    "is_error": True,
                    "cache_control": EPHEMERAL,
                }
            ],
        },
    ]
    assert body["tools"] == [
        {"name": "f", "input_schema": {"type": "object"}, "cache_control": EPHEMERAL}
    ]
    assert headers["anthropic-beta"] == "a-1,b-2"


def test_documents_top_k_and_an_exact_thinking_budget() -> None:
    doc = {"role": "user", "content": [DOCUMENT, {"type": "text", "text": "Summarize."}]}
    body, headers = anthropic_body(
        messages=[doc], top_k=5, reasoning_budget=2000, max_tokens=3000, reasoning_effort="high"
    )
    assert body["messages"][0]["content"][0] == DOCUMENT
    assert (body["top_k"], body["max_tokens"]) == (5, 3000)
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2000}
    assert "anthropic-beta" not in headers


def test_an_openai_compatible_upstream_gets_none_of_our_extensions() -> None:
    fields = {
        "messages": [AGENT_TURNS[0], AGENT_TURNS[1], {**AGENT_TURNS[2], "content": "exit 1"}],
        "tools": [TOOL],
        "top_k": 5,
        "reasoning_budget": 2000,
        "betas": ["a-1"],
        "models": ["other"],
    }
    up = OpenAIAdapter("openai", counting_ids()).build_request(request(**fields), OPENAI)
    body = json.loads(up.body)
    assert set(body) == {"model", "messages", "tools"}
    assert body["messages"][1] == {"role": "assistant", "content": "Running.", "tool_calls": [CALL]}
    assert body["messages"][2] == {
        "role": "tool",
        "content": "Error: exit 1",
        "tool_call_id": "toolu_1",
    }
    assert body["tools"] == [
        {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    ]


def test_a_request_without_extensions_reaches_openai_field_for_field() -> None:
    fields = {"messages": [{"role": "user", "content": [{"type": "text", "text": "x"}]}], "seed": 3}
    up = OpenAIAdapter("openai", counting_ids()).build_request(request(**fields), OPENAI)
    assert json.loads(up.body) == {"model": "gpt-x", **fields}


@pytest.mark.parametrize("adapter", ["openai", "gemini"])
@pytest.mark.parametrize(
    ("message", "param"),
    [
        ({"role": "user", "content": [DOCUMENT]}, "messages[2].content[0]"),
        ({**AGENT_TURNS[2], "is_error": False}, "messages[2].content[1]"),
    ],
    ids=["document", "tool-result-image"],
)
def test_what_a_provider_has_no_place_for_is_refused_by_name(
    adapter: str, message: dict[str, Any], param: str
) -> None:
    messages = [*AGENT_TURNS[:2], message]
    req = request(messages=messages)
    with pytest.raises(InvalidRequestError) as info:
        if adapter == "openai":
            OpenAIAdapter("openai", counting_ids()).build_request(req, OPENAI)
        else:
            GeminiAdapter("gemini", counting_ids()).build_request(req, GEMINI)
    assert info.value.param == param


def test_signed_thinking_goes_back_to_bedrock_before_the_turns_text() -> None:
    target = Target(
        "test/claude-bedrock",
        "anthropic.claude-x",
        ConnectionSettings(
            "conn_b", "aws-bedrock", "https://bedrock-runtime.test", None, region="us-east-1"
        ),
    )
    req = request(messages=[*AGENT_TURNS[:2], {**AGENT_TURNS[2], "content": "exit 1"}])
    body = json.loads(BedrockAdapter("aws-bedrock", counting_ids()).build_request(req, target).body)
    assert body["messages"][1]["content"][:3] == [
        {
            "reasoningContent": {
                "reasoningText": {"text": "Let me see.", "signature": SIGNED["signature"]}
            }
        },
        {"reasoningContent": {"redactedContent": REDACTED["data"]}},
        {"text": "Running."},
    ]


def test_an_exact_thinking_budget_reaches_a_claude_model_on_bedrock() -> None:
    target = Target(
        "test/claude-bedrock",
        "anthropic.claude-x",
        ConnectionSettings(
            "conn_b", "aws-bedrock", "https://bedrock-runtime.test", None, region="us-east-1"
        ),
    )
    req = request(reasoning_budget=2000, reasoning_effort="low", max_tokens=3000)
    body = json.loads(BedrockAdapter("aws-bedrock", counting_ids()).build_request(req, target).body)
    assert body["additionalModelRequestFields"] == {
        "thinking": {"type": "enabled", "budget_tokens": 2000}
    }
    assert body["inferenceConfig"]["maxTokens"] == 3000
