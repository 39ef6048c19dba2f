"""One HTTP/1.1 connection to an upstream: a request written whole, its response parsed
by httptools as the bytes arrive.

This is the hot path's client side, so it does only what a gateway needs: no
redirects, no cookies, no content coding asked for. A response body is handed over
as it arrives, joined per read; reading pauses once ``_HIGH_WATER`` bytes wait unread
(the gateway is blocked on a slow client) and resumes when they are taken.
"""

from __future__ import annotations

import asyncio
import zlib
from typing import cast

import httptools

from sluice.transport.failures import UnreadableResponseError, UpstreamClosedError

_HIGH_WATER = 128 * 1024
"""Body bytes held unread before the socket stops being read."""


def _zlib_wbits(coding: str) -> int | None:
    """zlib's ``wbits`` for a ``Content-Encoding`` an upstream may send unasked."""
    return {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}.get(coding)


class H1Connection(asyncio.Protocol):
    """A keep-alive connection carrying one request at a time.

    ``reused``: it carried a request before this one. ``written``: the whole request
    reached the kernel (writes past the socket buffer wait in the transport until
    then); a reused connection lost before that cannot have been acted on.
    """

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._parser = httptools.HttpResponseParser(self)
        self.requests = 0
        self.written = False
        self.lost = False
        self.idle_since = 0.0
        self._head: asyncio.Future[None] | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._chunks: list[bytes] = []
        self._buffered = 0
        self._paused = False
        self._done = False
        self._keep_alive = False
        self._error: Exception | None = None
        self._decoder: zlib._Decompress | None = None
        self.status = 0
        self.headers: dict[str, str] = {}

    # the transport's side

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        tcp = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        tcp.set_write_buffer_limits(high=0)  # pause_writing: not yet all sent
        self._transport = tcp

    def pause_writing(self) -> None:
        self.written = False

    def resume_writing(self) -> None:
        self.written = True

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(UnreadableResponseError(str(exc)))
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if self._head is not None and not self._done:
            if self.status and self._ends_at_close():
                self._finish()
            else:
                self._fail(UpstreamClosedError(exc))

    # the parser's callbacks

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if 100 <= status < 200:  # an interim answer: the real one follows
            self.headers = {}
            return
        self.status = status
        coding = self.headers.get("content-encoding", "identity").strip().lower()
        if coding != "identity":
            wbits = _zlib_wbits(coding)
            if wbits is None:
                self._fail(UnreadableResponseError(f"content-encoding {coding!r}"))
                self.close()
                return
            self._decoder = zlib.decompressobj(wbits)
        head = self._head
        if head is not None and not head.done():
            head.set_result(None)

    def on_body(self, body: bytes) -> None:
        if self._decoder is not None:
            try:
                body = self._decoder.decompress(body)
            except zlib.error as exc:
                self._fail(UnreadableResponseError(f"content-encoding: {exc}"))
                self.close()
                return
        self._chunks.append(body)
        self._buffered += len(body)
        if self._buffered > _HIGH_WATER and not self._paused and self._transport is not None:
            self._paused = True
            self._transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        if self.status:  # not an interim answer's end
            self._keep_alive = self._parser.should_keep_alive()
            self._finish()

    # the client's side

    def send(self, head: bytes, body: bytes) -> asyncio.Future[None]:
        """Write the request; the future is done when the response head arrived."""
        self.requests += 1
        self.written = True
        self.status = 0
        self.headers = {}
        self._done = False
        self._keep_alive = False
        self._error = None
        self._decoder = None
        self._head = self._loop.create_future()
        transport = self._transport
        if transport is None or self.lost:  # closed while it waited in the pool
            self.written = False
            self._fail(UpstreamClosedError(None))
            return self._head
        if len(body) < 16 * 1024:
            transport.write(head + body)
        else:
            transport.writelines((head, body))
        return self._head

    async def read(self) -> bytes:
        """The body bytes that arrived since the last read; ``b""`` at its end."""
        while not self._chunks:
            if self._error is not None:
                raise self._error
            if self._done:
                return b""
            self._waiter = self._loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        chunks = self._chunks
        data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        self._chunks = []
        self._buffered = 0
        if self._paused and self._transport is not None:
            self._paused = False
            self._transport.resume_reading()
        return data

    @property
    def reusable(self) -> bool:
        """The response was read to its end and the connection may carry another."""
        return (
            self._done
            and not self._chunks
            and not self.lost
            and self._error is None
            and self._keep_alive
        )

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    # inside

    def _ends_at_close(self) -> bool:
        """A body without a length and not chunked ends when the connection does."""
        return "content-length" not in self.headers and "chunked" not in self.headers.get(
            "transfer-encoding", ""
        )

    def _finish(self) -> None:
        if self._decoder is not None:
            rest = self._decoder.flush()
            if rest:
                self._chunks.append(rest)
            self._decoder = None
        self._done = True
        self._wake()

    def _fail(self, error: Exception) -> None:
        if self._error is None:
            self._error = error
        head = self._head
        if head is not None and not head.done():
            head.set_exception(error)
            head.exception()  # retrieved here: the sender may have stopped waiting
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
