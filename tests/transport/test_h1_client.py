"""The upstream HTTP/1.1 client against raw servers: what goes on the wire, the framings
a response may use, keep-alive reuse and expiry, and the answers it refuses."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import socket
import ssl
from collections.abc import Callable
from pathlib import Path

import pytest
import trustme

from sluice.core.connection import Timeouts
from sluice.core.upstream_request import UpstreamRequest
from sluice.errors import UpstreamError
from sluice.transport.guarded_resolver import AddrInfo
from sluice.transport.http import HttpTransport
from sluice.transport.pool import ConnectionPool

Answer = Callable[[bytes], bytes]
"""The raw request (head and body) -> the raw bytes sent back."""


class Server:
    """Answers each request on a connection with ``answer(request)``; closes after it
    when ``close_after`` (a response framed by the close)."""

    def __init__(self, answer: Answer, *, close_after: bool = False) -> None:
        self.answer = answer
        self.close_after = close_after
        self.connections = 0
        self.requests: list[bytes] = []
        self.closed = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.lower().split(b"\r\n"):
                    if line.startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                request = head + await reader.readexactly(length)
                self.requests.append(request)
                writer.write(self.answer(request))
                await writer.drain()
                if self.close_after:
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            self.closed += 1
            writer.close()


async def serving(server: Server) -> tuple[asyncio.Server, int]:
    listening = await asyncio.start_server(server.serve, "127.0.0.1", 0)
    return listening, listening.sockets[0].getsockname()[1]


async def fetch(
    transport: HttpTransport, port: int, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    req = UpstreamRequest(
        "POST", f"http://127.0.0.1:{port}/v1/x?k=1", headers or {}, b'{"a":1}', False
    )
    resp = await transport.send(req, Timeouts())
    body = await resp.read_body(1 << 20)
    resp.release()
    return resp.status, dict(resp.headers), body


def fixed(raw: bytes) -> Answer:
    return lambda request: raw


async def test_the_request_goes_out_as_built(transport: HttpTransport) -> None:
    server = Server(fixed(b"HTTP/1.1 204 No Content\r\n\r\n"))
    listening, port = await serving(server)
    async with listening:
        await fetch(transport, port, {"authorization": "Bearer k", "content-type": "x/y"})
        await fetch(transport, port, {"user-agent": "theirs/1"})
    first, second = server.requests
    assert first.startswith(b"POST /v1/x?k=1 HTTP/1.1\r\n")
    lines = first.split(b"\r\n")
    assert f"host: 127.0.0.1:{port}".encode() in lines
    assert b"user-agent: sluice-test" in lines
    assert b"authorization: Bearer k" in lines and b"content-type: x/y" in lines
    assert first.endswith(b"content-length: 7\r\n\r\n" + b'{"a":1}')
    assert b"user-agent: theirs/1" in second.split(b"\r\n")
    assert b"sluice-test" not in second
    assert server.connections == 1  # the second request reused the first connection


async def test_a_header_with_a_line_break_is_refused_before_anything_is_sent(
    transport: HttpTransport,
) -> None:
    server = Server(fixed(b"HTTP/1.1 204 No Content\r\n\r\n"))
    listening, port = await serving(server)
    async with listening:
        with pytest.raises(UpstreamError) as caught:
            await fetch(transport, port, {"x-note": "a\r\nx-injected: 1"})
    assert caught.value.code == "upstream_misconfigured"
    assert server.connections == 0


@pytest.mark.parametrize(
    "raw",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello world",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello world",
        b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 31\r\n\r\n"
        + gzip.compress(b"hello world", mtime=0),
    ],
    ids=["length", "chunked", "interim", "gzip"],
)
async def test_every_framing_reads_the_same_body(transport: HttpTransport, raw: bytes) -> None:
    assert len(gzip.compress(b"hello world", mtime=0)) == 31
    server = Server(fixed(raw))
    listening, port = await serving(server)
    async with listening:
        status, headers, body = await fetch(transport, port)
        assert (status, body) == (200, b"hello world")
        assert await fetch(transport, port) == (status, headers, body)
    assert server.connections == 1


async def test_a_body_framed_by_the_close_ends_with_it(transport: HttpTransport) -> None:
    server = Server(fixed(b"HTTP/1.1 200 OK\r\n\r\nuntil the end"), close_after=True)
    listening, port = await serving(server)
    async with listening:
        assert (await fetch(transport, port))[2] == b"until the end"
        assert (await fetch(transport, port))[2] == b"until the end"
    assert server.connections == 2  # such a connection cannot carry another request


@pytest.mark.parametrize(
    "raw",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
    ],
    ids=["length", "chunked"],
)
async def test_a_body_cut_short_is_a_disconnect(transport: HttpTransport, raw: bytes) -> None:
    server = Server(fixed(raw), close_after=True)
    listening, port = await serving(server)
    async with listening:
        with pytest.raises(UpstreamError) as caught:
            await fetch(transport, port)
    assert caught.value.code == "upstream_disconnected"


@pytest.mark.parametrize(
    "raw",
    [
        b"SMTP ready\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Encoding: br\r\nContent-Length: 2\r\n\r\nxx",
        b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 2\r\n\r\nxx",
    ],
    ids=["not-http", "unknown-coding", "bad-gzip"],
)
async def test_an_unreadable_answer_is_a_transport_error(
    transport: HttpTransport, raw: bytes
) -> None:
    server = Server(fixed(raw))
    listening, port = await serving(server)
    async with listening:
        with pytest.raises(UpstreamError) as caught:
            await fetch(transport, port)
    assert caught.value.code in {"upstream_transport_error", "upstream_disconnected"}
    assert caught.value.http_status == 502


async def test_a_slow_reader_stops_the_socket_being_read() -> None:
    """Past the high-water mark the connection stops reading: the upstream's bytes wait
    in the kernel, not in the gateway."""
    big = b"x" * (8 << 20)
    server = Server(fixed(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(big) + big))
    listening, port = await serving(server)
    async with listening:
        pool = ConnectionPool(guarded=False, allow_private=True, receive_buffer=64 * 1024)
        conn = await pool.open(("http", "127.0.0.1", port))
        await conn.send(b"GET / HTTP/1.1\r\nhost: t\r\n\r\n", b"")
        await asyncio.sleep(0.3)  # the server writes as fast as it can; nobody reads
        first = await conn.read()
        assert len(first) < 1 << 20
        total = len(first)
        while data := await conn.read():
            total += len(data)
        assert total == len(big)
        conn.close()


async def test_idle_connections_are_closed_after_the_keepalive() -> None:
    server = Server(fixed(b"HTTP/1.1 204 No Content\r\n\r\n"))
    listening, port = await serving(server)
    origin = ("http", "127.0.0.1", port)
    async with listening:
        pool = ConnectionPool(guarded=False, allow_private=True, keepalive=0.2)
        assert pool.take(origin) is None
        conn = await pool.open(origin)
        await conn.send(b"GET / HTTP/1.1\r\nhost: t\r\n\r\n", b"")
        assert await conn.read() == b""
        assert conn.reusable
        pool.give_back(origin, conn)
        assert pool.take(origin) is conn
        pool.give_back(origin, conn)
        await asyncio.sleep(0.5)
        assert conn.lost and server.closed == 1
        assert pool.take(origin) is None
        pool.close()


def swallowing_address() -> tuple[socket.socket, list[socket.socket], tuple[str, int]]:
    """A listener whose accept queue is full: connection attempts to it hang (the
    kernel drops their SYNs), as to an address whose route goes nowhere."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    address = listener.getsockname()
    queued = []
    for _ in range(3):
        sock = socket.socket()
        sock.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            sock.connect(address)
        queued.append(sock)
    return listener, queued, address


async def test_an_address_that_swallows_connections_does_not_hold_up_the_next() -> None:
    server = Server(fixed(b"HTTP/1.1 204 No Content\r\n\r\n"))
    listening, port = await serving(server)
    listener, queued, dead = swallowing_address()
    answers: list[AddrInfo] = [
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", dead),
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port)),
    ]

    async def lookup(host: str, port: int) -> list[AddrInfo]:
        return answers

    pool = ConnectionPool(guarded=False, allow_private=True, lookup=lookup)
    try:
        async with listening, asyncio.timeout(10):  # tried in turn: SYN retries, minutes
            conn = await pool.open(("http", "upstream.test", port))
            await conn.send(b"GET / HTTP/1.1\r\nhost: t\r\n\r\n", b"")
            assert await conn.read() == b""
            assert conn.status == 204 and server.connections == 1
            conn.close()
    finally:
        pool.close()
        for sock in [listener, *queued]:
            sock.close()


async def test_tls_upstreams_are_verified(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, transport: HttpTransport
) -> None:
    """An https upstream is reached over TLS checked against the system's trust store
    (here a test CA through ``SSL_CERT_FILE``, which OpenSSL reads); a certificate for
    another name is a connect failure."""
    ca = trustme.CA()
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    monkeypatch.setenv("SSL_CERT_FILE", str(ca_file))
    server = Server(fixed(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
    for name, expected in (("localhost", b"ok"), ("elsewhere.test", None)):
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert(name).configure_cert(context)
        listening = await asyncio.start_server(server.serve, "127.0.0.1", 0, ssl=context)
        port = listening.sockets[0].getsockname()[1]
        req = UpstreamRequest("GET", f"https://localhost:{port}/", {}, b"", False)
        async with listening:
            if expected is None:
                with pytest.raises(UpstreamError) as caught:
                    await transport.send(req, Timeouts())
                assert caught.value.code == "upstream_connect_failed"
                continue
            resp = await transport.send(req, Timeouts())
            assert await resp.read_body(100) == expected
            resp.release()
    assert len(server.requests) == 1


async def test_a_body_read_to_its_end_frees_the_connection_unasked(
    transport: HttpTransport,
) -> None:
    """The stream's reader need not say ``release``: the end of the body does, and a
    later ``close`` or ``release`` leaves alone the connection another request now has."""
    server = Server(fixed(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
    listening, port = await serving(server)
    req = UpstreamRequest("GET", f"http://127.0.0.1:{port}/", {}, b"", False)
    async with listening:
        first = await transport.send(req, Timeouts())
        assert await first.read_chunk() == b"ok"
        assert await first.read_chunk() == b""
        second = await transport.send(req, Timeouts())
        first.close()
        first.release()
        assert await second.read_body(10) == b"ok"
    assert server.connections == 1
