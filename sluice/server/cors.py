"""Cross-origin requests from browsers (``[server] cors_origins``): a preflight from an
allowed origin is answered 204 with what it may send; every answer to an allowed
origin names it and exposes the headers a page reads (request id, rate limits,
``Retry-After``). An origin not listed gets no CORS header: the browser refuses."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sluice.exchange.ports import Headers

ALLOWED_METHODS = "GET, POST, PUT, PATCH, DELETE, OPTIONS"
DEFAULT_ALLOWED_HEADERS = "authorization, content-type, x-api-key"
EXPOSED_HEADERS = ", ".join(
    (
        "x-request-id",
        "request-id",
        "x-sluice-resume-url",
        "retry-after",
        "x-ratelimit-limit-requests",
        "x-ratelimit-remaining-requests",
        "x-ratelimit-reset-requests",
        "x-ratelimit-limit-tokens",
        "x-ratelimit-remaining-tokens",
        "x-ratelimit-reset-tokens",
    )
)
MAX_AGE_SECONDS = 600


def allowed_origin(origins: Sequence[str], headers: Mapping[str, str]) -> str | None:
    """The request's ``Origin`` when the config allows it, else None."""
    origin = headers.get("origin")
    if origin is None or not origins:
        return None
    return origin if "*" in origins or origin in origins else None


def is_preflight(method: str, headers: Mapping[str, str]) -> bool:
    return method == "OPTIONS" and "access-control-request-method" in headers


def cors_headers(origin: str) -> Headers:
    return [
        ("access-control-allow-origin", origin),
        ("access-control-expose-headers", EXPOSED_HEADERS),
        ("vary", "origin"),
    ]


def preflight_headers(origin: str, headers: Mapping[str, str]) -> Headers:
    """What the page may send: the methods the gateway serves, the headers it asked for
    (or the ones its requests use)."""
    requested = headers.get("access-control-request-headers") or DEFAULT_ALLOWED_HEADERS
    return [
        ("access-control-allow-origin", origin),
        ("access-control-allow-methods", ALLOWED_METHODS),
        ("access-control-allow-headers", requested),
        ("access-control-max-age", str(MAX_AGE_SECONDS)),
        ("vary", "origin"),
    ]
