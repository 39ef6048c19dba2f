"""``SIGHUP`` on a real ``sluice serve`` process (issue 12): under load the route table
changes for the next request while every stream in flight ends on the config it
started with; a broken file is logged with its reason and the old config serves on."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

from tests.support.fake_openai import DONE, chunk, openai_default
from tests.support.fake_upstream import FakeUpstream, Reply, WaitFor
from tests.support.gateway import UPSTREAM_KEY
from tests.support.process import GatewayProcess, gateway_process
from tests.support.raw_http import RawClient, exchange, post

STREAMS = 50
ENV = {"FAKE_UPSTREAM_KEY": UPSTREAM_KEY}


def connection(conn_id: str, upstream: FakeUpstream) -> str:
    return f"""
[[connections]]
id = "{conn_id}"
provider = "openai-compatible"
base_url = "{upstream.base_url}"
api_key_env = "FAKE_UPSTREAM_KEY"
"""


def config_a(a: FakeUpstream) -> str:
    return (
        connection("conn_a", a)
        + """
[[models]]
id = "test/a"
providers = { conn_a = "gpt-a" }

[[routes]]
name = "chat"
chain = [ { model = "test/a" } ]
"""
    )


def config_b(a: FakeUpstream, b: FakeUpstream) -> str:
    """``chat`` moved to a new model on a new connection."""
    return (
        connection("conn_a", a)
        + connection("conn_b", b)
        + """
[[models]]
id = "test/a"
providers = { conn_a = "gpt-a" }

[[models]]
id = "test/b"
providers = { conn_b = "gpt-b" }

[[routes]]
name = "chat"
chain = [ { model = "test/b" } ]
"""
    )


def chat_request(gw: GatewayProcess) -> bytes:
    body = {"model": "chat", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    return post("/v1/chat/completions", json.dumps(body).encode(), gw.key)


async def rest_of(client: RawClient) -> bytes:
    body = b""
    while (piece := await client.read_chunk()) is not None:
        body += piece
    await client.close()
    return body


async def open_stream(gw: GatewayProcess) -> RawClient:
    """A stream to ``chat`` whose first event has arrived (so its exchange is running)."""
    client = await RawClient.connect(gw.host, gw.port)
    await client.send(chat_request(gw))
    status, _ = await client.read_head()
    assert status == 200
    assert await client.read_chunk()
    return client


async def sighup(gw: GatewayProcess, text: str, expect: str) -> str:
    """Write the config file, send ``SIGHUP``, return the log line that says ``expect``."""
    await asyncio.to_thread(gw.config.write_text, text)
    mark = gw.log.mark()
    os.kill(gw.pid, signal.SIGHUP)
    async with asyncio.timeout(10):
        return await gw.log.wait_for(expect, since=mark)


async def test_reload_under_load_streams_finish_and_new_requests_take_the_new_route(
    tmp_path: Path,
) -> None:
    a, b = FakeUpstream(), openai_default(FakeUpstream())
    release = asyncio.Event()
    held = [chunk(role="assistant", content=""), chunk(content="old ")]
    a.default = Reply.stream(
        *held, WaitFor(release), chunk(content="config"), chunk(finish="stop"), DONE
    )
    await a.start()
    await b.start()
    try:
        async with (
            asyncio.timeout(30),
            gateway_process(tmp_path, config_a(a), env=ENV, log_level="INFO") as gw,
        ):
            streams = await asyncio.gather(*(open_stream(gw) for _ in range(STREAMS)))
            line = await sighup(gw, config_b(a, b), "config reloaded")
            after = await exchange(gw.host, gw.port, chat_request(gw))
            assert len(a.requests) == STREAMS  # nothing new went to the old connection
            release.set()
            rests = await asyncio.gather(*(rest_of(s) for s in streams))
    finally:
        await a.close()
        await b.close()
    assert "connections, models, routes" in line
    assert [r.json()["model"] for r in a.requests] == ["gpt-a"] * STREAMS
    assert [r.json()["model"] for r in b.requests] == ["gpt-b"]
    assert after.status == 200 and after.body.endswith(b"data: [DONE]\n\n")
    for rest in rests:
        assert rest.endswith(b"data: [DONE]\n\n")
        assert b'"content":"config"' in rest and b'"error"' not in rest


async def test_a_broken_file_on_sighup_is_logged_and_the_old_config_serves(
    tmp_path: Path,
) -> None:
    a = openai_default(FakeUpstream())
    await a.start()
    try:
        async with gateway_process(tmp_path, config_a(a), env=ENV, log_level="INFO") as gw:
            unknown = config_a(a).replace('model = "test/a"', 'model = "test/gone"')
            refused = await sighup(gw, unknown, "refused")
            syntax = await sighup(gw, config_a(a) + "[[routes]\n", "refused")
            served = await exchange(gw.host, gw.port, chat_request(gw))
            fixed = await sighup(gw, config_a(a), "config reloaded")
    finally:
        await a.close()
    assert "the running config is kept: route 'chat': unknown model 'test/gone'" in refused
    assert "ERROR sluice.server" in refused
    assert "at the end of an array declaration" in syntax
    assert served.status == 200 and served.body.endswith(b"data: [DONE]\n\n")
    assert [r.json()["model"] for r in a.requests] == ["gpt-a"]
    assert "nothing changed" in fixed  # the running config was the file's last good one
