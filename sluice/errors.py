"""The one error tree.

Every failure a client can see is an :class:`ApiError` subclass that knows its HTTP
status, its wire ``type``, an optional ``code`` and ``param``, and whether a client may
retry it. ``failover`` says whether the router may try the next target after this
error happened on one upstream attempt. The mapping to the wire envelope lives in
:mod:`sluice.wire.errors`, nowhere else.
"""

from __future__ import annotations

from typing import ClassVar


class SluiceError(Exception):
    """Root of every error Sluice raises on purpose."""


class ConfigError(SluiceError):
    """The configuration cannot be used; raised at startup or by a reload (which then
    keeps the running one), never by a client's request."""


class NoDatabaseError(ConfigError):
    """The configured database does not exist (or holds no Sluice schema, or cannot be
    reached) and the caller asked not to create one; the message says where it looked."""


class ApiError(SluiceError):
    """An error with a place on the wire (docs/api.md#errors)."""

    status: ClassVar[int] = 500
    type: ClassVar[str] = "server_error"
    retryable: ClassVar[bool] = False
    failover: ClassVar[bool] = False
    default_code: ClassVar[str | None] = None

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        retry_after: float | None = None,
        http_status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code if code is not None else self.default_code
        self.param = param
        self.retry_after = retry_after
        self.http_status = http_status if http_status is not None else self.status
        self.upstream_code: str | None = None
        """What an upstream called the error it answered with (its code or type), for
        the operator's log only: never sent to a client."""


class InternalError(ApiError):
    """A bug or an unexpected failure inside the gateway; details stay in the log."""


class ShuttingDownError(ApiError):
    """The gateway is stopping: a request still running past the grace period ends
    with this (mid-stream: the error event), and so does one that reaches the upstream
    client after it closed. Retryable: another replica, or this one restarted, serves."""

    status = 503
    retryable = True
    default_code = "server_shutting_down"

    def __init__(self, message: str = "The gateway is shutting down.") -> None:
        super().__init__(message, retry_after=1.0)


class InvalidRequestError(ApiError):
    status = 400
    type = "invalid_request_error"


class RequestTooLargeError(InvalidRequestError):
    status = 413
    default_code = "request_too_large"


class ConflictError(InvalidRequestError):
    """The thing to create exists already (an account name, …)."""

    status = 409
    default_code = "conflict"


class NotFoundError(InvalidRequestError):
    """An unknown URL (not an unknown model: see :class:`ModelNotFoundError`)."""

    status = 404
    default_code = "unknown_url"


class StreamExpiredError(InvalidRequestError):
    """A resumable stream that can no longer be resumed (kept past its retention, or
    past its buffer's bound); the message says which."""

    status = 410
    default_code = "stream_expired"


class MethodNotAllowedError(InvalidRequestError):
    status = 405
    default_code = "method_not_allowed"


class AuthenticationError(ApiError):
    status = 401
    type = "authentication_error"
    default_code = "invalid_api_key"


class BudgetExceededError(ApiError):
    status = 402
    type = "budget_exceeded"
    default_code = "budget_exceeded"


class PermissionDeniedError(ApiError):
    status = 403
    type = "permission_error"


class ModelNotFoundError(ApiError):
    status = 404
    type = "model_not_found"
    default_code = "model_not_found"


class RateLimitError(ApiError):
    status = 429
    type = "rate_limit_error"
    retryable = True
    failover = True


class UpstreamError(ApiError):
    """The provider failed (bad status, broken stream, unreachable)."""

    status = 502
    type = "upstream_error"
    retryable = True
    failover = True


class ServiceUnavailableError(ApiError):
    status = 503
    type = "service_unavailable"
    retryable = True
    failover = True


class RequestTimeoutError(ApiError):
    """408 when the client was too slow, 504 (``http_status``) when the upstream was."""

    status = 408
    type = "request_timeout"
    retryable = True
    failover = True


class GuardrailBlockedError(ApiError):
    status = 400
    type = "guardrail_error"
    default_code = "guardrail_blocked"


class GuardrailUnavailableError(ApiError):
    status = 503
    type = "guardrail_error"
    default_code = "guardrail_unavailable"
