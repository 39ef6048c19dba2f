"""A client that goes away stops the upstream call at once, in every phase
(docs/api.md#credits-and-cancellation)."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from pathlib import Path

import pytest
from openai import AsyncOpenAI

from tests.support.fake_openai import chunk
from tests.support.fake_upstream import FakeUpstream, Pause, Reply, Step
from tests.support.gateway import openai_connection_toml, running_gateway
from tests.support.raw_http import RawClient, post

BODY = json.dumps(
    {"model": "test/gpt-fake", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
).encode()
SERVER = "[server]\nport = 0\nsse_keepalive_interval = 0\n"


def slow_stream(chunks: int = 200, pause: float = 0.05) -> list[Step]:
    steps: list[Step] = [chunk(role="assistant", content="")]
    for i in range(chunks):
        steps += [chunk(content=f"token{i} "), Pause(pause)]
    return steps


async def read_until_content(client: RawClient) -> None:
    status, _ = await client.read_head()
    assert status == 200
    seen = b""
    while b'"content":"token' not in seen:
        piece = await client.read_chunk()
        assert piece is not None
        seen += piece


async def test_disconnect_mid_stream_closes_the_upstream(
    tmp_path: Path, fake: FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "sluice.access")
    fake.queue(Reply.stream(*slow_stream()))
    async with running_gateway(tmp_path, SERVER + openai_connection_toml(fake.base_url)) as gw:
        assert gw.dev_key is not None
        client = await RawClient.connect(gw.host, gw.port)
        await client.send(post("/v1/chat/completions", BODY, gw.dev_key.key))
        await read_until_content(client)
        await client.close()
        await asyncio.wait_for(fake.hung_up.wait(), 2)
        await asyncio.sleep(0.05)
    assert fake.closed_streams == 0  # the upstream never got to finish
    lines = [r.getMessage() for r in caplog.records if r.name == "sluice.access"]
    assert any(" 499" in line for line in lines)


async def test_disconnect_while_waiting_for_the_first_upstream_byte(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.queue(Reply.stream(*slow_stream(), delay=10))
    async with running_gateway(tmp_path, SERVER + openai_connection_toml(fake.base_url)) as gw:
        assert gw.dev_key is not None
        client = await RawClient.connect(gw.host, gw.port)
        await client.send(post("/v1/chat/completions", BODY, gw.dev_key.key))
        while not fake.requests:
            await asyncio.sleep(0.01)
        await client.close()
        await asyncio.wait_for(fake.hung_up.wait(), 2)


async def test_disconnect_while_blocked_writing_to_a_slow_client(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    piece = chunk(content="x" * 4000)
    steps: list[Step] = [chunk(role="assistant", content="")]
    steps += [piece] * 10_000  # 40 MB, as fast as the gateway takes it
    fake.queue(Reply.stream(*steps))
    async with running_gateway(tmp_path, SERVER + openai_connection_toml(fake.base_url)) as gw:
        assert gw.dev_key is not None
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, (gw.host, gw.port))
        reader, writer = await asyncio.open_connection(sock=sock)
        writer.write(post("/v1/chat/completions", BODY, gw.dev_key.key))
        await writer.drain()
        sent = -1
        while sent != fake.sent_bytes:  # wait until nobody moves: the gateway is blocked
            sent = fake.sent_bytes
            await asyncio.sleep(0.3)
        # backpressure reached the upstream (what left it fits in the kernels' socket buffers)
        assert 0 < fake.sent_bytes < 20_000_000
        writer.transport.abort()
        await asyncio.wait_for(fake.hung_up.wait(), 2)
        del reader


async def test_closing_the_sdk_iterator_cancels(tmp_path: Path, fake: FakeUpstream) -> None:
    fake.queue(Reply.stream(*slow_stream()))
    async with running_gateway(tmp_path, SERVER + openai_connection_toml(fake.base_url)) as gw:
        assert gw.dev_key is not None
        async with AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=gw.dev_key.key) as sdk:
            stream = await sdk.chat.completions.create(
                model="test/gpt-fake", messages=[{"role": "user", "content": "hi"}], stream=True
            )
            async for c in stream:
                if c.choices and c.choices[0].delta.content:
                    break
            await stream.close()
            await asyncio.wait_for(fake.hung_up.wait(), 2)


async def test_the_gateway_still_serves_after_cancellations(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    for _ in range(5):
        fake.queue(Reply.stream(*slow_stream()))
    async with running_gateway(tmp_path, SERVER + openai_connection_toml(fake.base_url)) as gw:
        assert gw.dev_key is not None
        for _ in range(5):
            client = await RawClient.connect(gw.host, gw.port)
            await client.send(post("/v1/chat/completions", BODY, gw.dev_key.key))
            await read_until_content(client)
            await client.close()
        fake.default = Reply.stream(
            chunk(role="assistant", content=""),
            chunk(content="ok"),
            chunk(finish="stop"),
            b"data: [DONE]\n\n",
        )
        client = await RawClient.connect(gw.host, gw.port)
        await client.send(post("/v1/chat/completions", BODY, gw.dev_key.key))
        resp = await client.read_response()
        await client.close()
    assert resp.status == 200 and resp.body.endswith(b"data: [DONE]\n\n")
    assert len(fake.hangups) == 5


def big_stream(n: int = 10_000) -> list[Step]:
    piece = chunk(content="z" * 4000)
    return [
        chunk(role="assistant", content=""),
        *([piece] * n),
        chunk(finish="stop"),
        b"data: [DONE]\n\n",
    ]


async def slow_socket(host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, (host, port))
    return await asyncio.open_connection(sock=sock)


async def test_a_slow_reader_is_not_mistaken_for_a_stalled_provider(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.queue(Reply.stream(*big_stream(2_000)))
    config = SERVER + openai_connection_toml(fake.base_url, timeouts="stall = 0.5")
    async with running_gateway(tmp_path, config) as gw:
        assert gw.dev_key is not None
        reader, writer = await slow_socket(gw.host, gw.port)
        writer.write(post("/v1/chat/completions", BODY, gw.dev_key.key))
        await writer.drain()
        await reader.readexactly(100)
        await asyncio.sleep(2.0)  # not reading for four stall periods
        tail = b""
        async with asyncio.timeout(30):
            while not tail.endswith(b"\r\n0\r\n\r\n"):  # the end of the chunked body
                data = await reader.read(1 << 16)
                assert data, "the gateway closed the stream"
                assert b"stream_stalled" not in tail + data
                tail = (tail + data)[-64:]
        writer.close()
    assert tail.endswith(b"data: [DONE]\n\n\r\n0\r\n\r\n")


async def test_a_client_that_never_reads_is_cut_off(tmp_path: Path, fake: FakeUpstream) -> None:
    fake.queue(Reply.stream(*big_stream()))
    config = SERVER.replace("port = 0\n", "port = 0\nclient_write_timeout = 0.5\n")
    async with running_gateway(tmp_path, config + openai_connection_toml(fake.base_url)) as gw:
        assert gw.dev_key is not None
        reader, writer = await slow_socket(gw.host, gw.port)
        writer.write(post("/v1/chat/completions", BODY, gw.dev_key.key))
        await writer.drain()
        await asyncio.wait_for(fake.hung_up.wait(), 10)  # the upstream call was closed
        writer.close()
        del reader
