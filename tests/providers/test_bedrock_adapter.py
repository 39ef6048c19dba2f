"""Bedrock requests (URL, headers, signing) and the parsing of answers and errors."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from sluice.core.connection import ConnectionSettings, Secret, Target, Timeouts
from sluice.core.upstream_request import AwsSigning
from sluice.errors import (
    InvalidRequestError,
    RateLimitError,
    RequestTimeoutError,
    ServiceUnavailableError,
    UpstreamError,
)
from sluice.frontdoors.chat import decode_chat_request
from sluice.providers.bedrock import BedrockAdapter
from tests.support.fake_bedrock import converse_response
from tests.support.gateway import counting_ids

RUNTIME = "https://bedrock-runtime.eu-west-1.amazonaws.com"
PROFILE = "arn:aws:bedrock:eu-west-1:123456789012:inference-profile/eu.anthropic.claude-x-v1:0"
STREAM = decode_chat_request(
    b'{"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}]}'
)
COMPLETE = decode_chat_request(b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}')


def adapter() -> BedrockAdapter:
    return BedrockAdapter("aws-bedrock", counting_ids())


def target(
    model: str = PROFILE,
    *,
    base_url: str = RUNTIME,
    region: str | None = "eu-west-1",
    key: str | None = None,
) -> Target:
    conn = ConnectionSettings(
        "conn_b",
        "aws-bedrock",
        base_url,
        Secret(key) if key else None,
        region=region,
        timeouts=Timeouts(),
    )
    return Target("anthropic/claude-x", model, conn)


def test_stream_request_with_an_arn_model_is_sigv4_signed() -> None:
    up = adapter().build_request(STREAM, target())
    assert up.url == (
        RUNTIME + "/model/arn%3Aaws%3Abedrock%3Aeu-west-1%3A123456789012%3Ainference-profile"
        "%2Feu.anthropic.claude-x-v1%3A0/converse-stream"
    )
    assert up.method == "POST" and up.stream
    assert up.aws_sigv4 == AwsSigning(service="bedrock", region="eu-west-1")
    assert up.headers == {
        "content-type": "application/json",
        "accept": "application/vnd.amazon.eventstream",
        "accept-encoding": "identity",
    }
    assert json.loads(up.body) == {"messages": [{"role": "user", "content": [{"text": "hi"}]}]}


def test_non_stream_request_uses_converse() -> None:
    up = adapter().build_request(COMPLETE, target("amazon.nova-pro-v1:0", base_url=RUNTIME + "/"))
    assert up.url == RUNTIME + "/model/amazon.nova-pro-v1%3A0/converse"
    assert not up.stream and up.headers["accept"] == "application/json"


def test_api_key_means_bearer_and_no_signing() -> None:
    up = adapter().build_request(STREAM, target(key="ABSKbedrock-key"))
    assert up.headers["authorization"] == "Bearer ABSKbedrock-key"
    assert up.aws_sigv4 is None


def test_region_comes_from_the_runtime_host_when_not_configured() -> None:
    up = adapter().build_request(STREAM, target(region=None))
    assert up.aws_sigv4 == AwsSigning(service="bedrock", region="eu-west-1")
    with pytest.raises(UpstreamError) as info:
        adapter().build_request(STREAM, target(base_url="http://127.0.0.1:9", region=None))
    assert info.value.code == "upstream_misconfigured"


def test_parse_response_with_reasoning_text_tool_use_and_usage() -> None:
    content: list[dict[str, Any]] = [
        {"reasoningContent": {"reasoningText": {"text": "Two cities.", "signature": "sig"}}},
        {"text": "Checking both."},
        {"toolUse": {"toolUseId": "tooluse_a", "name": "get_weather", "input": {"city": "Paris"}}},
        {"toolUse": {"toolUseId": "tooluse_b", "name": "get_weather", "input": {"city": "Oslo"}}},
    ]
    usage = {
        "inputTokens": 20,
        "outputTokens": 30,
        "totalTokens": 150,
        "cacheReadInputTokens": 60,
        "cacheWriteInputTokens": 40,
    }
    body = json.dumps(converse_response(content, stop="tool_use", usage=usage)).encode()
    parsed = adapter().parse_response(200, {}, body)
    assert msgspec.to_builtins(parsed.choices) == [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": "Checking both.",
                "reasoning_content": "Two cities.",
                "tool_calls": [
                    {
                        "id": "tooluse_a",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    },
                    {
                        "id": "tooluse_b",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                    },
                ],
                "thinking_blocks": [
                    {"type": "thinking", "thinking": "Two cities.", "signature": "sig"}
                ],
            },
        }
    ]
    assert parsed.usage is not None
    assert (parsed.usage.prompt_tokens, parsed.usage.completion_tokens) == (120, 30)
    assert (parsed.usage.cached_tokens, parsed.usage.cache_write_tokens) == (60, 40)


@pytest.mark.parametrize(
    ("stop", "finish"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("guardrail_intervened", "content_filter"),
        ("content_filtered", "content_filter"),
        ("model_context_window_exceeded", "length"),
        ("malformed_model_output", "stop"),
    ],
)
def test_stop_reasons(stop: str, finish: str) -> None:
    body = json.dumps(converse_response([{"text": "x"}], stop=stop)).encode()
    assert adapter().parse_response(200, {}, body).choices[0].finish_reason == finish


@pytest.mark.parametrize(
    "body", [b"", b"{", b"{}", b'{"output": {}}', b'{"output": {"message": {"content": 5}}}']
)
def test_malformed_responses_are_upstream_errors(body: bytes) -> None:
    with pytest.raises(UpstreamError):
        adapter().parse_response(200, {}, body)


def amzn(error_type: str) -> dict[str, str]:
    return {
        "x-amzn-errortype": f"{error_type}:http://internal.amazon.com/coral/com.amazon.bedrock/"
    }


ERRORS = [
    ("validation", 400, "ValidationException", InvalidRequestError, 400, None, False),
    (
        "access-denied",
        403,
        "AccessDeniedException",
        UpstreamError,
        502,
        "upstream_authentication_failed",
        True,
    ),
    (
        "bad-signature",
        403,
        "InvalidSignatureException",
        UpstreamError,
        502,
        "upstream_authentication_failed",
        True,
    ),
    ("not-found", 404, "ResourceNotFoundException", UpstreamError, 502, "upstream_not_found", True),
    (
        "model-timeout",
        408,
        "ModelTimeoutException",
        RequestTimeoutError,
        504,
        "upstream_timeout",
        True,
    ),
    ("throttling", 429, "ThrottlingException", RateLimitError, 429, "upstream_rate_limited", True),
    (
        "not-ready",
        429,
        "ModelNotReadyException",
        RateLimitError,
        429,
        "upstream_model_not_ready",
        True,
    ),
    ("model-error", 424, "ModelErrorException", UpstreamError, 502, "upstream_model_error", True),
    ("internal", 500, "InternalServerException", UpstreamError, 502, "upstream_http_error", True),
    (
        "unavailable",
        503,
        "ServiceUnavailableException",
        ServiceUnavailableError,
        503,
        "upstream_overloaded",
        True,
    ),
    ("unknown-type", 502, "SomethingNewException", UpstreamError, 502, "upstream_http_error", True),
]


@pytest.mark.parametrize(
    ("status", "error_type", "cls", "http", "code", "failover"),
    [e[1:] for e in ERRORS],
    ids=[e[0] for e in ERRORS],
)
def test_error_mapping(
    status: int, error_type: str, cls: type, http: int, code: str | None, failover: bool
) -> None:
    body = json.dumps({"message": "The model said no (arn:aws:iam::123456789012:role/x)"})
    err = adapter().parse_error(status, amzn(error_type), body.encode())
    assert type(err) is cls
    assert (err.http_status, err.code, err.failover) == (http, code, failover)
    if status in (401, 403):
        assert "123456789012" not in err.message


def test_error_type_decides_over_the_status_and_body_type_is_read() -> None:
    err = adapter().parse_error(400, amzn("ThrottlingException"), b'{"message": "slow down"}')
    assert isinstance(err, RateLimitError) and "slow down" in err.message
    body = b'{"__type": "com.amazon.bedrock#ValidationException", "Message": "bad field"}'
    err = adapter().parse_error(400, {}, body)
    assert isinstance(err, InvalidRequestError) and err.message == "bad field"
    limited = adapter().parse_error(429, {"retry-after": "3", **amzn("ThrottlingException")}, b"")
    assert limited.retry_after == 3.0
