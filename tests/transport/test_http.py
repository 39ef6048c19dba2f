"""The upstream HTTP client against a raw server: the stale keep-alive race."""

from __future__ import annotations

import asyncio
import socket
import struct

import pytest

from sluice.core.connection import Timeouts
from sluice.core.upstream_request import UpstreamRequest
from sluice.errors import UpstreamError
from sluice.transport.failures import RequestNotSentError
from sluice.transport.http import HttpTransport

ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


class Server:
    """Answers ``answers[i]`` requests on its i-th connection; then, on the next request,
    closes that connection without a word: after reading the whole request, or
    (``reset_unread``) with a reset as soon as the request head is in, the body unread,
    as a connection closed while a client reused it."""

    def __init__(self, answers: list[int], *, reset_unread: bool = False) -> None:
        self.answers = answers
        self.reset_unread = reset_unread
        self.connections = 0
        self.requests = 0
        self.heads = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        index = self.connections
        self.connections += 1
        budget = self.answers[index] if index < len(self.answers) else 1 << 30
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                self.heads += 1
                if budget == 0 and self.reset_unread:
                    sock = writer.get_extra_info("socket")
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    writer.transport.abort()  # RST: what the client still writes fails
                    return
                length = next(
                    int(line.split(b":")[1])
                    for line in head.lower().split(b"\r\n")
                    if line.startswith(b"content-length:")
                )
                await reader.readexactly(length)
                self.requests += 1
                if budget == 0:
                    return
                budget -= 1
                writer.write(ANSWER)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            writer.close()


async def call(transport: HttpTransport, port: int, body: bytes = b'{"a":1}', **how: bool) -> int:
    req = UpstreamRequest("POST", f"http://127.0.0.1:{port}/v1/chat/completions", {}, body, False)
    resp = await transport.send(req, Timeouts(), **how)
    await resp.read_body(1 << 20)
    resp.release()
    return resp.status


BIG = b'{"a":"' + b"x" * (32 << 20) + b'"}'
"""Larger than the socket buffers: a reset arrives while it is still being written."""


async def test_a_pooled_connection_closed_after_reading_the_request_is_not_resent(
    transport: HttpTransport,
) -> None:
    """The upstream may have acted on a request it read (and billed it): no resend."""
    server = Server(answers=[1])
    listening = await asyncio.start_server(server.serve, "127.0.0.1", 0)
    port = listening.sockets[0].getsockname()[1]
    async with listening:
        assert await call(transport, port) == 200
        with pytest.raises(UpstreamError) as caught:
            await call(transport, port)
    assert caught.value.code == "upstream_disconnected"
    assert not isinstance(caught.value, RequestNotSentError)
    assert (server.connections, server.requests) == (1, 2)


async def test_a_pooled_connection_that_failed_mid_write_says_it_may_be_resent(
    transport: HttpTransport,
) -> None:
    server = Server(answers=[1, 1], reset_unread=True)
    listening = await asyncio.start_server(server.serve, "127.0.0.1", 0)
    port = listening.sockets[0].getsockname()[1]
    async with listening:
        assert await call(transport, port) == 200
        with pytest.raises(RequestNotSentError):
            await call(transport, port, BIG)
        assert await call(transport, port, BIG, fresh=True) == 200  # a new connection
    assert (server.connections, server.requests, server.heads) == (2, 2, 3)


async def test_a_fresh_connection_that_failed_mid_write_is_a_plain_error(
    transport: HttpTransport,
) -> None:
    """Only a reused connection's failure is the stale keep-alive race."""
    server = Server(answers=[0], reset_unread=True)
    listening = await asyncio.start_server(server.serve, "127.0.0.1", 0)
    port = listening.sockets[0].getsockname()[1]
    async with listening:
        with pytest.raises(UpstreamError) as caught:
            await call(transport, port, BIG)
    assert not isinstance(caught.value, RequestNotSentError)


async def test_a_new_connection_dropped_after_the_request_is_not_resent(
    transport: HttpTransport,
) -> None:
    """The upstream read the whole request on a fresh connection: it may have acted on it."""
    server = Server(answers=[0, 0])
    listening = await asyncio.start_server(server.serve, "127.0.0.1", 0)
    port = listening.sockets[0].getsockname()[1]
    async with listening:
        with pytest.raises(UpstreamError) as caught:
            await call(transport, port)
    assert caught.value.code == "upstream_disconnected"
    assert server.requests == 1


async def test_a_refused_connection_is_not_retried(transport: HttpTransport) -> None:
    listening = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = listening.sockets[0].getsockname()[1]
    listening.close()
    await listening.wait_closed()
    with pytest.raises(UpstreamError) as caught:
        await call(transport, port)
    assert caught.value.code == "upstream_connect_failed"
