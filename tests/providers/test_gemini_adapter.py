"""Gemini's whole responses, errors and stream edge cases → our types."""

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
from sluice.providers.base import StreamShape
from sluice.providers.gemini import GeminiAdapter, GeminiStreamTranslator
from tests.support.fake_gemini import (
    SIGNATURE,
    call,
    candidate,
    error,
    event,
    response,
    text,
    usage,
)
from tests.support.gateway import counting_ids

KEY = "AIzaSyD-0123456789abcdefghijklmnopqrstu"


def adapter() -> GeminiAdapter:
    return GeminiAdapter("gemini", counting_ids())


def parse(doc: dict[str, Any]) -> Any:
    parsed = adapter().parse_response(200, {}, json.dumps(doc).encode())
    return msgspec.to_builtins(parsed.choices), parsed.usage


# --- whole responses --------------------------------------------------------------------


def test_parse_response_text_thoughts_calls_and_usage() -> None:
    doc = response(
        candidate(
            text("Let me think.", thought=True),
            text("Checking ", signature=SIGNATURE),
            text("both."),
            call("get_weather", {"city": "Paris"}, signature=SIGNATURE),
            call("get_time", {}, id="fc-7"),
            finish="STOP",
        ),
        usage=usage(40, 12, thoughts=30, cached=16),
    )
    choices, used = parse(doc)
    assert choices == [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": "Checking both.",
                "reasoning_content": "Let me think.",
                "tool_calls": [
                    {
                        "id": "call_000001",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                    },
                    {
                        "id": "fc-7",
                        "type": "function",
                        "function": {"name": "get_time", "arguments": "{}"},
                    },
                ],
            },
        }
    ]
    assert msgspec.to_builtins(used) == {
        "prompt_tokens": 40,
        "completion_tokens": 42,
        "cached_tokens": 16,
        "cache_write_tokens": 0,
        "reasoning_tokens": 30,
        "provider_cost": None,
        "estimated": False,
    }


def test_parse_response_orders_candidates_and_counts_tool_prompt_tokens() -> None:
    doc = response(
        candidate(text("B"), finish="MAX_TOKENS", index=1),
        candidate(text("A"), finish="STOP", index=0),
        usage={"promptTokenCount": 10, "toolUsePromptTokenCount": 5, "candidatesTokenCount": 2},
    )
    choices, used = parse(doc)
    assert [(c["index"], c["message"]["content"], c["finish_reason"]) for c in choices] == [
        (0, "A", "stop"),
        (1, "B", "length"),
    ]
    assert (used.prompt_tokens, used.completion_tokens) == (15, 2)


@pytest.mark.parametrize(
    ("reason", "ours"),
    [
        ("STOP", "stop"),
        ("MAX_TOKENS", "length"),
        ("CONTINUATION", "length"),
        ("SAFETY", "content_filter"),
        ("RECITATION", "content_filter"),
        ("LANGUAGE", "content_filter"),
        ("BLOCKLIST", "content_filter"),
        ("PROHIBITED_CONTENT", "content_filter"),
        ("SPII", "content_filter"),
        ("IMAGE_SAFETY", "content_filter"),
        ("OTHER", "stop"),
        ("FINISH_REASON_UNSPECIFIED", "stop"),
        ("SOMETHING_NEW", "stop"),
    ],
)
def test_finish_reasons(reason: str, ours: str) -> None:
    choices, used = parse(response(candidate(finish=reason)))
    assert choices[0]["finish_reason"] == ours
    assert choices[0]["message"]["content"] is None
    assert used is None
    stream = GeminiStreamTranslator(counting_ids())
    chunks = stream.feed(event(response(candidate(finish=reason))))
    assert [c[0].finish_reason for c in chunks] == [None, ours]


@pytest.mark.parametrize(
    "reason",
    [
        "MALFORMED_FUNCTION_CALL",
        "UNEXPECTED_TOOL_CALL",
        "TOO_MANY_TOOL_CALLS",
        "MALFORMED_RESPONSE",
        "MISSING_THOUGHT_SIGNATURE",
    ],
)
def test_malformed_output_is_a_retryable_upstream_error(reason: str) -> None:
    with pytest.raises(UpstreamError) as info:
        parse(response(candidate(finish=reason)))
    assert info.value.code == "upstream_invalid_output" and info.value.failover
    stream = GeminiStreamTranslator(counting_ids())
    assert stream.feed(event(response(candidate(finish=reason)))) == []
    assert isinstance(stream.failure, UpstreamError)


def test_blocked_prompt_is_a_content_filter_request_error() -> None:
    doc = response(promptFeedback={"blockReason": "SAFETY"}, usage=usage(12, 0))
    with pytest.raises(InvalidRequestError) as info:
        parse(doc)
    err = info.value
    assert (err.code, err.param, err.failover) == ("content_filter", "messages", False)
    assert "SAFETY" in err.message


@pytest.mark.parametrize(
    "body",
    [b"", b"{", b"[]", b'{"candidates": 5}', json.dumps(response(usage=usage(1, 0))).encode()],
    ids=["empty", "truncated", "array", "wrong-type", "no-candidates"],
)
def test_malformed_responses_are_upstream_errors(body: bytes) -> None:
    with pytest.raises(UpstreamError):
        adapter().parse_response(200, {}, body)


def test_error_object_in_a_200_body_is_raised() -> None:
    with pytest.raises(ServiceUnavailableError):
        parse(error(503, "overloaded", "UNAVAILABLE"))


# --- HTTP errors ------------------------------------------------------------------------

ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"


def key_invalid() -> bytes:
    detail = {"@type": ERROR_INFO, "reason": "API_KEY_INVALID", "domain": "googleapis.com"}
    debug = {"@type": "type.googleapis.com/google.rpc.DebugInfo", "detail": f"key: {KEY}"}
    doc = error(400, "API key not valid. Please pass a valid API key.", "INVALID_ARGUMENT")
    doc["error"]["details"] = [detail, debug]
    return json.dumps([doc]).encode()


def err_body(code: int, message: str, status: str, *details: dict[str, Any]) -> bytes:
    return json.dumps(error(code, message, status, *details)).encode()


RETRY_INFO = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}
QUOTA = {
    "@type": "type.googleapis.com/google.rpc.QuotaFailure",
    "violations": [{"quotaMetric": "generate_content_free_tier_requests", "quotaValue": "10"}],
}


@pytest.mark.parametrize(
    ("status", "headers", "body", "cls", "http", "code", "failover"),
    [
        (
            400,
            {},
            err_body(400, "* contents: contents is not specified", "INVALID_ARGUMENT"),
            InvalidRequestError,
            400,
            "invalid_argument",
            False,
        ),
        (
            400,
            {},
            err_body(400, "User location is not supported.", "FAILED_PRECONDITION"),
            InvalidRequestError,
            400,
            "failed_precondition",
            False,
        ),
        (400, {}, key_invalid(), UpstreamError, 502, "upstream_authentication_failed", True),
        (
            403,
            {},
            err_body(403, "Method doesn't allow unregistered callers.", "PERMISSION_DENIED"),
            UpstreamError,
            502,
            "upstream_authentication_failed",
            True,
        ),
        (
            401,
            {},
            err_body(401, "Request had invalid authentication credentials.", "UNAUTHENTICATED"),
            UpstreamError,
            502,
            "upstream_authentication_failed",
            True,
        ),
        (
            404,
            {},
            err_body(404, "models/gemini-9 is not found for API version v1beta", "NOT_FOUND"),
            UpstreamError,
            502,
            "upstream_not_found",
            True,
        ),
        (
            429,
            {},
            err_body(
                429, "You exceeded your current quota.", "RESOURCE_EXHAUSTED", QUOTA, RETRY_INFO
            ),
            RateLimitError,
            429,
            "upstream_rate_limited",
            True,
        ),
        (
            500,
            {},
            err_body(500, "An internal error has occurred.", "INTERNAL"),
            UpstreamError,
            502,
            "upstream_http_error",
            True,
        ),
        (
            503,
            {},
            err_body(503, "The model is overloaded.", "UNAVAILABLE"),
            ServiceUnavailableError,
            503,
            "upstream_overloaded",
            True,
        ),
        (
            504,
            {},
            err_body(504, "Deadline expired before operation could complete.", "DEADLINE_EXCEEDED"),
            RequestTimeoutError,
            504,
            "upstream_timeout",
            True,
        ),
        (502, {}, b"<html>Bad Gateway</html>", UpstreamError, 502, "upstream_http_error", True),
        (429, {"retry-after": "3"}, b"", RateLimitError, 429, "upstream_rate_limited", True),
    ],
    ids=[
        "invalid-argument",
        "failed-precondition",
        "api-key-invalid",
        "permission-denied",
        "unauthenticated",
        "not-found",
        "resource-exhausted",
        "internal",
        "unavailable",
        "deadline-exceeded",
        "html-502",
        "empty-429",
    ],
)
def test_error_mapping(
    status: int,
    headers: dict[str, str],
    body: bytes,
    cls: type[ApiError],
    http: int,
    code: str | None,
    failover: bool,
) -> None:
    err = adapter().parse_error(status, headers, body)
    assert type(err) is cls
    assert (err.http_status, err.code, err.failover) == (http, code, failover)
    assert KEY not in err.message


def test_invalid_argument_passes_the_message_on() -> None:
    body = err_body(400, "* contents: contents is not specified", "INVALID_ARGUMENT")
    assert adapter().parse_error(400, {}, body).message == "* contents: contents is not specified"


def test_retry_after_from_header_else_retry_info() -> None:
    body = err_body(429, "quota", "RESOURCE_EXHAUSTED", RETRY_INFO)
    assert adapter().parse_error(429, {}, body).retry_after == 37.0
    assert adapter().parse_error(429, {"retry-after": "5"}, body).retry_after == 5.0
    fractional = err_body(429, "quota", "RESOURCE_EXHAUSTED", {"retryDelay": "0.5s"})
    assert adapter().parse_error(429, {}, fractional).retry_after == 0.5


def test_status_string_decides_over_the_http_status() -> None:
    body = err_body(503, "The model is overloaded.", "UNAVAILABLE")
    assert type(adapter().parse_error(500, {}, body)) is ServiceUnavailableError


def test_google_api_keys_are_redacted_from_messages() -> None:
    body = err_body(400, f"Bad value for key {KEY} in request", "INVALID_ARGUMENT")
    err = adapter().parse_error(400, {}, body)
    assert err.message == "Bad value for key [redacted] in request"


# --- stream edge cases ---------------------------------------------------------------------


def test_error_event_in_the_stream_sets_failure_with_its_class() -> None:
    stream = GeminiStreamTranslator(counting_ids())
    raw = event(response(candidate(text("Hi")))) + event(
        error(429, "Resource has been exhausted (e.g. check quota).", "RESOURCE_EXHAUSTED")
    )
    chunks = stream.feed(raw)
    assert [c[0].delta.content for c in chunks] == ["", "Hi"]
    assert isinstance(stream.failure, RateLimitError)
    assert stream.feed(event(response(candidate(text("more"))))) == []
    with pytest.raises(RateLimitError):
        stream.finish()


def test_malformed_event_is_an_upstream_error() -> None:
    stream = GeminiStreamTranslator(counting_ids())
    stream.feed(b"data: {not json}\r\n\r\n")
    assert isinstance(stream.failure, UpstreamError)
    assert stream.failure.code == "upstream_malformed_event"


def test_empty_stream_is_an_upstream_error() -> None:
    stream = GeminiStreamTranslator(counting_ids())
    assert stream.feed(b": comment\r\n\r\n") == []
    with pytest.raises(UpstreamError) as info:
        stream.finish()
    assert info.value.code == "upstream_empty"


def test_an_event_without_its_blank_line_is_not_dispatched() -> None:
    """SSE rules: the stream ended inside an event, so it was cut."""
    stream = GeminiStreamTranslator(counting_ids())
    raw = event(response(candidate(text("Hi"), finish="STOP"), usage=usage(3, 1)))
    assert stream.feed(raw.rstrip()) == []
    with pytest.raises(UpstreamError):
        stream.finish()


def test_call_indexes_count_per_candidate_and_across_events() -> None:
    stream = GeminiStreamTranslator(counting_ids(), StreamShape(choices=2))  # n = 2
    chunks = stream.feed(
        event(response(candidate(call("a", {}), index=0), candidate(call("b", {}), index=1)))
        + event(response(candidate(call("c", {"x": 1}), index=0, finish="STOP")))
    )
    calls = [
        (c[0].index, t.index, t.function.name)
        for c in chunks
        for t in (c[0].delta.tool_calls or [])
        if not isinstance(t.function, msgspec.UnsetType)
        and not isinstance(t.function.name, msgspec.UnsetType)
    ]
    assert calls == [(0, 0, "a"), (1, 0, "b"), (0, 1, "c")]
