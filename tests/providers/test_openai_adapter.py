from __future__ import annotations

import json

import msgspec
import pytest

from sluice.core.connection import ConnectionSettings, Secret, Target, Timeouts
from sluice.errors import (
    InvalidRequestError,
    RateLimitError,
    RequestTimeoutError,
    ServiceUnavailableError,
    UpstreamError,
)
from sluice.frontdoors.chat import decode_chat_request
from sluice.providers.openai import OpenAIAdapter
from tests.support.gateway import counting_ids

CONN = ConnectionSettings(
    "conn_o", "openai", "https://api.openai.com/v1/", Secret("sk-up-1"), timeouts=Timeouts()
)
TARGET = Target("openai/gpt-4o", "gpt-4o-2024-08-06", CONN)


def adapter() -> OpenAIAdapter:
    return OpenAIAdapter("openai", counting_ids())


def test_stream_request_uses_native_model_and_always_asks_for_usage() -> None:
    req = decode_chat_request(
        json.dumps(
            {
                "model": "openai/gpt-4o",
                "stream": True,
                "models": ["x/y"],
                "temperature": 0.5,
                "messages": [{"role": "user", "content": "hi"}],
            }
        ).encode()
    )
    up = adapter().build_request(req, TARGET)
    assert up.url == "https://api.openai.com/v1/chat/completions"
    assert up.headers["authorization"] == "Bearer sk-up-1"
    assert up.headers["accept"] == "text/event-stream"
    assert json.loads(up.body) == {
        "model": "gpt-4o-2024-08-06",
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0.5,
        "messages": [{"role": "user", "content": "hi"}],
    }


def test_non_stream_request_has_no_stream_fields() -> None:
    req = decode_chat_request(
        b'{"model": "m", "messages": [{"role": "user", "content": "x"}],'
        b' "stream": false, "stream_options": {"include_usage": true}}'
    )
    body = json.loads(adapter().build_request(req, TARGET).body)
    assert "stream" not in body and "stream_options" not in body


def test_parse_response_with_tool_calls_and_usage() -> None:
    body = json.dumps(
        {
            "id": "x",
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "reasoning": "hmm",
                        "tool_calls": [
                            {"type": "function", "function": {"name": "f", "arguments": "{}"}}
                        ],
                    },
                }
            ],
            "usage": {
                "prompt_tokens": 5,
                "completion_tokens": 2,
                "total_tokens": 7,
                "prompt_tokens_details": {"cached_tokens": 4},
                "cost": 0.25,
            },
        }
    ).encode()
    parsed = adapter().parse_response(200, {}, body)
    assert msgspec.to_builtins(parsed.choices) == [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": None,
                "reasoning_content": "hmm",
                "tool_calls": [
                    {
                        "id": "call_000001",
                        "type": "function",
                        "function": {"name": "f", "arguments": "{}"},
                    }
                ],
            },
        }
    ]
    assert parsed.usage is not None
    assert (parsed.usage.cached_tokens, parsed.usage.provider_cost) == (4, 0.25)


@pytest.mark.parametrize("body", [b"", b"{", b'{"choices": []}', b'{"choices": 5}'])
def test_malformed_responses_are_upstream_errors(body: bytes) -> None:
    with pytest.raises(UpstreamError):
        adapter().parse_response(200, {}, body)


OPENAI_400 = json.dumps(
    {
        "error": {
            "message": "Invalid 'messages[0].content'",
            "type": "invalid_request_error",
            "param": "messages[0].content",
            "code": "invalid_value",
        }
    }
).encode()


@pytest.mark.parametrize(
    ("status", "headers", "body", "cls", "http", "code", "failover"),
    [
        (400, {}, OPENAI_400, InvalidRequestError, 400, "invalid_value", False),
        (422, {}, b'{"detail": "bad"}', InvalidRequestError, 400, None, False),
        (
            401,
            {},
            b'{"error": {"message": "Incorrect API key provided: sk-up-1"}}',
            UpstreamError,
            502,
            "upstream_authentication_failed",
            True,
        ),
        (
            404,
            {},
            b'{"error": {"message": "no such model"}}',
            UpstreamError,
            502,
            "upstream_not_found",
            True,
        ),
        (408, {}, b"", RequestTimeoutError, 504, "upstream_timeout", True),
        (
            429,
            {"retry-after": "7"},
            b'{"error": {"message": "slow"}}',
            RateLimitError,
            429,
            "upstream_rate_limited",
            True,
        ),
        (500, {}, b"<html>oops</html>", UpstreamError, 502, "upstream_http_error", True),
        (503, {}, b"", ServiceUnavailableError, 503, "upstream_overloaded", True),
        (529, {}, b"", ServiceUnavailableError, 503, "upstream_overloaded", True),
    ],
    ids=["400", "422", "401", "404", "408", "429", "500", "503", "529"],
)
def test_error_mapping(
    status: int,
    headers: dict[str, str],
    body: bytes,
    cls: type,
    http: int,
    code: str | None,
    failover: bool,
) -> None:
    err = adapter().parse_error(status, headers, body)
    assert type(err) is cls
    assert (err.http_status, err.code, err.failover) == (http, code, failover)
    assert "sk-up-1" not in err.message


def test_error_keeps_provider_param_and_retry_after() -> None:
    err = adapter().parse_error(400, {}, OPENAI_400)
    assert err.param == "messages[0].content"
    assert err.message == "Invalid 'messages[0].content'"
    limited = adapter().parse_error(429, {"retry-after-ms": "1500"}, b"{}")
    assert limited.retry_after == 1.5


def test_logprobs_objects_pass_through_and_null_is_dropped() -> None:
    logprobs = {
        "content": [{"token": "Hi", "logprob": -0.1, "bytes": [72, 105], "top_logprobs": []}],
        "refusal": None,
    }
    stream = (
        b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""},'
        b'"logprobs":null,"finish_reason":null}]}\n\n'
        b'data: {"choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":'
        + json.dumps(logprobs).encode()
        + b',"finish_reason":null}]}\n\n'
        b'data: {"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}\n\n'
        b"data: [DONE]\n\n"
    )
    req = decode_chat_request(b'{"model": "m", "messages": [{"role": "user", "content": "x"}]}')
    translator = adapter().stream(req)
    chunks = [
        json.loads(msgspec.json.encode(c)) for c in translator.feed(stream) + translator.finish()
    ]
    assert chunks[1] == [
        {"index": 0, "delta": {"content": "Hi"}, "finish_reason": None, "logprobs": logprobs}
    ]
    assert all("logprobs" not in c[0] for i, c in enumerate(chunks) if i != 1)
    body = json.dumps(
        {
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "logprobs": logprobs,
                    "message": {"role": "assistant", "content": "Hi"},
                }
            ]
        }
    )
    parsed = adapter().parse_response(200, {}, body.encode())
    assert json.loads(msgspec.json.encode(parsed.choices[0]))["logprobs"] == logprobs
