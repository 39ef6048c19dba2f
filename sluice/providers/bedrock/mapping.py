"""Bedrock's terms in ours: stop reasons, token usage and error types.

Shared by the stream translator and the non-streaming parser. Bedrock's
``inputTokens`` excludes the prompt-cache reads and writes, which it reports apart;
our ``prompt_tokens`` includes both.
"""

from __future__ import annotations

from types import MappingProxyType

from msgspec import Struct

from sluice.core.usage import TokenUsage, reported_count
from sluice.errors import ApiError, UpstreamError
from sluice.providers.errors import error_for_status

STOP_REASONS = MappingProxyType(
    {
        "end_turn": "stop",
        "stop_sequence": "stop",
        "tool_use": "tool_calls",
        "max_tokens": "length",
        "model_context_window_exceeded": "length",
        "guardrail_intervened": "content_filter",
        "content_filtered": "content_filter",
    }
)
"""Anything else (``malformed_model_output``, ``malformed_tool_use``, new reasons) is
``stop``, which the emitter turns into ``tool_calls`` when the answer called tools."""

ERROR_STATUS = MappingProxyType(
    {
        "ValidationException": 400,
        "AccessDeniedException": 403,
        "UnrecognizedClientException": 403,
        "InvalidSignatureException": 403,
        "IncompleteSignatureException": 403,
        "ExpiredTokenException": 403,
        "MissingAuthenticationTokenException": 403,
        "ResourceNotFoundException": 404,
        "ModelTimeoutException": 408,
        "ThrottlingException": 429,
        "ModelNotReadyException": 429,
        "ServiceQuotaExceededException": 429,
        "ModelErrorException": 424,
        "ModelStreamErrorException": 424,
        "InternalServerException": 500,
        "ServiceUnavailableException": 503,
    }
)
"""Bedrock error type → the status that decides our class (``error_for_status``)."""

_CODES = MappingProxyType(
    {
        "ModelNotReadyException": "upstream_model_not_ready",
        "ServiceQuotaExceededException": "upstream_quota_exceeded",
    }
)


class Usage(Struct, rename="camel"):
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int | None = None
    cache_write_input_tokens: int | None = None


def token_usage(usage: Usage) -> TokenUsage:
    read = reported_count(usage.cache_read_input_tokens or 0)
    written = reported_count(usage.cache_write_input_tokens or 0)
    return TokenUsage(
        prompt_tokens=reported_count(usage.input_tokens) + read + written,
        completion_tokens=usage.output_tokens,
        cached_tokens=read,
        cache_write_tokens=written,
    )


def finish_reason(stop_reason: str | None) -> str:
    return STOP_REASONS.get(stop_reason or "end_turn", "stop")


def error_type_name(raw: str | None) -> str | None:
    """``ValidationException:http://…``, ``com.amazon…#ValidationException`` or the
    stream's ``validationException``: the bare, capitalized type name."""
    if not raw:
        return None
    name = raw.split(":", 1)[0].rsplit("#", 1)[-1].strip()
    return name[:1].upper() + name[1:] if name else None


def bedrock_error(
    error_type: str | None, status: int, message: str | None, retry_after: float | None = None
) -> ApiError:
    """Our error for a Bedrock error type; the HTTP ``status`` decides unknown types."""
    status = ERROR_STATUS.get(error_type or "", status)
    if status == 424:
        return UpstreamError(
            f"The model failed: {message or error_type}", code="upstream_model_error"
        )
    return error_for_status(
        status, message, code=_CODES.get(error_type or ""), retry_after=retry_after
    )
