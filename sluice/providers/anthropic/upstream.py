"""Anthropic's response format (decode only) and what it means in our terms.

One permissive struct per shape, shared by the stream and the whole Message: a
stream event carries whichever of ``message``, ``content_block``, ``delta``, ``usage``
and ``error`` its ``type`` uses, and types Anthropic adds later decode and are ignored.

Usage: ``prompt_tokens`` = ``input_tokens`` + ``cache_creation_input_tokens`` +
``cache_read_input_tokens`` (Anthropic's ``input_tokens`` excludes both cache kinds);
counts in a stream are cumulative, so the latest value of each field wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import msgspec
from msgspec import Struct

from sluice.core.usage import TokenUsage, reported_count
from sluice.errors import ApiError, UpstreamError
from sluice.providers.errors import error_for_status


class OutputTokensDetails(Struct):
    thinking_tokens: int | None = None


class Usage(Struct):
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    output_tokens_details: OutputTokensDetails | None = None


class ContentBlock(Struct):
    type: str = ""
    id: str | None = None
    name: str | None = None
    input: dict[str, Any] | None = None
    text: str | None = None
    thinking: str | None = None
    signature: str | None = None
    data: str | None = None


class Delta(Struct):
    """A content block's delta, or the message's (``stop_reason``, ``stop_sequence``) in
    ``message_delta``."""

    type: str | None = None
    text: str | None = None
    partial_json: str | None = None
    thinking: str | None = None
    signature: str | None = None
    stop_reason: str | None = None
    stop_sequence: str | None = None


class ErrorDetail(Struct):
    type: str | None = None
    message: str | None = None


class Message(Struct):
    type: str = ""
    content: list[ContentBlock] = []
    stop_reason: str | None = None
    stop_sequence: str | None = None
    usage: Usage | None = None


class StreamEvent(Struct):
    type: str = ""
    message: Message | None = None
    index: int = 0
    content_block: ContentBlock | None = None
    delta: Delta | None = None
    usage: Usage | None = None
    error: ErrorDetail | None = None


class ErrorBody(Struct):
    error: ErrorDetail | None = None


_ENCODER = msgspec.json.Encoder()
STREAM_EVENT = msgspec.json.Decoder(StreamEvent)
MESSAGE = msgspec.json.Decoder(Message)
ERROR_BODY = msgspec.json.Decoder(ErrorBody)


def error_detail(body: bytes) -> ErrorDetail | None:
    """The ``error`` object of an error body or event, if it has one."""
    try:
        return ERROR_BODY.decode(body).error
    except msgspec.DecodeError:
        return None


def tool_input_json(block: ContentBlock) -> str:
    """A ``tool_use`` block's ``input`` as arguments text (``{}`` when absent)."""
    return _ENCODER.encode(block.input or {}).decode()


class UsageCounter:
    """Cumulative token counts; a field the upstream repeats replaces the earlier value."""

    __slots__ = ("cache_read", "cache_write", "input", "output", "thinking")

    def __init__(self) -> None:
        self.input = self.output = self.cache_read = self.cache_write = self.thinking = 0

    def update(self, usage: Usage) -> TokenUsage:
        if usage.input_tokens is not None:
            self.input = reported_count(usage.input_tokens)
        if usage.output_tokens is not None:
            self.output = reported_count(usage.output_tokens)
        if usage.cache_creation_input_tokens is not None:
            self.cache_write = reported_count(usage.cache_creation_input_tokens)
        if usage.cache_read_input_tokens is not None:
            self.cache_read = reported_count(usage.cache_read_input_tokens)
        details = usage.output_tokens_details
        if details is not None and details.thinking_tokens is not None:
            self.thinking = reported_count(details.thinking_tokens)
        return TokenUsage(
            prompt_tokens=self.input + self.cache_write + self.cache_read,
            completion_tokens=self.output,
            cached_tokens=self.cache_read,
            cache_write_tokens=self.cache_write,
            reasoning_tokens=self.thinking,
        )


_FINISH_REASONS: Mapping[str, str] = MappingProxyType(
    {
        "end_turn": "stop",
        "stop_sequence": "stop",
        "pause_turn": "stop",
        "max_tokens": "length",
        "model_context_window_exceeded": "length",
        "tool_use": "tool_calls",
        "refusal": "content_filter",
    }
)


def anthropic_stop_to_finish_reason(stop_reason: str | None) -> str:
    """Our finish reason; a stop reason Anthropic adds later reads as ``stop``."""
    return _FINISH_REASONS.get(stop_reason or "", "stop")


_STREAM_ERROR_STATUS: Mapping[str, int] = MappingProxyType(
    {"rate_limit_error": 429, "overloaded_error": 529, "timeout_error": 504}
)


def anthropic_error(status: int, detail: ErrorDetail | None, retry_after: float | None) -> ApiError:
    """An HTTP error answer: the status decides (``error_for_status``), refined by type."""
    kind = detail.type if detail is not None else None
    message = detail.message if detail is not None else None
    if kind == "billing_error":
        return UpstreamError(
            f"The provider refused the request for billing reasons: {message or status}",
            code="upstream_billing_error",
        )
    code = "request_too_large" if kind == "request_too_large" else None
    return error_for_status(status, message, code=code, retry_after=retry_after)


def anthropic_stream_error(detail: ErrorDetail | None) -> ApiError:
    """An ``error`` event inside a 200 stream: overload, rate limit and timeout keep their
    meaning (and status); anything else is the upstream failing mid-answer."""
    kind = detail.type if detail is not None else None
    message = (detail.message if detail is not None else None) or "The provider reported an error."
    status = _STREAM_ERROR_STATUS.get(kind or "")
    if status is not None:
        return error_for_status(status, message)
    return UpstreamError(message, code="upstream_stream_error")
