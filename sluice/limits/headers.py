"""``X-RateLimit-*`` response headers from a decision, as OpenAI sends them
(docs/api.md#rate-limits).

A dimension (requests, tokens) with no configured limit sends none of its three
headers. Resets are durations in Go's ``time.Duration`` notation, which OpenAI uses and
its clients parse: ``"0s"``, ``"20ms"``, ``"1s"``, ``"8.64s"``, ``"6m0s"``, ``"1h0m0s"``.
"""

from __future__ import annotations

from sluice.limits.decision import Decision, Quota


def format_reset(ms: int) -> str:
    if ms < 1000:
        return f"{ms}ms" if ms else "0s"
    hours, rest = divmod(ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds, millis = divmod(rest, 1000)
    text = f"{seconds}.{millis:03d}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{hours}h{minutes}m{text}"
    return f"{minutes}m{text}" if minutes else text


def _headers(suffix: str, quota: Quota | None) -> list[tuple[str, str]]:
    if quota is None:
        return []
    return [
        (f"x-ratelimit-limit-{suffix}", str(quota.limit)),
        (f"x-ratelimit-remaining-{suffix}", str(quota.remaining)),
        (f"x-ratelimit-reset-{suffix}", format_reset(quota.reset_ms)),
    ]


def rate_limit_headers(decision: Decision) -> list[tuple[str, str]]:
    return [*_headers("requests", decision.requests), *_headers("tokens", decision.tokens)]
