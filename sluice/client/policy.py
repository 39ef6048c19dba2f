"""Timeouts and retries of the client (pure: randomness and time come in as arguments).

The client keeps its own retry rules, keyed on what the wire says (HTTP status, error
``type`` and ``code``), not on the gateway's error classes: it must work against any
OpenAI-compatible endpoint. A retry happens only before the first content event
(nothing has been shown, nothing generated); after that a failure is the caller's to
regenerate.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from email.utils import mktime_tz, parsedate_tz
from typing import Final

from msgspec import Struct

from sluice.client.events import ErrorInfo

Uniform = Callable[[float, float], float]
"""``random.uniform``'s signature, injected."""

RETRYABLE_STATUSES: Final = frozenset({408, 429, 502, 503, 504})
RETRYABLE_TYPES: Final = frozenset(
    {
        "rate_limit_error",
        "upstream_error",
        "service_unavailable",
        "request_timeout",
        "connection_error",  # client-side: refused, reset, closed before any content
    }
)
NEVER_RETRIED: Final = frozenset(
    {
        "invalid_request_error",
        "authentication_error",
        "budget_exceeded",
        "permission_error",
        "model_not_found",
        "guardrail_blocked",  # a code (type guardrail_error) …
        "guardrail_unavailable",  # … sent with 503, still never retried
        "invalid_response",
        "cancelled",
    }
)


class Timeouts(Struct, frozen=True):
    """Seconds; ``None`` turns one off. ``first_event`` runs from sending a request to
    its first SSE event (connecting included), ``idle`` between two events, ``total``
    from the start of the call, retries included. Keep-alive comments reset none of
    them: they prove the connection lives, not that the model makes progress. The
    defaults sit above the gateway's own (first event 60 s, stall 120 s) so its typed
    error reaches you first."""

    first_event: float | None = 120.0
    idle: float | None = 150.0
    total: float | None = None


def is_retryable(error: ErrorInfo) -> bool:
    if error.type in NEVER_RETRIED or error.code in NEVER_RETRIED:
        return False
    return error.status in RETRYABLE_STATUSES or error.type in RETRYABLE_TYPES


class RetryPolicy(Struct, frozen=True):
    """Exponential backoff with full jitter: before retry ``k`` (1-based) wait
    ``uniform(0, min(max_delay, base_delay * 2**(k-1)))``, or the server's
    ``Retry-After`` if that is longer. A ``Retry-After`` above ``max_retry_after``
    ends the call instead of sleeping through it. A retry on another model
    (``same_model=False``) waits the backoff only: the ``Retry-After`` was the failed
    model's."""

    max_attempts: int = 3
    base_delay: float = 0.5
    max_delay: float = 8.0
    max_retry_after: float = 60.0
    max_resumes: int = 3
    """Reconnects of a resumable stream cut mid-way (``Last-Event-ID``), each one
    picking it up where it broke: no retry, nothing generated twice."""

    def backoff(self, retry: int, uniform: Uniform) -> float:
        return uniform(0.0, min(self.max_delay, self.base_delay * 2 ** (retry - 1)))

    def delay(
        self,
        attempt: int,
        error: ErrorInfo,
        content_seen: bool,
        uniform: Uniform,
        *,
        same_model: bool = True,
    ) -> float | None:
        """Seconds to wait before attempt ``attempt + 1``, or ``None``: do not retry."""
        if content_seen or attempt >= self.max_attempts or not is_retryable(error):
            return None
        wait = error.retry_after if same_model else None
        if wait is not None and wait > self.max_retry_after:
            return None
        return max(self.backoff(attempt, uniform), wait or 0.0)


DEFAULT_RETRY: Final = RetryPolicy()
STOP_TIMEOUT: Final = 3.0
"""Seconds a resumable stream's ``DELETE`` may take when the consumer closes it."""
NO_RETRY: Final = RetryPolicy(max_attempts=1)
DEFAULT_TIMEOUTS: Final = Timeouts()


def parse_retry_after(value: str | None, now: float) -> float | None:
    """``Retry-After`` as seconds from ``now`` (unix time): delta-seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        parts = parsedate_tz(value)
        if parts is None:
            return None
        seconds = mktime_tz(parts) - now
    return None if math.isnan(seconds) else max(0.0, seconds)
