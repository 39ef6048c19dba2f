"""From an upstream HTTP failure to our error tree; shared by the adapters.

Each adapter reads its provider's error body and hands message, code, param and any
``Retry-After`` here; the status decides the class (docs/providers.md):

| upstream status | ours | failover |
|---|---|---|
| 400, 409, 413, 415, 422 | ``invalid_request_error`` 400, provider's message | no |
| 401, 403 | ``upstream_error`` 502 ``upstream_authentication_failed`` | yes |
| 404 | ``upstream_error`` 502 ``upstream_not_found`` | yes |
| 408, 504 | ``request_timeout`` 504 | yes |
| 429 | ``rate_limit_error`` 429 with ``Retry-After`` | yes |
| 503, 529 | ``service_unavailable`` 503 | yes |
| other 5xx and anything else | ``upstream_error`` 502 | yes |

Provider authentication messages are not passed on: they can quote the key.
"""

from __future__ import annotations

from collections.abc import Mapping

from sluice.errors import (
    ApiError,
    InvalidRequestError,
    RateLimitError,
    RequestTimeoutError,
    ServiceUnavailableError,
    UpstreamError,
)

_CLIENT_FAULT = frozenset({400, 409, 413, 415, 422})


def malformed_response() -> UpstreamError:
    """A whole (non-streaming) answer that does not decode as the provider's shape."""
    return UpstreamError(
        "The provider sent a malformed response.", code="upstream_malformed_response"
    )


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """``retry-after-ms`` (OpenAI) or ``retry-after`` in delta-seconds; dates are ignored."""
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) / scale
        except ValueError:
            continue
        if seconds >= 0:
            return seconds
    return None


def error_for_status(
    status: int,
    message: str | None,
    *,
    code: str | None = None,
    param: str | None = None,
    retry_after: float | None = None,
) -> ApiError:
    """Ours for an upstream's error answer; ``code`` is the upstream's own code or type,
    kept as ``upstream_code`` for the operator's log."""
    err = _for_status(status, message, code=code, param=param, retry_after=retry_after)
    err.upstream_code = code
    return err


def _for_status(
    status: int,
    message: str | None,
    *,
    code: str | None,
    param: str | None,
    retry_after: float | None,
) -> ApiError:
    detail = message or f"The provider answered HTTP {status}."
    if status in _CLIENT_FAULT:
        return InvalidRequestError(detail, code=code, param=param)
    if status in (401, 403):
        return UpstreamError(
            f"The provider rejected the gateway's credentials (HTTP {status}).",
            code="upstream_authentication_failed",
        )
    if status == 404:
        return UpstreamError(f"The provider answered 404: {detail}", code="upstream_not_found")
    if status in (408, 504):
        return RequestTimeoutError(
            f"The provider timed out: {detail}", code="upstream_timeout", http_status=504
        )
    if status == 429:
        return RateLimitError(
            f"The provider is rate limiting: {detail}",
            code=code or "upstream_rate_limited",
            retry_after=retry_after,
        )
    if status in (503, 529):
        return ServiceUnavailableError(
            f"The provider is overloaded: {detail}",
            code="upstream_overloaded",
            retry_after=retry_after,
        )
    return UpstreamError(
        f"The provider failed (HTTP {status}): {detail}", code="upstream_http_error"
    )
