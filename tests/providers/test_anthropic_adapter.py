"""Anthropic answers → ours: whole Messages, HTTP errors, and stream edge cases."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from sluice.errors import (
    ApiError,
    InvalidRequestError,
    RateLimitError,
    RequestTimeoutError,
    ServiceUnavailableError,
    UpstreamError,
)
from sluice.providers.anthropic import AnthropicAdapter
from sluice.providers.anthropic.stream import AnthropicStreamTranslator
from tests.support.fake_anthropic import (
    PING,
    block_delta,
    block_start,
    block_stop,
    error_body,
    error_event,
    event,
    message,
    message_end,
    message_start,
    text_block,
    text_stream,
    usage,
)
from tests.support.gateway import counting_ids
from tests.support.transcript import transcript


def adapter() -> AnthropicAdapter:
    return AnthropicAdapter("anthropic", counting_ids())


def parse(doc: dict[str, Any]) -> Any:
    return adapter().parse_response(200, {}, json.dumps(doc).encode())


# --- whole Messages ----------------------------------------------------------------------


def test_parse_message_with_thinking_text_tool_use_and_cache_usage() -> None:
    content: list[dict[str, Any]] = [
        {"type": "thinking", "thinking": "Weather needs a tool.", "signature": "EqQB"},
        {"type": "redacted_thinking", "data": "EmwK"},
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Oslo"}},
        {"type": "tool_use", "name": "get_time", "input": {}},
    ]
    final = usage(10, 40, cache_write=100, cache_read=2000)
    final["output_tokens_details"] = {"thinking_tokens": 12}
    parsed = parse(message(content, stop_reason="tool_use", final_usage=final))
    assert msgspec.to_builtins(parsed.choices) == [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": "Let me check.",
                "reasoning_content": "Weather needs a tool.",
                "tool_calls": [
                    {
                        "id": "toolu_01",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
                    },
                    {
                        "id": "call_000001",
                        "type": "function",
                        "function": {"name": "get_time", "arguments": "{}"},
                    },
                ],
                "thinking_blocks": [
                    {"type": "thinking", "thinking": "Weather needs a tool.", "signature": "EqQB"},
                    {"type": "redacted_thinking", "data": "EmwK"},
                ],
            },
        }
    ]
    assert msgspec.to_builtins(parsed.usage) == {
        "prompt_tokens": 2110,
        "completion_tokens": 40,
        "cached_tokens": 2000,
        "cache_write_tokens": 100,
        "reasoning_tokens": 12,
        "provider_cost": None,
        "estimated": False,
    }


def test_tool_only_message_has_null_content_and_empty_one_has_empty_text() -> None:
    tool = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}
    only_tool = parse(message([tool], stop_reason="tool_use")).choices[0].message
    assert only_tool.content is None
    assert parse(message([])).choices[0].message.content == ""


@pytest.mark.parametrize(
    ("stop_reason", "finish"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("pause_turn", "stop"),
        ("max_tokens", "length"),
        ("model_context_window_exceeded", "length"),
        ("refusal", "content_filter"),
        ("a_reason_added_later", "stop"),
    ],
)
def test_stop_reasons(stop_reason: str, finish: str) -> None:
    content = [{"type": "text", "text": "x"}]
    assert parse(message(content, stop_reason=stop_reason)).choices[0].finish_reason == finish


@pytest.mark.parametrize(
    "body", [b"", b"{", b"[]", b'{"choices": []}', b'{"type": "message", "content": 5}']
)
def test_malformed_messages_are_upstream_errors(body: bytes) -> None:
    with pytest.raises(UpstreamError) as info:
        adapter().parse_response(200, {}, body)
    assert info.value.code == "upstream_malformed_response"


# --- HTTP errors --------------------------------------------------------------------------


def body(kind: str, message: str) -> bytes:
    return json.dumps(error_body(kind, message)).encode()


@pytest.mark.parametrize(
    ("status", "headers", "raw", "cls", "http", "code", "failover"),
    [
        (
            400,
            {},
            body("invalid_request_error", "max_tokens: Field required"),
            InvalidRequestError,
            400,
            None,
            False,
        ),
        (
            401,
            {},
            body("authentication_error", "invalid x-api-key sk-ant-1"),
            UpstreamError,
            502,
            "upstream_authentication_failed",
            True,
        ),
        (
            402,
            {},
            body("billing_error", "Your credit balance is too low"),
            UpstreamError,
            502,
            "upstream_billing_error",
            True,
        ),
        (
            403,
            {},
            body("permission_error", "no access"),
            UpstreamError,
            502,
            "upstream_authentication_failed",
            True,
        ),
        (
            404,
            {},
            body("not_found_error", "model: claude-x"),
            UpstreamError,
            502,
            "upstream_not_found",
            True,
        ),
        (
            413,
            {},
            body("request_too_large", "Request exceeds the maximum size"),
            InvalidRequestError,
            400,
            "request_too_large",
            False,
        ),
        (
            429,
            {"retry-after": "7"},
            body("rate_limit_error", "Number of request tokens has exceeded your limit"),
            RateLimitError,
            429,
            "upstream_rate_limited",
            True,
        ),
        (
            500,
            {},
            body("api_error", "Internal server error"),
            UpstreamError,
            502,
            "upstream_http_error",
            True,
        ),
        (
            504,
            {},
            body("timeout_error", "Request timed out"),
            RequestTimeoutError,
            504,
            "upstream_timeout",
            True,
        ),
        (
            529,
            {},
            body("overloaded_error", "Overloaded"),
            ServiceUnavailableError,
            503,
            "upstream_overloaded",
            True,
        ),
        (502, {}, b"<html>Bad gateway</html>", UpstreamError, 502, "upstream_http_error", True),
    ],
    ids=["400", "401", "402", "403", "404", "413", "429", "500", "504", "529", "502-html"],
)
def test_error_mapping(
    status: int,
    headers: dict[str, str],
    raw: bytes,
    cls: type[ApiError],
    http: int,
    code: str | None,
    failover: bool,
) -> None:
    err = adapter().parse_error(status, headers, raw)
    assert type(err) is cls
    assert (err.http_status, err.code, err.failover) == (http, code, failover)
    assert "sk-ant-1" not in err.message


def test_error_keeps_the_providers_message_and_retry_after() -> None:
    err = adapter().parse_error(400, {}, body("invalid_request_error", "max_tokens: required"))
    assert err.message == "max_tokens: required"
    limited = adapter().parse_error(429, {"retry-after": "7"}, body("rate_limit_error", "slow"))
    assert limited.retry_after == 7.0
    overloaded = adapter().parse_error(529, {}, body("overloaded_error", "Overloaded"))
    assert overloaded.retryable


# --- stream edge cases ---------------------------------------------------------------------


def run(*steps: Any) -> list[dict[str, Any]]:
    raw = b"".join(s if isinstance(s, bytes) else b"".join(s) for s in steps)
    return transcript(AnthropicStreamTranslator(counting_ids()), [raw])


@pytest.mark.parametrize(
    ("kind", "cls", "code"),
    [
        ("overloaded_error", ServiceUnavailableError, "upstream_overloaded"),
        ("rate_limit_error", RateLimitError, "upstream_rate_limited"),
        ("timeout_error", RequestTimeoutError, "upstream_timeout"),
        ("api_error", UpstreamError, "upstream_stream_error"),
        ("invalid_request_error", UpstreamError, "upstream_stream_error"),
    ],
)
def test_error_events(kind: str, cls: type[ApiError], code: str) -> None:
    translator = AnthropicStreamTranslator(counting_ids())
    translator.feed(
        message_start() + error_event(kind, "went wrong") + b"".join(text_block(0, "x"))
    )
    failure = translator.failure
    assert type(failure) is cls and failure.code == code
    assert translator.feed(b"".join(text_block(1, "more"))) == []
    with pytest.raises(type(failure)):
        translator.finish()


def test_error_events_of_any_shape_and_malformed_data_fail_the_stream() -> None:
    lines = run(message_start(), b'event: error\ndata: {"message": "boom"}\n\n')
    assert lines[-1]["end"] == {"type": "upstream_error", "code": "upstream_stream_error"}
    unnamed = b'data: {"type": "error", "error": {"type": "overloaded_error", "message": "x"}}\n\n'
    lines = run(message_start(), unnamed)
    assert lines[-1]["end"] == {"type": "service_unavailable", "code": "upstream_overloaded"}
    lines = run(message_start(), b"event: content_block_delta\ndata: {not json}\n\n")
    assert lines[-1]["end"] == {"type": "upstream_error", "code": "upstream_malformed_event"}


def test_unknown_events_blocks_and_deltas_show_nothing() -> None:
    server_tool = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}
    citation = {"type": "citations_delta", "citation": {"type": "char_location", "cited_text": "x"}}
    lines = run(
        message_start(),
        event("a_future_event", {"type": "a_future_event"}),
        block_start(0, server_tool),
        block_delta(0, {"type": "input_json_delta", "partial_json": '{"query": "x"}'}),
        block_stop(0),
        block_start(1, {"type": "text", "text": ""}),
        block_delta(1, citation),
        block_delta(1, {"type": "text_delta", "text": "Found it."}),
        block_stop(1),
        PING,
        message_end("end_turn", usage(12, 9)),
    )
    assert [line.get("choices") for line in lines[1:-1]] == [
        [{"index": 0, "delta": {"content": "Found it."}, "finish_reason": None}],
        [{"index": 0, "delta": {}, "finish_reason": "stop"}],
    ]


def test_tool_input_given_whole_at_block_start_becomes_the_arguments() -> None:
    tool = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Rome"}}
    lines = run(
        message_start(),
        block_start(0, tool),
        block_stop(0),
        message_end("tool_use", usage(12, 9)),
    )
    fragments = [
        c for line in lines[:-1] for c in line["choices"][0]["delta"].get("tool_calls", [])
    ]
    assert [f["function"]["arguments"] for f in fragments] == ["", '{"city":"Rome"}']


def test_finish_waits_for_message_stop_and_nothing_follows_it() -> None:
    translator = AnthropicStreamTranslator(counting_ids())
    *head, stop = text_stream("Hi")
    assert all(c[0].finish_reason is None for c in translator.feed(b"".join(head)))
    (finished,) = translator.feed(stop + b"".join(text_block(1, "late")))
    assert finished[0].finish_reason == "stop"
    assert translator.finish() == []


def test_message_stop_without_message_delta_finishes_with_stop() -> None:
    lines = run(
        message_start(), *text_block(0, "x"), event("message_stop", {"type": "message_stop"})
    )
    assert lines[-2]["choices"][0]["finish_reason"] == "stop"
    assert lines[-1]["end"] == "complete"


def test_usage_is_cumulative_and_readable_before_the_end() -> None:
    translator = AnthropicStreamTranslator(counting_ids())
    translator.feed(message_start(30, cache_read=70))
    assert translator.usage is not None
    assert (translator.usage.prompt_tokens, translator.usage.completion_tokens) == (100, 1)
    translator.feed(b"".join(message_end("end_turn", {"output_tokens": 25})))
    assert translator.usage is not None
    assert (translator.usage.prompt_tokens, translator.usage.cached_tokens) == (100, 70)
    assert translator.usage.completion_tokens == 25


def test_an_empty_stream_is_an_upstream_error() -> None:
    assert run(b"")[-1]["end"] == {"type": "upstream_error", "code": "upstream_empty"}
