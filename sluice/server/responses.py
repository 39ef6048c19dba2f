"""Response heads and the one table from our errors to HTTP responses."""

from __future__ import annotations

from typing import Final

from sluice.errors import (
    ApiError,
    BudgetExceededError,
    InvalidRequestError,
    RateLimitError,
    RequestTimeoutError,
    RequestTooLargeError,
    ServiceUnavailableError,
)

PROMETHEUS: Final = ("content-type", "text/plain; version=0.0.4; charset=utf-8")


def connection_error(status: int, message: str) -> ApiError:
    """Errors raised by the HTTP layer before a request reaches a handler."""
    if status == 413:
        return RequestTooLargeError(message)
    if status == 408:
        return RequestTimeoutError(message, code="client_timeout")
    if status == 431:
        return InvalidRequestError(message, code="headers_too_large", http_status=431)
    if status == 503:
        return ServiceUnavailableError(message, code="server_busy", retry_after=1.0)
    if status == 429:  # refused on its head (server/app.py Gateway.head_refusal)
        return RateLimitError(message, code="rate_limit_exceeded", retry_after=1.0)
    if status == 402:
        return BudgetExceededError(message, code="insufficient_credits")
    return InvalidRequestError(message, code="malformed_http")
