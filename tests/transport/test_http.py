"""The upstream HTTP client against a raw server: the stale keep-alive race."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from sluice.config import Timeouts
from sluice.errors import UpstreamError
from sluice.providers.base import UpstreamRequest
from sluice.transport.http import HttpTransport

ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


class Server:
    """Answers ``answers[i]`` requests on its i-th connection, then closes it on the
    next request without a word: a keep-alive connection the server timed out just as
    the client reused it."""

    def __init__(self, answers: list[int]) -> None:
        self.answers = answers
        self.connections = 0
        self.requests = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        index = self.connections
        self.connections += 1
        budget = self.answers[index] if index < len(self.answers) else 1 << 30
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
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
        except asyncio.IncompleteReadError:
            return
        finally:
            writer.close()


@pytest.fixture
async def transport() -> AsyncIterator[HttpTransport]:
    client = HttpTransport("sluice-test", time.monotonic, allow_private_upstreams=True)
    await client.start()
    yield client
    await client.close()


async def call(transport: HttpTransport, port: int) -> int:
    req = UpstreamRequest(
        "POST", f"http://127.0.0.1:{port}/v1/chat/completions", {}, b'{"a":1}', False
    )
    resp = await transport.send(req, Timeouts())
    await resp.read_body(1 << 20)
    resp.release()
    return resp.status


async def test_a_pooled_connection_the_upstream_dropped_is_tried_once_more(
    transport: HttpTransport,
) -> None:
    server = Server(answers=[1])
    listening = await asyncio.start_server(server.serve, "127.0.0.1", 0)
    port = listening.sockets[0].getsockname()[1]
    async with listening:
        assert await call(transport, port) == 200
        assert await call(transport, port) == 200  # the pooled one is dropped: a new one
    assert (server.connections, server.requests) == (2, 3)


async def test_a_second_drop_is_an_error_not_a_third_try(transport: HttpTransport) -> None:
    server = Server(answers=[1, 0, 0])
    listening = await asyncio.start_server(server.serve, "127.0.0.1", 0)
    port = listening.sockets[0].getsockname()[1]
    async with listening:
        assert await call(transport, port) == 200
        with pytest.raises(UpstreamError) as caught:
            await call(transport, port)
    assert caught.value.code == "upstream_disconnected"
    assert server.requests == 3  # one answered, then the pooled try and one more


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
