"""Response heads and the one table from our errors to HTTP responses."""

from __future__ import annotations

import math
from typing import Final

from sluice.errors import (
    ApiError,
    InvalidRequestError,
    RequestTimeoutError,
    RequestTooLargeError,
    ServiceUnavailableError,
)
from sluice.server.exchange import Headers

JSON: Final = ("content-type", "application/json")
PROMETHEUS: Final = ("content-type", "text/plain; version=0.0.4; charset=utf-8")
SSE_HEADERS: Final = (
    ("content-type", "text/event-stream"),
    ("cache-control", "no-cache"),
    ("x-accel-buffering", "no"),
)


def error_headers(err: ApiError, base: Headers) -> Headers:
    headers = [*base, JSON]
    if err.retry_after is not None:
        headers.append(("retry-after", str(max(0, math.ceil(err.retry_after)))))
    return headers


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
    return InvalidRequestError(message, code="malformed_http")
