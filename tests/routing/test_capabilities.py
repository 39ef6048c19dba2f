"""What a request needs of its models and connections, and the plan cut to the attempts
that have it (routing/capabilities.py)."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.config import ModelConfig
from sluice.core.connection import ConnectionSettings
from sluice.errors import InvalidRequestError
from sluice.routing.capabilities import (
    CAPABILITY_MISSING,
    capable_plan,
    chat_needs,
    extra_fields,
    lacking,
)
from sluice.routing.catalog import Catalog, builtin_models
from sluice.routing.plan import Plan, Planner
from sluice.wire.chunks import ModelCapabilities
from tests.support.routing import request

TEXT_ONLY = ModelCapabilities(chat=True, tools=False, vision=False, reasoning=False)
IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
SCHEMA = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}


def needs(**fields: Any) -> frozenset[str]:
    return chat_needs(request(**fields))


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, {"chat"}),
        ({"tools": [TOOL]}, {"chat", "tools"}),
        ({"tools": []}, {"chat"}),
        ({"messages": [{"role": "user", "content": [IMAGE]}]}, {"chat", "vision"}),
        ({"response_format": SCHEMA}, {"chat", "json_schema"}),
        ({"response_format": {"type": "json_object"}}, {"chat"}),
        ({"reasoning_effort": "high"}, {"chat", "reasoning"}),
        ({"reasoning_effort": "none"}, {"chat"}),
        ({"reasoning_budget": 1024}, {"chat", "reasoning"}),
    ],
    ids=[
        "plain",
        "tools",
        "no-tools",
        "image",
        "json-schema",
        "json-object",
        "effort",
        "effort-none",
        "budget",
    ],
)
def test_chat_needs(fields: dict[str, Any], expected: set[str]) -> None:
    assert needs(**fields) == expected


def test_an_image_in_a_tool_result_needs_vision() -> None:
    messages = [
        {"role": "user", "content": "look"},
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c", "content": [IMAGE]},
    ]
    assert "vision" in needs(messages=messages)


@pytest.mark.parametrize(
    ("caps", "asked", "missing"),
    [
        (ModelCapabilities(), {"chat", "tools", "vision", "embeddings"}, None),
        (TEXT_ONLY, {"chat"}, None),
        (TEXT_ONLY, {"chat", "tools"}, "tools"),
        (TEXT_ONLY, {"chat", "json_schema"}, None),  # undeclared: tried
        (ModelCapabilities(embeddings=True), {"chat"}, "chat"),
        (ModelCapabilities(embeddings=True, chat=True), {"chat"}, None),
        (ModelCapabilities(chat=True, embeddings=False), {"embeddings"}, "embeddings"),
    ],
    ids=[
        "unknown-is-capable",
        "declared",
        "declared-false",
        "undeclared",
        "embeddings-model-is-no-chat-model",
        "unless-it-says-so",
        "chat-model-cannot-embed",
    ],
)
def test_lacking(caps: ModelCapabilities, asked: set[str], missing: str | None) -> None:
    [model] = Catalog([ModelConfig("m/x", {"demo": "x"}, capabilities=caps)])
    assert lacking(model, asked) == missing


def conn(id_: str, kind: str, *, allow: frozenset[str] = frozenset()) -> ConnectionSettings:
    return ConnectionSettings(id_, kind, "http://x", allow_extra_fields=allow)


MODELS = [
    ModelConfig("t/plain", {"conn_a": "plain"}, fallbacks=["t/smart"], capabilities=TEXT_ONLY),
    ModelConfig("t/smart", {"conn_a": "smart", "conn_b": "smart"}),
]


def plan(name: str, *conns: ConnectionSettings) -> Plan:
    catalog = Catalog([*builtin_models(), *MODELS])
    return Planner(catalog, conns or (conn("conn_a", "x"), conn("conn_b", "y")), []).plan(name)


def test_attempts_whose_model_lacks_a_need_are_dropped() -> None:
    kept = capable_plan(plan("t/plain"), {"chat", "tools"})
    assert [a.target.model_id for a in kept.attempts] == ["t/smart", "t/smart"]
    full = plan("t/plain")
    assert capable_plan(full, {"chat"}) is full


def test_no_capable_attempt_is_a_400_naming_model_and_capability() -> None:
    with pytest.raises(InvalidRequestError) as info:
        capable_plan(
            plan("openai/text-embedding-3-small", conn("o", "openai")), chat_needs(request())
        )
    err = info.value
    assert (err.http_status, err.code, err.param) == (400, CAPABILITY_MISSING, "model")
    assert "'openai/text-embedding-3-small' does not support chat completions" in err.message
    with pytest.raises(InvalidRequestError) as info:
        capable_plan(plan("gpt-4o", conn("o", "openai")), {"chat", "reasoning"})
    assert info.value.param == "reasoning_effort"
    assert "'openai/gpt-4o' does not support reasoning." in info.value.message


def test_a_chat_model_cannot_embed() -> None:
    with pytest.raises(InvalidRequestError) as info:
        capable_plan(plan("sluice/demo", conn("d", "demo")), {"embeddings"})
    assert "does not support embeddings" in info.value.message
    embed = plan("sluice/demo-embed", conn("d", "demo"))
    assert capable_plan(embed, {"embeddings"}) is embed


def test_extra_fields_keep_only_connections_that_allow_them() -> None:
    allows = conn("conn_b", "y", allow=frozenset({"min_p", "top_k"}))
    full = plan("t/smart", conn("conn_a", "x"), allows)
    kept = capable_plan(full, {"chat"}, ("min_p",))
    assert [a.target.connection.id for a in kept.attempts] == ["conn_b"]
    with pytest.raises(InvalidRequestError) as info:
        capable_plan(full, {"chat"}, ("min_p", "repetition_penalty"))
    err = info.value
    assert (err.code, err.param) == ("unknown_parameter", "repetition_penalty")
    assert "allow_extra_fields" in err.message


def test_extra_fields_of_a_chat_body() -> None:
    assert extra_fields(request(min_p=0.1, chat_template_kwargs={"x": 1})) == (
        "min_p",
        "chat_template_kwargs",
    )
    assert extra_fields(request()) == ()
