"""An :class:`HttpConnection` on a fake transport: bytes in, recorded bytes out, no
sockets. The transport behaves as asyncio's do where the connection can tell: reading
paused holds data back until resumed, a closed transport delivers nothing more and
then reports the connection lost."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httptools

from sluice.server.http1 import HttpConnection
from sluice.server.intake import HeadGate, Intake, Limits
from sluice.server.message import Request, ResponseWriter
from sluice.server.responses import connection_error
from sluice.wire.errors import error_json

LIMITS = Limits(
    max_body_bytes=64,
    max_header_bytes=256,
    header_timeout=100.0,
    body_timeout=100.0,
    keepalive_timeout=100.0,
    write_timeout=100.0,
)


def refused(
    status: int, message: str, target: bytes, origin: bytes | None
) -> tuple[list[tuple[str, str]], bytes]:
    """The gateway's answer to a refused head: its error body, as ``Gateway.refused``."""
    return [("content-type", "application/json")], error_json(connection_error(status, message))


class FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.out = bytearray()
        self.writes_after_close = 0
        self.closed = False
        self.eof = False
        self.reading = True
        self.pauses = 0
        self.backlog = bytearray()
        """Bytes the client sent while reading was paused."""

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self.closed or self.eof:
            self.writes_after_close += 1
        self.out += data

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        self.eof = True

    def pause_reading(self) -> None:
        self.reading = False
        self.pauses += 1

    def resume_reading(self) -> None:
        self.reading = True

    def is_reading(self) -> bool:
        return self.reading

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes


@dataclass
class _Replies:
    """Collects what an ``httptools`` response parser reads."""

    parser: httptools.HttpResponseParser | None = None
    done: list[Reply] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    body: bytearray = field(default_factory=bytearray)

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_body(self, body: bytes) -> None:
        self.body += body

    def on_message_complete(self) -> None:
        assert self.parser is not None
        self.done.append(Reply(self.parser.get_status_code(), self.headers, bytes(self.body)))
        self.headers, self.body = {}, bytearray()


def parse_replies(data: bytes) -> list[Reply]:
    """Every complete response in ``data``, ``100 Continue`` included."""
    sink = _Replies()
    sink.parser = httptools.HttpResponseParser(sink)
    sink.parser.feed_data(data)
    return sink.done


Respond = Callable[[Request, ResponseWriter], Awaitable[None]]


class Wire:
    """One connection and the client's side of it. ``seen``: the requests its handler
    got, in order; ``gate``, when set, holds every response until it is opened."""

    def __init__(
        self,
        limits: Limits = LIMITS,
        respond: Respond | None = None,
        head_gate: HeadGate | None = None,
    ) -> None:
        self.limits = limits
        self.intake = Intake(limits)
        self.transport = FakeTransport()
        self.seen: list[Request] = []
        self.gate: asyncio.Event | None = None
        self.lost = False
        self._respond = respond
        self.conn = HttpConnection(self._handle, limits, refused, self.intake, head_gate)
        self.conn.connection_made(self.transport)

    async def _handle(self, request: Request, writer: ResponseWriter) -> None:
        self.seen.append(request)
        if self.gate is not None:
            await self.gate.wait()
        if self._respond is not None:
            await self._respond(request, writer)
        else:
            await writer.send(200, [], b"%s %s" % (request.path.encode(), bytes(request.body)))

    def send(self, *pieces: bytes) -> None:
        """The client sends each piece in its own segment."""
        for piece in pieces:
            if not piece:  # a transport never delivers nothing
                continue
            if self.transport.closed:
                return
            if self.transport.reading:
                self.conn.data_received(piece)
            else:
                self.transport.backlog += piece

    async def settle(self) -> None:
        """Run the handlers and the transport until nothing more happens."""
        idle = 0
        while idle < 20:
            before = self._state()
            if self.transport.reading and self.transport.backlog and not self.transport.closed:
                data = bytes(self.transport.backlog)
                self.transport.backlog.clear()
                self.conn.data_received(data)
            if self.transport.closed and not self.lost:
                self.lost = True
                self.conn.connection_lost(None)
            await asyncio.sleep(0)
            idle = idle + 1 if self._state() == before else 0

    def _state(self) -> tuple[object, ...]:
        t = self.transport
        return len(t.out), len(t.backlog), t.reading, t.closed, self.lost, self.conn.task

    @property
    def replies(self) -> list[Reply]:
        return parse_replies(bytes(self.transport.out))

    def close(self) -> None:
        """The client goes away (ends the test: no timer or task is left behind)."""
        if not self.lost:
            self.lost = True
            self.conn.connection_lost(None)


def splits(raw: bytes) -> list[tuple[bytes, ...]]:
    """``raw`` whole, cut in two at every index, and one byte at a time."""
    cuts: list[tuple[bytes, ...]] = [(raw[:i], raw[i:]) for i in range(len(raw) + 1)]
    return [*cuts, tuple(raw[i : i + 1] for i in range(len(raw)))]
