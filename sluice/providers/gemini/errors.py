"""Gemini's error bodies → our error tree, for HTTP errors and errors inside a stream.

Google answers ``{"error": {"code", "message", "status", "details"}}``, sometimes
wrapped in a list. The canonical ``status`` (``RESOURCE_EXHAUSTED`` …) decides the
class where it is known, else the numeric ``code``, else the HTTP status; then the
shared :func:`~sluice.providers.errors.error_for_status` table applies. Two
refinements: an invalid key is answered ``400 INVALID_ARGUMENT`` with ErrorInfo reason
``API_KEY_INVALID`` (a credential failure of the gateway, not the client's fault), and
a 429's RetryInfo ``retryDelay`` is used when there is no ``Retry-After`` header.
Anything shaped like a Google API key is redacted from messages passed on.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

import msgspec

from sluice.errors import ApiError
from sluice.providers.errors import error_for_status, retry_after_seconds
from sluice.providers.gemini.wire import ERROR, ErrorBody

STATUS_HTTP = MappingProxyType(
    {
        "INVALID_ARGUMENT": 400,
        "FAILED_PRECONDITION": 400,
        "OUT_OF_RANGE": 400,
        "UNAUTHENTICATED": 401,
        "PERMISSION_DENIED": 403,
        "NOT_FOUND": 404,
        "RESOURCE_EXHAUSTED": 429,
        "CANCELLED": 499,
        "UNKNOWN": 500,
        "INTERNAL": 500,
        "DATA_LOSS": 500,
        "UNIMPLEMENTED": 501,
        "ABORTED": 503,
        "UNAVAILABLE": 503,
        "DEADLINE_EXCEEDED": 504,
    }
)
_API_KEY = re.compile(r"AIza[0-9A-Za-z_\-]{35}")
_DELAY = re.compile(r"(\d+(?:\.\d+)?)s")


def gemini_error(body: ErrorBody, http_status: int, retry_after: float | None = None) -> ApiError:
    status = STATUS_HTTP.get(body.status or "", body.code or http_status)
    if any((d.reason or "").startswith("API_KEY_") for d in body.details):
        status = 401
    if retry_after is None:
        retry_after = next((_seconds(d.retry_delay) for d in body.details if d.retry_delay), None)
    message = _API_KEY.sub("[redacted]", body.message) if body.message else None
    code = body.status.lower() if status == 400 and body.status else None
    return error_for_status(status, message, code=code, retry_after=retry_after)


def parse_gemini_error(status: int, headers: Mapping[str, str], body: bytes) -> ApiError:
    try:
        doc = ERROR.decode(body)
    except msgspec.DecodeError:
        doc = None
    if isinstance(doc, list):  # the streaming endpoint wraps errors in a list
        doc = doc[0] if doc else None
    error = doc.error if doc is not None else None
    return gemini_error(error or ErrorBody(), status, retry_after_seconds(headers))


def _seconds(delay: str | None) -> float | None:
    """A protobuf Duration in JSON (``"37s"``, ``"0.5s"``)."""
    match = _DELAY.fullmatch(delay or "")
    return float(match.group(1)) if match else None
