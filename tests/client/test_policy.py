"""Retry rules and backoff (pure): what is retried, how long the client waits."""

from __future__ import annotations

import pytest

from sluice.client.events import ErrorInfo
from sluice.client.policy import RetryPolicy, is_retryable, parse_retry_after


class RecordingUniform:
    """Stands in for ``random.uniform``: records its bounds, returns a fixed fraction."""

    def __init__(self, fraction: float) -> None:
        self.fraction = fraction
        self.calls: list[tuple[float, float]] = []

    def __call__(self, low: float, high: float) -> float:
        self.calls.append((low, high))
        return low + (high - low) * self.fraction


@pytest.mark.parametrize(
    ("error", "retryable"),
    [
        pytest.param(ErrorInfo("rate_limit_error", status=429), True, id="429"),
        pytest.param(ErrorInfo("upstream_error", status=502), True, id="502"),
        pytest.param(ErrorInfo("service_unavailable", status=503), True, id="503"),
        pytest.param(ErrorInfo("request_timeout", status=504), True, id="504"),
        pytest.param(ErrorInfo("request_timeout", status=408), True, id="408"),
        pytest.param(ErrorInfo("http_error", status=504), True, id="504-any-body"),
        pytest.param(ErrorInfo("upstream_error"), True, id="error-event-upstream"),
        pytest.param(ErrorInfo("connection_error"), True, id="connection"),
        pytest.param(ErrorInfo("request_timeout", code="first_event_timeout"), True, id="timeout"),
        pytest.param(ErrorInfo("invalid_request_error", status=400), False, id="invalid"),
        pytest.param(ErrorInfo("authentication_error", status=401), False, id="auth"),
        pytest.param(ErrorInfo("budget_exceeded", status=402), False, id="budget"),
        pytest.param(ErrorInfo("permission_error", status=403), False, id="permission"),
        pytest.param(ErrorInfo("model_not_found", status=404), False, id="model"),
        pytest.param(
            ErrorInfo("guardrail_error", code="guardrail_blocked", status=400), False, id="blocked"
        ),
        pytest.param(
            ErrorInfo("guardrail_error", code="guardrail_unavailable", status=503),
            False,
            id="guardrail-unavailable-despite-503",
        ),
        pytest.param(ErrorInfo("invalid_request_error", status=503), False, id="type-beats-503"),
        pytest.param(ErrorInfo("server_error", status=500), False, id="500"),
        pytest.param(ErrorInfo("invalid_response", code="not_sse"), False, id="not-sse"),
        pytest.param(ErrorInfo("cancelled"), False, id="cancelled"),
    ],
)
def test_what_is_retryable(error: ErrorInfo, retryable: bool) -> None:
    assert is_retryable(error) is retryable


def test_full_jitter_bounds_double_up_to_the_cap() -> None:
    policy = RetryPolicy(max_attempts=10, base_delay=0.5, max_delay=3.0)
    uniform = RecordingUniform(1.0)
    error = ErrorInfo("upstream_error", status=502)
    delays = [policy.delay(attempt, error, False, uniform) for attempt in range(1, 7)]
    assert uniform.calls == [(0.0, 0.5), (0.0, 1.0), (0.0, 2.0), (0.0, 3.0), (0.0, 3.0), (0, 3.0)]
    assert delays == [0.5, 1.0, 2.0, 3.0, 3.0, 3.0]
    assert policy.delay(1, error, False, RecordingUniform(0.0)) == 0.0


def test_retry_after_is_a_floor_and_too_long_a_wait_ends_the_call() -> None:
    policy = RetryPolicy(max_retry_after=30.0)
    limited = ErrorInfo("rate_limit_error", status=429, retry_after=7.0)
    assert policy.delay(1, limited, False, RecordingUniform(1.0)) == 7.0
    tiny = ErrorInfo("rate_limit_error", status=429, retry_after=0.1)
    assert policy.delay(1, tiny, False, RecordingUniform(1.0)) == 0.5
    assert (
        policy.delay(
            1, ErrorInfo("rate_limit_error", retry_after=31.0), False, RecordingUniform(1.0)
        )
        is None
    )


def test_no_retry_after_content_or_attempts_or_for_the_wrong_error() -> None:
    policy = RetryPolicy(max_attempts=3)
    error = ErrorInfo("upstream_error", status=502)
    assert policy.delay(1, error, True, RecordingUniform(0.5)) is None
    assert policy.delay(2, error, False, RecordingUniform(0.5)) == 0.5
    assert policy.delay(3, error, False, RecordingUniform(0.5)) is None
    assert (
        policy.delay(1, ErrorInfo("budget_exceeded", status=402), False, RecordingUniform(1.0))
        is None
    )


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("3", 3.0),
        (" 1.5 ", 1.5),
        ("-4", 0.0),
        ("Fri, 14 Aug 2026 00:00:10 GMT", 10.0),
        ("Fri, 14 Aug 2026 00:00:00 GMT", 0.0),
        ("Thu, 13 Aug 2026 23:00:00 GMT", 0.0),
        ("soon", None),
        ("nan", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_retry_after(value: str | None, seconds: float | None) -> None:
    now = 1786665600.0  # Fri, 14 Aug 2026 00:00:00 GMT
    assert parse_retry_after(value, now) == seconds
