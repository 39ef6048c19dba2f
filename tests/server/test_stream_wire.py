"""The stream on the wire, byte for byte: framing, flushing, endings, HTTP/1.1 details."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from sluice.server.lifecycle import RunningGateway
from tests.support.fake_openai import DONE, chunk, text_stream
from tests.support.fake_upstream import Cut, FakeUpstream, Pause, Reply, WaitFor
from tests.support.gateway import FIXED_TIME, openai_connection_toml, running_gateway
from tests.support.raw_http import RawClient, exchange, post

USAGE = {"prompt_tokens": 7, "completion_tokens": 1, "total_tokens": 8}


def body(**fields: object) -> bytes:
    doc = {"model": "test/gpt-fake", "messages": [{"role": "user", "content": "hi"}], **fields}
    return json.dumps(doc).encode()


def key(gw: RunningGateway) -> str:
    assert gw.dev_key is not None
    return gw.dev_key.key


def events(raw: bytes) -> list[bytes]:
    assert raw.endswith(b"\n\n")
    return raw[:-2].split(b"\n\n")


async def test_exact_sse_bytes(tmp_path: Path, fake: FakeUpstream) -> None:
    fake.queue(Reply.stream(*text_stream("Hi", usage=USAGE)))
    config = openai_connection_toml(fake.base_url)
    async with running_gateway(tmp_path, config, deterministic=True) as gw:
        resp = await exchange(
            gw.host,
            gw.port,
            post(
                "/v1/chat/completions",
                body(stream=True, stream_options={"include_usage": True}),
                key(gw),
            ),
        )
    assert resp.status == 200
    rid = resp.headers["x-request-id"]
    assert rid == "req_000003"  # after the dev account and key
    assert resp.headers["content-type"] == "text/event-stream"
    assert resp.headers["cache-control"] == "no-cache"
    assert resp.headers["x-accel-buffering"] == "no"
    assert resp.headers["transfer-encoding"] == "chunked"
    head = (
        b'{"id":"req_000003","object":"chat.completion.chunk","created":%d,'
        b'"model":"test/gpt-fake","provider":"openai-compatible","connection":"conn_fake",'
        b'"route":"primary","route_name":null,"choices":' % FIXED_TIME
    )
    assert resp.body == (
        b"data: " + head + b'[{"index":0,"delta":{"role":"assistant","content":""},'
        b'"finish_reason":null}]}\n\n'
        b"data: " + head + b'[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}\n\n'
        b"data: " + head + b'[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
        b"data: " + head + b'[],"usage":{"prompt_tokens":7,"completion_tokens":1,'
        b'"total_tokens":8,"prompt_tokens_details":{"cached_tokens":0},'
        b'"completion_tokens_details":{"reasoning_tokens":0},"cost":0.000022,'
        b'"price_source":"list"}}\n\n'
        b"data: [DONE]\n\n"
    )
    assert all(piece.endswith(b"\n\n") for piece in resp.chunks)  # events never split


async def test_without_include_usage_there_is_no_usage_chunk(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.queue(Reply.stream(*text_stream("a", "b", usage=USAGE)))
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        resp = await exchange(
            gw.host, gw.port, post("/v1/chat/completions", body(stream=True), key(gw))
        )
    evs = events(resp.body)
    assert evs[-1] == b"data: [DONE]"
    assert all(b'"usage"' not in e for e in evs)
    assert len(evs) == 5  # role, a, b, finish, [DONE]


async def test_each_event_is_flushed_while_the_upstream_holds_the_next(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    release = asyncio.Event()
    fake.queue(
        Reply.stream(
            chunk(role="assistant", content=""),
            chunk(content="first"),
            WaitFor(release),
            chunk(content="second"),
            chunk(finish="stop"),
            DONE,
        )
    )
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        client = await RawClient.connect(gw.host, gw.port)
        try:
            await client.send(post("/v1/chat/completions", body(stream=True), key(gw)))
            status, _ = await asyncio.wait_for(client.read_head(), 5)
            assert status == 200
            received = b""
            # "first" must arrive while the upstream holds "second" back until release is
            # set below: a gateway that buffered would time out here
            while b'"first"' not in received:
                piece = await asyncio.wait_for(client.read_chunk(), 5)
                assert piece is not None
                received += piece
            release.set()
            rest = b""
            while (piece := await asyncio.wait_for(client.read_chunk(), 5)) is not None:
                rest += piece
            assert b'"second"' in rest and rest.endswith(b"data: [DONE]\n\n")
        finally:
            await client.close()


async def test_mid_stream_failure_sends_error_event_without_done_and_closes(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.queue(
        Reply.stream(
            chunk(role="assistant", content=""),
            chunk(content="one "),
            chunk(content="two "),
            chunk(content="three"),
            Cut(),
        )
    )
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        client = await RawClient.connect(gw.host, gw.port)
        try:
            await client.send(
                post(
                    "/v1/chat/completions",
                    body(stream=True, stream_options={"include_usage": True}),
                    key(gw),
                )
            )
            resp = await client.read_response()
            assert await client.at_eof()
        finally:
            await client.close()
    evs = events(resp.body)
    assert b"[DONE]" not in resp.body
    error = json.loads(evs[-1].removeprefix(b"data: "))
    assert error["error"] == {
        "message": "The response stream ended before it completed.",
        "type": "upstream_error",
        "code": "upstream_disconnected",
    }
    usage = error["usage"]  # what the cut stream cost: 13 characters streamed, estimated
    assert usage["completion_tokens"] == 4 and usage["prompt_tokens"] > 0
    assert usage["cost"] > 0 and usage["price_source"] == "list"
    text = "".join(
        json.loads(e.removeprefix(b"data: "))["choices"][0]["delta"].get("content", "")
        for e in evs[:-1]
    )
    assert text == "one two three"


async def test_failure_before_the_first_content_is_a_plain_http_error(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.queue(Reply.stream(chunk(role="assistant", content=""), Cut()))
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        resp = await exchange(
            gw.host, gw.port, post("/v1/chat/completions", body(stream=True), key(gw))
        )
    assert resp.status == 502
    assert resp.json()["error"]["type"] == "upstream_error"
    assert resp.headers["x-request-id"].startswith("req_")


async def test_keep_alive_and_pipelining(tmp_path: Path, fake: FakeUpstream) -> None:
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        client = await RawClient.connect(gw.host, gw.port)
        try:
            request = post("/v1/chat/completions", body(stream=True), key(gw))
            await client.send(request + request)  # two requests in one write
            first = await client.read_response()
            second = await client.read_response()
            await client.send(request)
            third = await client.read_response()
        finally:
            await client.close()
    ids = {r.headers["x-request-id"] for r in (first, second, third)}
    assert len(ids) == 3
    assert all(
        r.status == 200 and r.body.endswith(b"data: [DONE]\n\n") for r in (first, second, third)
    )


async def test_expect_100_continue(tmp_path: Path, fake: FakeUpstream) -> None:
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        client = await RawClient.connect(gw.host, gw.port)
        try:
            data = body(stream=True)
            request = post("/v1/chat/completions", data, key(gw), extra="Expect: 100-continue\r\n")
            await client.send(request[: -len(data)])
            status, _ = await client.read_head()
            assert status == 100
            await client.send(data)
            resp = await client.read_response()
        finally:
            await client.close()
    assert resp.status == 200 and resp.body.endswith(b"data: [DONE]\n\n")


async def test_http10_stream_is_delimited_by_close(tmp_path: Path, fake: FakeUpstream) -> None:
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        request = post("/v1/chat/completions", body(stream=True), key(gw))
        request = request.replace(b"HTTP/1.1", b"HTTP/1.0", 1)
        resp = await exchange(gw.host, gw.port, request)
    assert resp.status == 200
    assert "transfer-encoding" not in resp.headers
    assert resp.headers["connection"] == "close"
    assert resp.body.endswith(b"data: [DONE]\n\n")


async def test_chunked_request_body(tmp_path: Path, fake: FakeUpstream) -> None:
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        data = body(stream=True)
        head = (
            f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
            f"{key(gw)}\r\nTransfer-Encoding: chunked\r\n\r\n"
        ).encode()
        half = len(data) // 2
        chunked = b"%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n" % (
            half,
            data[:half],
            len(data) - half,
            data[half:],
        )
        resp = await exchange(gw.host, gw.port, head + chunked)
    assert resp.status == 200 and resp.body.endswith(b"data: [DONE]\n\n")


async def test_a_silent_provider_ends_the_stream_as_stalled(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.queue(
        Reply.stream(
            chunk(role="assistant", content=""),
            chunk(content="so far"),
            Pause(3),
            chunk(finish="stop"),
            DONE,
        )
    )
    config = openai_connection_toml(fake.base_url, timeouts="first_event = 0.3, stall = 0.3")
    async with running_gateway(tmp_path, config) as gw:
        resp = await exchange(
            gw.host, gw.port, post("/v1/chat/completions", body(stream=True), key(gw))
        )
    error = json.loads(events(resp.body)[-1].removeprefix(b"data: "))["error"]
    assert (error["type"], error["code"]) == ("request_timeout", "stream_stalled")
    assert b"[DONE]" not in resp.body


async def test_head_sends_the_get_head_without_a_body(tmp_path: Path) -> None:
    async with running_gateway(tmp_path, "[server]\nport = 0\n") as gw:
        client = await RawClient.connect(gw.host, gw.port)
        try:
            await client.send(b"HEAD /health HTTP/1.1\r\nHost: x\r\n\r\n")
            head_status, head_headers = await client.read_head()
            await client.send(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            got = await client.read_response()  # garbled if the HEAD answer carried a body
            await client.send(b"HEAD /v1/chat/completions HTTP/1.1\r\nHost: x\r\n\r\n")
            refused_status, refused_headers = await client.read_head()
            await client.send(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            again = await client.read_response()
        finally:
            await client.close()
    assert head_status == 200 and got.status == 200 and again.status == 200
    assert int(head_headers["content-length"]) == len(got.body) > 0
    assert refused_status == 405 and int(refused_headers["content-length"]) > 0


async def test_http10_with_transfer_encoding_is_answered_then_closed(tmp_path: Path) -> None:
    """RFC 9112 §6.1: that framing is not to be trusted for what follows."""
    async with running_gateway(tmp_path, "[server]\nport = 0\n") as gw:
        client = await RawClient.connect(gw.host, gw.port)
        try:
            await client.send(
                b"POST /health HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
            )
            resp = await client.read_response()
            closed = await client.at_eof(wait=2)
        finally:
            await client.close()
    assert resp.status == 405 and resp.headers["connection"] == "close"
    assert closed
