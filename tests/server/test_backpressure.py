"""A slow reader must not make the gateway buffer the upstream without bound, and
hostile uploads are refused early instead of slowing everyone (load shedding)."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

from tests.support.fake_openai import chunk, text_stream
from tests.support.fake_upstream import FakeUpstream, Reply, Step
from tests.support.gateway import openai_connection_toml, running_gateway
from tests.support.process import gateway_process
from tests.support.raw_http import RawClient, exchange, post

MIB = 1024 * 1024
BODY = json.dumps(
    {"model": "test/gpt-fake", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
).encode()


async def test_slow_reader_keeps_gateway_memory_bounded(tmp_path: Path, fake: FakeUpstream) -> None:
    fake.queue(Reply.stream(*text_stream("warm", " up")))
    piece = chunk(content="y" * 4000)
    steps: list[Step] = [chunk(role="assistant", content="")]
    steps += [piece] * 2_500  # ~10 MB as fast as the gateway takes it
    fake.queue(Reply.stream(*steps))
    config = "[server]\nsse_keepalive_interval = 0\n" + openai_connection_toml(fake.base_url)
    async with gateway_process(tmp_path / "home", config) as gw:
        warm = await exchange(gw.host, gw.port, post("/v1/chat/completions", BODY, gw.key))
        assert warm.status == 200
        await asyncio.sleep(0.2)
        baseline = gw.rss_bytes()
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, (gw.host, gw.port))
        reader, writer = await asyncio.open_connection(sock=sock, limit=16)
        writer.write(post("/v1/chat/completions", BODY, gw.key))
        await writer.drain()
        peak = baseline
        received = 0
        loop = asyncio.get_running_loop()
        end = loop.time() + 3.0
        while loop.time() < end:  # 1 byte per millisecond
            received += len(await reader.readexactly(1))
            await asyncio.sleep(0.001)
            if received % 100 == 0:
                peak = max(peak, gw.rss_bytes())
        writer.transport.abort()
    growth = peak - baseline
    assert received > 500
    print(
        f"RSS baseline {baseline / MIB:.1f} MiB, growth {growth / MIB:.2f} MiB, "
        f"upstream sent {fake.sent_bytes / MIB:.1f} MiB, client read {received} B"
    )
    assert growth < 4 * MIB, f"gateway RSS grew {growth / MIB:.1f} MiB"


def shedding_config(fake: FakeUpstream, bodies: int, buffered: int, largest: int) -> str:
    return (
        f"[server]\nport = 0\nmax_concurrent_bodies = {bodies}\n"
        f"max_buffered_body_bytes = {buffered}\nmax_body_bytes = {largest}\n"
        + openai_connection_toml(fake.base_url)
    )


def head(key: str, length: int | None) -> bytes:
    framing = f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    return (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n"
        f"Content-Type: application/json\r\n{framing}\r\n\r\n"
    ).encode()


async def test_one_body_too_many_is_refused_before_it_is_read(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.default = Reply.stream(*text_stream("ok"))
    async with running_gateway(tmp_path, shedding_config(fake, 2, 64 * MIB, 16 * MIB)) as gw:
        assert gw.dev_key is not None
        key = gw.dev_key.key
        slow = [await RawClient.connect(gw.host, gw.port) for _ in range(2)]
        for client in slow:  # two uploads that trickle: each holds a body slot
            await client.send(head(key, len(BODY)) + BODY[:10])
        await asyncio.sleep(0.1)
        third = await RawClient.connect(gw.host, gw.port)
        await third.send(head(key, len(BODY)))  # refused on its head alone
        status, headers = await asyncio.wait_for(third.read_head(), 2)
        body = await third.reader.readexactly(int(headers["content-length"]))
        for client in slow:  # the slow ones finish and are served
            await client.send(BODY[10:])
            assert (await client.read_response()).status == 200
        after = await exchange(gw.host, gw.port, post("/v1/chat/completions", BODY, key))
        for client in [*slow, third]:
            await client.close()
    assert (status, headers["retry-after"]) == (503, "1")
    error = json.loads(body)["error"]
    assert (error["type"], error["code"]) == ("service_unavailable", "server_busy")
    assert after.status == 200  # the slots were given back


async def test_the_bytes_of_bodies_in_flight_are_bounded_declared_or_chunked(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.default = Reply.stream(*text_stream("ok"))
    config = shedding_config(fake, 64, 300_000, 200_000)
    async with running_gateway(tmp_path, config) as gw:
        assert gw.dev_key is not None
        key = gw.dev_key.key
        first = await RawClient.connect(gw.host, gw.port)
        await first.send(head(key, 200_000) + b"{")  # holds 200,000 declared bytes
        await asyncio.sleep(0.1)
        declared = await RawClient.connect(gw.host, gw.port)
        await declared.send(head(key, 150_000))
        declared_status, _ = await asyncio.wait_for(declared.read_head(), 2)
        chunked = await RawClient.connect(gw.host, gw.port)
        await chunked.send(head(key, None) + b"%x\r\n%s\r\n" % (50_000, b" " * 50_000))
        await asyncio.sleep(0.1)
        await chunked.send(b"%x\r\n%s\r\n" % (60_000, b" " * 60_000))  # past 300,000 in all
        chunked_status, _ = await asyncio.wait_for(chunked.read_head(), 2)
        small = await exchange(gw.host, gw.port, post("/v1/chat/completions", BODY, key))
        for client in (first, declared, chunked):
            await client.close()
    assert (declared_status, chunked_status) == (503, 503)
    assert small.status == 200  # a small body still fits beside the big one
