"""One HTTP exchange as handlers see it: the parsed request and the response writer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from http import HTTPStatus
from types import MappingProxyType
from typing import Protocol

from sluice.exchange.ports import Headers

_REASONS: Mapping[int, bytes] = MappingProxyType(
    {status.value: status.phrase.encode("ascii") for status in HTTPStatus}
    | {413: b"Content Too Large"}  # RFC 9110's name; Python 3.11 has the old one
)


class Request:
    """A parsed request. ``path`` is the raw target's path, exactly as sent; ``query``
    the raw query string after ``?`` (only listings read it). ``received``: the body's
    size as received, counted by the server's intake until the request ends (a handler
    may drop ``body`` once it has decoded it)."""

    __slots__ = (
        "body",
        "headers",
        "keep_alive",
        "method",
        "path",
        "query",
        "received",
        "version",
    )

    def __init__(
        self,
        *,
        method: str,
        path: str,
        headers: dict[str, str],
        body: bytes | bytearray,
        version: str,
        keep_alive: bool,
        received: int = 0,
        query: str = "",
    ) -> None:
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
        self.version = version
        self.keep_alive = keep_alive
        self.received = received
        self.query = query


class Sink(Protocol):
    """The connection side of a :class:`ResponseWriter`. ``interrupted``: the gateway
    is stopping and cut this response short (its task was cancelled for that)."""

    paused: bool
    interrupted: bool

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...


Handler = Callable[[Request, "ResponseWriter"], Awaitable[None]]


def response_head(status: int, headers: Headers) -> bytes:
    reason = _REASONS.get(status, b"Unknown")
    lines = "".join(f"{name}: {value}\r\n" for name, value in headers)
    return b"HTTP/1.1 %d %b\r\n%b\r\n" % (status, reason, lines.encode("latin-1"))


class ResponseWriter:
    """Writes one response: whole (``send``) or streamed (``start`` / ``write`` / ``end``).

    For a HEAD request (``head_only``) the head goes out as it would for GET, the body never.
    """

    __slots__ = (
        "_chunked",
        "_conn",
        "_head",
        "_head_only",
        "finished",
        "keep_alive",
        "started",
        "status",
        "writes",
    )

    def __init__(self, conn: Sink, keep_alive: bool, http10: bool, head_only: bool = False) -> None:
        self._conn = conn
        self._head = b""
        self._head_only = head_only
        self._chunked = not http10
        self.keep_alive = keep_alive
        self.started = False
        self.finished = False
        self.status = 0
        """The status of the head written, once one was (0 before)."""
        self.writes = 0

    async def send(self, status: int, headers: Headers, body: bytes) -> None:
        self.send_now(status, headers, body)
        await self._conn.drain()

    def send_now(self, status: int, headers: Headers, body: bytes) -> None:
        """:meth:`send` without waiting for the client to read it."""
        self.started = self.finished = True
        self.status = status
        extra = [("content-length", str(len(body)))]
        if not self.keep_alive:
            extra.append(("connection", "close"))
        head = response_head(status, headers + extra)
        self._conn.write(head if self._head_only else head + body)

    def start(self, status: int, headers: Headers) -> None:
        """Begin a streamed body (chunked; raw until close for HTTP/1.0). The head goes
        out with the first body bytes, in the same write. A second call does nothing."""
        if self.started:
            return
        self.started = True
        self.status = status
        if not self._chunked:
            self.keep_alive = False
            extra = [("connection", "close")]
        else:
            extra = [("transfer-encoding", "chunked")]
            if not self.keep_alive:
                extra.append(("connection", "close"))
        self._head = response_head(status, headers + extra)

    def write_now(self, data: bytes) -> None:
        """Write without waiting for the client to drain (timers: keep-alive comments)."""
        if self._head_only:
            data = b""
        frame = b"%x\r\n%b\r\n" % (len(data), data) if self._chunked and data else data
        if self._head:
            frame, self._head = self._head + frame, b""
        self._conn.write(frame)
        self.writes += 1

    async def write(self, data: bytes) -> None:
        self.write_now(data)
        if self._conn.paused:
            await self._conn.drain()

    @property
    def head_only(self) -> bool:
        """A HEAD request: the head is all that goes out (an endless stream ends at once)."""
        return self._head_only

    @property
    def interrupted(self) -> bool:
        """The gateway stopped this response (not the client leaving)."""
        return self._conn.interrupted

    def end_now(self, data: bytes) -> None:
        """Write the last ``data`` and end the body without waiting for the client (the
        gateway is stopping); the connection closes after it."""
        self.finished = True
        self.keep_alive = False
        if self._head_only:
            data = b""
        tail = data
        if self._chunked:
            tail = b"%x\r\n%b\r\n0\r\n\r\n" % (len(data), data) if data else b"0\r\n\r\n"
        self._conn.write(self._head + tail)
        self._head = b""

    async def end(self, data: bytes = b"", close: bool = False) -> None:
        """Write the last ``data`` and finish the body in one write; ``close`` ends the
        connection afterwards (mid-stream errors)."""
        self.finished = True
        if close:
            self.keep_alive = False
        if self._head_only:
            tail = b""
        elif self._chunked:
            tail = b"%x\r\n%b\r\n0\r\n\r\n" % (len(data), data) if data else b"0\r\n\r\n"
        else:
            tail = data
        if self._head or tail:
            self._conn.write(self._head + tail)
            self._head = b""
        await self._conn.drain()
