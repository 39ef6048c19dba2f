"""What a listener's connections obey (:class:`Limits`, a :data:`HeadGate`) and share
(:class:`Intake`, the budget for request bodies that sheds load), and how they answer a
request refused before any handler (:data:`ErrorResponse`)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING

import msgspec

from sluice.exchange.ports import Headers

if TYPE_CHECKING:
    from sluice.server.http1 import HttpConnection


HeadGate = Callable[[bytes, list[tuple[bytes, bytes]]], tuple[int, str] | None]
"""``(target, headers) -> (status, message)`` to refuse a request with a large or chunked
body on its head, before any of the body is read (its caller's key is being refused
anyway); None lets it in."""
ErrorResponse = Callable[[int, str, bytes, bytes | None], tuple[Headers, bytes]]
"""``(status, message, target, origin) -> (headers, body)`` for requests refused before
any handler; ``target``: the request target as far as it was read (``b""`` if not at
all), so that the answer can take the shape of the front door it was meant for;
``origin``: its ``Origin`` header if one was read (a browser must be let read the
error too)."""


class Limits(msgspec.Struct, frozen=True):
    max_body_bytes: int
    max_header_bytes: int
    header_timeout: float
    body_timeout: float
    keepalive_timeout: float
    write_timeout: float
    max_concurrent_bodies: int = 256
    max_buffered_body_bytes: int = 64 * 1024 * 1024
    write_buffer_bytes: int = 64 * 1024
    socket_buffer_bytes: int = 0
    """``SO_SNDBUF`` of each client socket; 0 leaves the kernel's autotuning."""

    def apply(self, transport: asyncio.Transport) -> None:
        """A new client connection's write buffer and socket buffer."""
        transport.set_write_buffer_limits(high=self.write_buffer_bytes)
        sock = transport.get_extra_info("socket")
        if self.socket_buffer_bytes and sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.socket_buffer_bytes)


class Intake:
    """What one listener's connections share: which are open; how many request bodies
    are being received (``bodies``); how many bytes the bodies of the requests in hand
    hold (``bytes``: counted as they arrive, so a length that is declared and never
    sent costs nothing, and given back when the request ends). Large bodies (over
    ``LARGE_BODY_BYTES``) may fill only 7/8 of the bytes: the rest is kept for ordinary
    requests, which a flood of uploads then cannot lock out. A step that would pass a
    bound returns False; the caller refuses the request."""

    LARGE_BODY_BYTES = 1024 * 1024

    def __init__(self, limits: Limits) -> None:
        self._max_bodies = limits.max_concurrent_bodies
        self._max_bytes = limits.max_buffered_body_bytes
        self._max_large = limits.max_buffered_body_bytes * 7 // 8
        self.bodies = 0
        self.bytes = 0
        self.live: set[HttpConnection] = set()
        self._empty = asyncio.Event()
        self._empty.set()

    def opened(self, conn: HttpConnection) -> None:
        self.live.add(conn)
        self._empty.clear()

    def closed(self, conn: HttpConnection) -> None:
        self.live.discard(conn)
        if not self.live:
            self._empty.set()

    async def all_closed(self) -> None:
        """Return once no connection is open."""
        await self._empty.wait()

    def _fits(self, size: int, body_size: int) -> bool:
        limit = self._max_large if body_size > self.LARGE_BODY_BYTES else self._max_bytes
        return self.bytes + size <= limit

    def begin(self, declared: int) -> bool:
        """A body starts (``declared``: its Content-Length, 0 when chunked)."""
        if self.bodies >= self._max_bodies or not self._fits(declared, declared):
            return False
        self.bodies += 1
        return True

    def received(self, size: int, body_size: int) -> bool:
        """``size`` more bytes of a body that has ``body_size`` bytes with them."""
        if not self._fits(size, body_size):
            return False
        self.bytes += size
        return True

    def ended(self) -> None:
        """A body is complete (or refused): one fewer being received."""
        self.bodies -= 1

    def release(self, size: int) -> None:
        """A request's body is done with: its bytes are given back."""
        self.bytes -= size
