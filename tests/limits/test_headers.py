"""``X-RateLimit-*`` headers: names, values and the reset duration, pinned."""

from __future__ import annotations

import pytest

from sluice.limits.decision import Decision, Quota
from sluice.limits.headers import format_reset, rate_limit_headers


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (0, "0s"),
        (1, "1ms"),
        (20, "20ms"),
        (999, "999ms"),
        (1000, "1s"),
        (1500, "1.5s"),
        (8640, "8.64s"),
        (59_999, "59.999s"),
        (60_000, "1m0s"),
        (360_000, "6m0s"),
        (86_400, "1m26.4s"),
        (3_600_000, "1h0m0s"),
        (3_723_050, "1h2m3.05s"),
        (90_000_000, "25h0m0s"),
    ],
)
def test_reset_is_a_go_duration_like_openai_sends(ms: int, text: str) -> None:
    assert format_reset(ms) == text


def test_headers_for_both_dimensions() -> None:
    decision = Decision(
        allowed=True,
        requests=Quota(limit=60, remaining=59, reset_ms=1000),
        tokens=Quota(limit=150_000, remaining=149_200, reset_ms=320),
    )
    assert rate_limit_headers(decision) == [
        ("x-ratelimit-limit-requests", "60"),
        ("x-ratelimit-remaining-requests", "59"),
        ("x-ratelimit-reset-requests", "1s"),
        ("x-ratelimit-limit-tokens", "150000"),
        ("x-ratelimit-remaining-tokens", "149200"),
        ("x-ratelimit-reset-tokens", "320ms"),
    ]


def test_a_dimension_without_a_limit_sends_no_headers() -> None:
    only_tokens = Decision(allowed=False, retry_after=6.0, tokens=Quota(1000, 0, 360_000))
    assert rate_limit_headers(only_tokens) == [
        ("x-ratelimit-limit-tokens", "1000"),
        ("x-ratelimit-remaining-tokens", "0"),
        ("x-ratelimit-reset-tokens", "6m0s"),
    ]
    assert rate_limit_headers(Decision(allowed=True)) == []
