"""A slow reader must not make the gateway buffer the upstream without bound, and
hostile uploads are refused early instead of slowing everyone (load shedding)."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

from tests.support.fake_openai import chunk, text_stream
from tests.support.fake_upstream import FakeUpstream, Reply, Step, WaitFor
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
        await first.send(head(key, 200_000) + b" " * 199_999)  # holds what it sent
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


async def test_with_the_defaults_the_257th_body_at_once_is_refused(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    """256 uploads that trickle hold every slot: the next is a 503 on its head alone,
    and the slots come back when they end (the default config, no shedding settings)."""
    fake.default = Reply.stream(*text_stream("ok"))
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        assert gw.dev_key is not None
        key = gw.dev_key.key
        slow = [await RawClient.connect(gw.host, gw.port) for _ in range(256)]
        for client in slow:
            await client.send(head(key, 1000) + b"{")
        await asyncio.sleep(0.2)
        extra = await RawClient.connect(gw.host, gw.port)
        await extra.send(head(key, len(BODY)))
        status, headers = await asyncio.wait_for(extra.read_head(), 2)
        for client in slow:
            await client.close()
        await extra.close()
        await asyncio.sleep(0.2)
        after = await exchange(gw.host, gw.port, post("/v1/chat/completions", BODY, key))
    assert (status, headers["retry-after"]) == (503, "1")
    assert after.status == 200


async def test_a_declared_length_never_sent_costs_nothing(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    """Bytes are counted as they arrive: liars declaring big bodies cannot lock others out."""
    fake.default = Reply.stream(*text_stream("ok"))
    config = shedding_config(fake, 64, 300_000, 200_000)
    async with running_gateway(tmp_path, config) as gw:
        assert gw.dev_key is not None
        key = gw.dev_key.key
        liars = [await RawClient.connect(gw.host, gw.port) for _ in range(4)]
        for client in liars:
            await client.send(head(key, 200_000) + b"{")
        await asyncio.sleep(0.1)
        served = await exchange(gw.host, gw.port, post("/v1/chat/completions", BODY, key))
        for client in liars:
            await client.close()
    assert served.status == 200


async def test_a_body_counts_until_its_request_ends(tmp_path: Path, fake: FakeUpstream) -> None:
    release = asyncio.Event()
    steps = text_stream("ok")
    fake.queue(Reply.stream(steps[0], WaitFor(release), *steps[1:]))
    fake.default = Reply.stream(*text_stream("ok"))
    config = shedding_config(fake, 64, 300_000, 200_000)
    big = json.loads(BODY)
    big["messages"][0]["content"] = "x" * 150_000
    body = json.dumps(big).encode()
    async with running_gateway(tmp_path, config) as gw:
        assert gw.dev_key is not None
        key = gw.dev_key.key
        first = await RawClient.connect(gw.host, gw.port)
        await first.send(post("/v1/chat/completions", body, key))
        while not fake.requests:  # being served: its 150 kB still count
            await asyncio.sleep(0.01)
        second = await exchange(gw.host, gw.port, post("/v1/chat/completions", body, key))
        release.set()
        done = await first.read_response()
        await first.close()
        await asyncio.sleep(0.05)
        third = await exchange(gw.host, gw.port, post("/v1/chat/completions", body, key))
    assert second.status == 503
    assert done.status == 200 and third.status == 200


async def test_large_uploads_leave_room_for_ordinary_requests(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    """Bodies over 1 MiB may fill 7/8 of the bytes; the last 1/8 stays for small ones."""
    fake.default = Reply.stream(*text_stream("ok"))
    config = shedding_config(fake, 64, 8 * MIB, 4 * MIB)
    async with running_gateway(tmp_path, config) as gw:
        assert gw.dev_key is not None
        key = gw.dev_key.key
        uploads = [await RawClient.connect(gw.host, gw.port) for _ in range(2)]
        for client in uploads:  # 6.8 MiB held in all, still arriving
            await client.send(head(key, 3 * MIB + MIB // 2) + b" " * (3 * MIB + MIB // 2 - 100_000))
        await asyncio.sleep(0.2)
        third = await RawClient.connect(gw.host, gw.port)
        await third.send(head(key, 11 * MIB // 10))  # would fit in 8 MiB, not in 7
        third_status, _ = await asyncio.wait_for(third.read_head(), 2)
        small = await exchange(gw.host, gw.port, post("/v1/chat/completions", BODY, key))
        for client in [*uploads, third]:
            await client.close()
    assert third_status == 503
    assert small.status == 200
