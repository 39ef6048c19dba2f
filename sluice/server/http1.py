"""HTTP/1.1 server connections on httptools (llhttp), written for streaming.

Why not a framework: a gateway's hard parts live exactly here, and we measured
(bench/README.md) that owning them is also faster. Each connection:

* decides routes on the raw request target, never on ``Host``, and refuses heads RFC
  9112 forbids (:mod:`.head`: the version, ``Host``, transfer codings);
* answers pipelined requests in order, and a refused one after those before it;
* cuts off clients that trickle headers (``header_timeout``) or the body
  (``body_timeout``), and idle keep-alive connections;
* refuses bodies over ``max_body_bytes`` with 413 before reading them, any past the
  intake's budget with 503 (load shedding), a large one its ``HeadGate`` refuses;
* writes every event straight to the socket and waits when the client's buffer is
  full (backpressure): a client that stops reading holds ``write_buffer_bytes``;
* cancels the request's task the moment the client goes away (and its upstream call).
"""

from __future__ import annotations

import asyncio
import logging
from typing import cast

import httptools

from sluice.exchange.ports import ClientGoneError
from sluice.server.head import content_length, expects_continue, head_problem, is_chunked
from sluice.server.intake import ErrorResponse, HeadGate, Intake, Limits
from sluice.server.message import Handler, Request, ResponseWriter, response_head
from sluice.server.parsed import parsed_request
from sluice.server.pipeline import Pipeline

_log = logging.getLogger("sluice.server")

_MAX_HEADERS = 100
_HEAD_FRAMING = 4 * _MAX_HEADERS + 1024
"""Raw bytes a head may carry beyond its names and values: separators, line ends, request line."""
_CHUNK_FRAMING = 32
"""Bytes a chunk's size line and CRLFs may take, extensions included."""
_READ_SLACK = 256 * 1024
"""What one read may carry besides the body (the next pipelined request's head)."""
_LINGER_SECONDS = 2.0
"""A refused client may send on that long (at most ``max_body_bytes``); then it is cut."""
_BUSY = "The gateway is receiving too many request bodies; retry shortly."
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


class HttpConnection(asyncio.Protocol):
    def __init__(
        self,
        handler: Handler,
        limits: Limits,
        error_response: ErrorResponse,
        intake: Intake,
        gate: HeadGate | None = None,
    ) -> None:
        self._intake = intake
        self._gate = gate
        self._handler = handler
        self._limits = limits
        self._error_response = error_response
        self._loop = asyncio.get_running_loop()
        self._parser = httptools.HttpRequestParser(self)
        self._transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None
        self._pipeline = Pipeline(intake)
        self._drain: asyncio.Future[None] | None = None
        self._closing = False
        self._refusal: tuple[int, str, bytes, bytes | None] | None = None  # after those before
        self._lingering: asyncio.Transport | None = None
        self._shunned = False  # refused by the gate: the large body behind is never read
        self._lingered = 0
        self.paused = False
        self.interrupted = False
        self._reset()

    def _reset(self) -> None:
        self._url = b""
        self._headers: list[tuple[bytes, bytes]] = []
        self._body = bytearray()  # grown in place: no second copy when it is complete
        self._body_size = self._head_size = self._head_raw = self._body_raw = self._chunks = 0
        self._head_too_large = False
        self._in_head = False
        self._expect_body = False
        self._continue = False  # the client asked for 100 Continue
        self._receiving = False  # this body counts among the intake's bodies

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)  # uvloop's are not subclasses
        self._transport = transport
        self._intake.opened(self)
        self._limits.apply(transport)
        self._arm(self._limits.header_timeout)

    def connection_lost(self, exc: Exception | None) -> None:
        self._intake.closed(self)
        self._drop_body()
        self._pipeline.drop()
        self._lingering = None
        self._transport = None
        self._disarm()
        if self._task is not None and not self._task.done():
            self._task.cancel()
        if self._drain is not None and not self._drain.done():
            self._drain.set_exception(ClientGoneError())
            self._drain.exception()  # mark retrieved: nobody may be waiting

    def pause_writing(self) -> None:  # the client's buffer is full
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        if self._drain is not None and not self._drain.done():
            self._drain.set_result(None)

    def data_received(self, data: bytes) -> None:
        if self._refusal is not None:  # read and dropped, up to a point
            self._lingered += len(data)
            if self._lingering is not None and self._lingered > self._limits.max_body_bytes:
                self._lingering.close()
            return
        if self._in_head:  # the parser buffers a header until its line ends: count raw bytes
            self._head_raw += len(data)
        elif self._receiving:  # a body's framing (chunk sizes, extensions) counts too
            self._body_raw += len(data)
        try:
            self._parser.feed_data(data)
            if self._in_head and self._head_raw > self._limits.max_header_bytes + _HEAD_FRAMING:
                self._reject(431, "The request headers are too large.")
            elif self._receiving and self._body_raw > self._framed_body_limit():
                self._reject(413, "The request body is larger than the limit.")
        except httptools.HttpParserUpgrade:
            self._reject(400, "Protocol upgrades are not supported.")
        except httptools.HttpParserError:
            if self._head_too_large:
                self._reject(431, "The request headers are too large.")
            else:
                self._reject(400, "Malformed HTTP request.")
        else:
            self._send_continue()

    def on_message_begin(self) -> None:
        if self._refusal is not None:  # nothing after a refused request is read
            raise httptools.HttpParserError("request after a refused one")
        self._reset()
        self._in_head = True
        self._rearm()

    def on_url(self, url: bytes) -> None:
        self._url += url
        self._count_head(len(url))

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count_head(len(name) + len(value))
        if len(self._headers) >= _MAX_HEADERS:
            self._head_too_large = True
            raise httptools.HttpParserError("too many headers")
        self._headers.append((name, value))

    def _framed_body_limit(self) -> int:
        """Raw bytes a body may take: its limit, the framing of its chunks, one read."""
        return self._limits.max_body_bytes + _CHUNK_FRAMING * self._chunks + _READ_SLACK

    def _count_head(self, size: int) -> None:
        self._head_size += size
        if self._head_size > self._limits.max_header_bytes:
            self._head_too_large = True
            raise httptools.HttpParserError("request head too large")

    def on_headers_complete(self) -> None:
        self._in_head = False
        problem = head_problem(self._parser.get_http_version(), self._headers)
        if problem is not None:
            self._reject(*problem)
            return
        length = content_length(self._headers)
        if length is not None and length > self._limits.max_body_bytes:
            self._reject(413, "The request body is larger than the limit.")
            return
        self._expect_body = length != 0 and (length is not None or is_chunked(self._headers))
        if self._expect_body and self._shuns(length):
            return
        if self._expect_body and not self._intake.begin(length or 0):
            self._reject(503, _BUSY)
            return
        if self._expect_body:
            self._receiving = True
            self._continue = expects_continue(self._parser.get_http_version(), self._headers)
        self._rearm()

    def _shuns(self, length: int | None) -> bool:
        """A large (or chunked) body the gate refuses: answered, never read."""
        large = length is None or length > Intake.LARGE_BODY_BYTES
        refusal = None if self._gate is None or not large else self._gate(self._url, self._headers)
        if refusal is not None:
            self._shunned = True
            self._reject(*refusal)
        return refusal is not None

    def _send_continue(self) -> None:
        """``100 Continue`` once it is this request's turn, unless its body has begun."""
        begun = self._chunks or self._body_size
        if self._continue and not begun and self._task is None and self._refusal is None:
            self._continue = False
            self.write(_CONTINUE)

    def on_chunk_header(self) -> None:
        self._chunks += 1

    def on_body(self, body: bytes) -> None:
        if self._refusal is not None:  # refused: the rest of this body is dropped
            return
        size = self._body_size + len(body)  # counted once the intake has taken it
        if size > self._limits.max_body_bytes:
            self._reject(413, "The request body is larger than the limit.")
        elif not self._intake.received(len(body), size):
            self._reject(503, _BUSY)
        else:
            self._body_size = size
            self._body += body

    def on_message_complete(self) -> None:
        if self._receiving:
            self._receiving = False
            self._intake.ended()
        if self._refusal is not None or self._parser.should_upgrade():
            self._drop_body()
            return  # an upgrade request is refused when the parser reports it
        if self._pipeline.full:  # a client retries what a closed connection left unanswered
            self._reject(503, "The connection holds too many pipelined requests.")
            return
        request = parsed_request(
            self._parser, self._url, self._headers, self._body, self._body_size
        )
        self._reset()
        self._pipeline.hold(request, self._transport)
        if self._task is None:
            self._disarm()
            self._next()

    def _next(self) -> None:
        request = self._pipeline.next(self._transport, resume=self._refusal is None)
        self._task = self._loop.create_task(self._run(request))
        if request.received:  # its bytes stay counted until it ends, however it ends
            size, intake = request.received, self._intake
            self._task.add_done_callback(lambda _: intake.release(size))

    async def _run(self, request: Request) -> None:
        writer = ResponseWriter(
            self, request.keep_alive, request.version == "1.0", head_only=request.method == "HEAD"
        )
        try:
            await self._handler(request, writer)
        except ClientGoneError:
            writer.finished = False
        except asyncio.CancelledError:
            self._close()
            raise
        except Exception:  # the handler maps its own errors; this is the last resort
            _log.exception("unhandled error in request handler")
            writer.finished = False
        finally:
            self._task = None
        if not writer.finished or not writer.keep_alive or self._closing:
            self._close()
        elif self._pipeline:
            self._next()
        elif self._refusal is not None:
            self._answer_refusal()
        else:  # the next request may be on its way already
            self._send_continue()
            self._rearm()

    @property
    def task(self) -> asyncio.Task[None] | None:  # the request being served, if any
        return self._task

    def close_when_idle(self) -> None:
        """Close now if idle; otherwise after the response in flight (no keep-alive)."""
        self._pipeline.drop()
        if self._task is None:
            self._close()
        else:
            self._closing = True

    def interrupt(self) -> None:
        """The gateway is stopping: cut the request in flight; its handler sees
        :attr:`interrupted` and ends the response with ``server_shutting_down``."""
        self._pipeline.drop()
        self._closing = True
        if self._task is not None and not self._task.done():
            self.interrupted = True
            self._task.cancel()

    def abort(self) -> None:
        transport = self._transport or self._lingering
        if transport is not None:
            transport.abort()

    def write(self, data: bytes) -> None:
        if self._transport is None:
            raise ClientGoneError()
        self._transport.write(data)

    async def drain(self) -> None:
        if self._transport is None:
            raise ClientGoneError()
        if not self.paused:
            return
        self._drain = self._loop.create_future()
        try:
            await asyncio.wait_for(self._drain, self._limits.write_timeout)
        except TimeoutError:  # the client stopped reading: cut it (and its upstream call)
            self.abort()
            raise ClientGoneError() from None

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._timer = self._loop.call_later(seconds, self._timed_out)

    def _rearm(self) -> None:
        """The timer for what the connection awaits, unless a response is in flight."""
        if self._task is None:
            limits = self._limits
            if self._in_head:
                self._arm(limits.header_timeout)
            else:
                self._arm(limits.body_timeout if self._expect_body else limits.keepalive_timeout)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _timed_out(self) -> None:
        self._timer = None
        if self._task is not None:
            return
        if self._in_head or self._expect_body:
            self._reject(408, "The client was too slow to send its request.")
        else:
            self._close()

    def _drop_body(self) -> None:
        """The body being received will not be served: give its slot and bytes back."""
        if self._receiving:
            self._receiving = False
            self._intake.ended()
        self._intake.release(self._body_size)
        self._body_size = 0
        self._body = bytearray()

    def _reject(self, status: int, message: str) -> None:
        """Refuse a request that never reached a handler: nothing after it is read. It is
        answered (then the connection closes) after the requests before it, if any."""
        self._drop_body()
        if self._transport is None or self._refusal is not None:
            return
        origin = next((v for n, v in self._headers if n.lower() == b"origin"), None)
        self._refusal = (status, message, self._url, origin)
        if self._task is None:
            self._answer_refusal()
        else:
            self._pipeline.pause(self._transport)

    def _answer_refusal(self) -> None:
        """A lingering close: send the answer and our FIN, then read and drop whatever
        the client still sends for a moment, so its kernel does not turn our close
        into a reset that destroys the answer before the client reads it. A large body
        the gate refused is not read even so: its client, blocked, reads the answer if
        it reads as it sends (or asked for ``100 Continue``), else meets the close."""
        transport, refusal = self._transport, self._refusal
        if transport is None or refusal is None:
            return
        self._transport = None
        status, message, target, origin = refusal
        headers, body = self._error_response(status, message, target, origin)
        headers = [*headers, ("content-length", str(len(body))), ("connection", "close")]
        transport.write(response_head(status, headers) + body)
        if not transport.can_write_eof():
            transport.close()
            return
        transport.write_eof()
        self._lingering = transport
        if self._shunned:  # a large body its gate refused: let it wait unread, then cut
            transport.pause_reading()
        elif self._pipeline.paused:
            transport.resume_reading()
        self._disarm()
        self._timer = self._loop.call_later(_LINGER_SECONDS, transport.close)

    def _close(self) -> None:
        self._disarm()
        if self._transport is not None:
            self._transport.close()
            self._transport = None
