"""A slow reader must not make the gateway buffer the upstream without bound."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

from tests.support.fake_openai import chunk, text_stream
from tests.support.fake_upstream import FakeUpstream, Reply, Step
from tests.support.gateway import openai_connection_toml
from tests.support.process import gateway_process
from tests.support.raw_http import exchange, post

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
