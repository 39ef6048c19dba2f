"""Upstream HTTP failures in our terms: the client's and the socket's errors mapped once,
the total deadline, a request that never left, and the operator's log line."""

from __future__ import annotations

import asyncio
import logging

from yarl import URL

from sluice.errors import ApiError, RequestTimeoutError, UpstreamError

_upstream_log = logging.getLogger("sluice.upstream")


class RequestNotSentError(UpstreamError):
    """A reused connection failed before the whole request was written: the upstream
    cannot have acted on it, so it may go out once more on a fresh connection."""

    def __init__(self) -> None:
        super().__init__(
            "The provider closed a reused connection before the request was sent.",
            code="upstream_connection_closed",
        )


class ConnectFailedError(Exception):
    """No connection to the upstream could be opened (DNS, refused, TLS, denied)."""

    def __init__(self, os_error: OSError) -> None:
        super().__init__(str(os_error))
        self.os_error = os_error


class ConnectTimeoutError(TimeoutError):
    """Opening the connection took longer than the connection's ``connect`` timeout."""


class UpstreamClosedError(ConnectionError):
    """The upstream closed the connection before its response ended."""

    def __init__(self, cause: Exception | None) -> None:
        super().__init__("the upstream closed the connection" + (f": {cause}" if cause else ""))


class UnreadableResponseError(Exception):
    """The upstream's bytes are not an HTTP/1.1 response we can read."""


def log_failure(url: str, exc: BaseException) -> None:
    """An upstream that could not be reached or answered, for the operator: its host and
    port and the reason (errno, TLS, timeout), never the URL's path or query (a key may
    ride there) nor a header."""
    host, port = _where(url)
    os_error = getattr(exc, "os_error", None)
    if isinstance(os_error, OSError):
        reason = f"{type(os_error).__name__} errno {os_error.errno}: {os_error.strerror}"
    elif isinstance(exc, TimeoutError):
        reason = "no answer in time"
    else:  # the type alone: some messages quote the whole URL
        reason = type(exc).__name__
    _upstream_log.warning("upstream %s:%s failed: %s", host, port, reason)


def _where(url: str) -> tuple[str, int | None]:
    """The host as the URL spells it (an internationalized name is not decoded: that can
    fail, and a log line must not) and the port."""
    parsed = URL(url, encoded=True)
    return parsed.raw_host or "", parsed.port


def log_refusal(url: str, status: int, err: ApiError) -> None:
    """An upstream that answered with an error status, for the operator: host and port,
    the status, the upstream's own error code (quoted and cut short: it is the upstream's
    word, already scrubbed of the request's credentials) and what it became, never its
    message (it can quote the prompt)."""
    host, port = _where(url)
    theirs = None if err.upstream_code is None else err.upstream_code[:64]
    _upstream_log.warning(
        "upstream %s:%s answered HTTP %d (%r): %s %s",
        host,
        port,
        status,
        theirs,
        err.type,
        err.code,
    )


def map_client_error(exc: BaseException, connecting: bool) -> ApiError:
    """The client's and the socket's failures, in our terms. ``connecting``: before the
    response head."""
    if isinstance(exc, ConnectTimeoutError):
        return RequestTimeoutError(
            "Timed out connecting to the provider.",
            code="upstream_connect_timeout",
            http_status=504,
        )
    if isinstance(exc, asyncio.TimeoutError):
        if connecting:
            return RequestTimeoutError(
                "The provider did not answer in time.", code="upstream_timeout", http_status=504
            )
        return RequestTimeoutError(
            "The provider stopped sending data.", code="stream_stalled", http_status=504
        )
    if isinstance(exc, ConnectFailedError):
        return UpstreamError("Could not connect to the provider.", code="upstream_connect_failed")
    if isinstance(exc, UpstreamClosedError):
        return UpstreamError(
            "The response stream ended before it completed.", code="upstream_disconnected"
        )
    return UpstreamError(
        f"The provider request failed ({type(exc).__name__}).", code="upstream_transport_error"
    )


def deadline_error(total: float) -> RequestTimeoutError:
    return RequestTimeoutError(
        f"The provider did not finish within {total:g} s.",
        code="deadline_exceeded",
        http_status=504,
    )
