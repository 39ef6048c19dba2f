"""The request side of a call, shared by the async and sync clients (pure).

``ChatSpec`` is what the caller asked for; :func:`prepare` turns it into the bytes of
one attempt (the retry model on attempts after the first); :func:`error_from_response`
reads a non-200 answer from any OpenAI-compatible server.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

import msgspec
from msgspec import Struct

from sluice import __version__
from sluice.client.accumulator import WireError, wire_error
from sluice.client.events import ErrorInfo
from sluice.client.policy import parse_retry_after

USER_AGENT: Final = f"sluice-client/{__version__}"
_STATUS_TYPES: Final = MappingProxyType(
    {
        400: "invalid_request_error",
        401: "authentication_error",
        402: "budget_exceeded",
        403: "permission_error",
        404: "not_found",
        408: "request_timeout",
        429: "rate_limit_error",
        502: "upstream_error",
        503: "service_unavailable",
        504: "request_timeout",
    }
)


class ChatSpec(Struct, frozen=True, kw_only=True):
    """One chat call. ``base_url`` is OpenAI-style (``…/v1``); ``fields`` are any other
    request fields (``max_tokens``, ``tools``, ``temperature``…). ``stream`` is always
    on and ``stream_options.include_usage`` defaults to on (usage and cost arrive in
    the stream, so nothing has to count chunks). ``resumable`` asks Sluice for a stream
    that survives a cut (``stream_options.resumable``): the client then reconnects
    with ``Last-Event-ID`` instead of failing, and a close stops it with ``DELETE``."""

    base_url: str
    api_key: str | None
    model: str
    messages: Sequence[Any]
    fields: Mapping[str, Any] = msgspec.field(default_factory=dict)
    retry_model: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    resumable: bool = False

    def model_for(self, attempt: int) -> str:
        return self.retry_model if attempt > 1 and self.retry_model else self.model


class PreparedRequest(Struct, frozen=True):
    url: str
    headers: tuple[tuple[str, str], ...]
    body: bytes
    model: str
    method: str = "POST"


def prepare(spec: ChatSpec, attempt: int) -> PreparedRequest:
    model = spec.model_for(attempt)
    body: dict[str, Any] = {"model": model, "messages": spec.messages}
    body["stream_options"] = {"include_usage": True}
    body.update(spec.fields)
    body["model"], body["stream"] = model, True
    if spec.resumable:
        body["stream_options"] = {**body["stream_options"], "resumable": True}
    headers = [("Content-Type", "application/json"), *_headers(spec)]
    url = spec.base_url.rstrip("/") + "/chat/completions"
    return PreparedRequest(url, tuple(headers), msgspec.json.encode(body), model)


def _headers(spec: ChatSpec) -> list[tuple[str, str]]:
    headers = [("Accept", "text/event-stream"), ("User-Agent", USER_AGENT)]
    if spec.api_key:
        headers.append(("Authorization", f"Bearer {spec.api_key}"))
    headers.extend(spec.headers)
    return headers


def stream_request(
    spec: ChatSpec, resume_url: str, model: str, last_event_id: str | None = None
) -> PreparedRequest:
    """``GET`` of a resumable stream after ``last_event_id`` (its resume URL, a path on
    the gateway), or ``DELETE`` of it when ``last_event_id`` is None."""
    parts = urlsplit(spec.base_url)
    url = urlunsplit((parts.scheme, parts.netloc, resume_url, "", ""))
    if last_event_id is None:
        return PreparedRequest(url, tuple(_headers(spec)), b"", model, "DELETE")
    headers = (*_headers(spec), ("Last-Event-ID", last_event_id))
    return PreparedRequest(url, headers, b"", model, "GET")


class _Envelope(Struct):
    error: WireError | str | None = None


_ENVELOPE: Final = msgspec.json.Decoder(_Envelope)


def error_from_response(status: int, body: bytes, retry_after: str | None, now: float) -> ErrorInfo:
    """An HTTP error answer: the ``{"error": …}`` envelope when there is one, else a
    type named after the status; ``now`` (unix seconds) reads a dated ``Retry-After``."""
    default = _STATUS_TYPES.get(status, "http_error")
    text = body[:500].decode("utf-8", "replace").strip() or f"HTTP {status}"
    try:
        error = _ENVELOPE.decode(body).error
    except msgspec.DecodeError:
        error = None
    info = wire_error(error or text, default)
    return ErrorInfo(
        info.type, info.message or text, info.code, status, parse_retry_after(retry_after, now)
    )


def not_an_event_stream(content_type: str | None) -> ErrorInfo | None:
    """A 200 that is not ``text/event-stream`` (a server ignoring ``stream``)."""
    if content_type and content_type.split(";")[0].strip().lower() == "text/event-stream":
        return None
    return ErrorInfo(
        "invalid_response", f"expected text/event-stream, got {content_type!r}", "not_sse"
    )
