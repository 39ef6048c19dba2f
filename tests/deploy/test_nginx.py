"""deploy/nginx/sluice.conf, run by the real nginx in front of a real gateway: TLS ends
at nginx, and streams still arrive event by event, with usage, and a client leaving
still cancels the upstream call.

nginx absent: these tests skip, except under ``CI=true``, where they fail (``make test``
installs it: scripts/deps.sh).
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest
from openai import AsyncOpenAI, DefaultAsyncHttpxClient

from tests.support.fake_openai import DONE, chunk, text_stream
from tests.support.fake_upstream import FakeUpstream, Pause, Reply, Step, WaitFor
from tests.support.gateway import openai_connection_toml, running_gateway
from tests.support.nginx import nginx_binary, nginx_in_front
from tests.support.raw_http import RawClient, post

SERVER = "[server]\nport = 0\nsse_keepalive_interval = 0\n"
GZIP = "Accept-Encoding: gzip\r\n"
USAGE = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
BODY = json.dumps(
    {"model": "test/gpt-fake", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
).encode()


async def read_until(client: RawClient, marker: bytes) -> tuple[dict[str, str], bytes]:
    status, headers = await client.read_head()
    assert status == 200
    seen = b""
    while marker not in seen:
        piece = await client.read_chunk()
        assert piece is not None, seen
        seen += piece
    return headers, seen


async def test_events_pass_nginx_one_by_one(tmp_path: Path, fake: FakeUpstream) -> None:
    release = asyncio.Event()
    steps: list[Step] = [chunk(role="assistant", content=""), chunk(content="first")]
    fake.queue(
        Reply.stream(*steps, WaitFor(release), chunk(content="second"), chunk(finish="stop"), DONE)
    )
    config = SERVER + openai_connection_toml(fake.base_url)
    async with (
        running_gateway(tmp_path / "home", config) as gw,
        nginx_in_front(tmp_path, gw.port) as proxy,
    ):
        assert gw.dev_key is not None
        client = await proxy.client()
        await client.send(post("/v1/chat/completions", BODY, gw.dev_key.key, extra=GZIP))
        async with asyncio.timeout(5):  # the upstream still holds the rest: not buffered
            headers, seen = await read_until(client, b'"content":"first"')
        assert b"second" not in seen
        assert "content-encoding" not in headers  # gzip off, even where nginx.conf has it
        assert headers["content-type"].startswith("text/event-stream")
        release.set()
        rest = b""
        while (piece := await client.read_chunk()) is not None:
            rest += piece
        await client.close()
    assert b'"content":"second"' in rest and rest.endswith(DONE)


async def test_the_openai_sdk_streams_with_usage_through_nginx(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.queue(Reply.stream(*text_stream("Hello", " world", usage=USAGE)))
    config = SERVER + openai_connection_toml(fake.base_url)
    async with (
        running_gateway(tmp_path / "home", config) as gw,
        nginx_in_front(tmp_path, gw.port) as proxy,
    ):
        assert gw.dev_key is not None
        http = DefaultAsyncHttpxClient(verify=proxy.tls())
        async with AsyncOpenAI(
            base_url=proxy.base_url + "/v1", api_key=gw.dev_key.key, max_retries=0, http_client=http
        ) as sdk:
            stream = await sdk.chat.completions.create(
                model="test/gpt-fake",
                messages=[{"role": "user", "content": "hi"}],
                stream=True,
                stream_options={"include_usage": True},
            )
            chunks = [c async for c in stream]
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Hello world"
    usage = chunks[-1].usage
    assert usage is not None and (usage.prompt_tokens, usage.completion_tokens) == (10, 2)
    assert fake.requests[0].headers["authorization"] != f"Bearer {gw.dev_key.key}"


async def test_a_client_leaving_nginx_cancels_the_upstream(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    steps: list[Step] = [chunk(role="assistant", content="")]
    for i in range(200):
        steps += [chunk(content=f"token{i} "), Pause(0.05)]
    fake.queue(Reply.stream(*steps))
    config = SERVER + openai_connection_toml(fake.base_url)
    async with (
        running_gateway(tmp_path / "home", config) as gw,
        nginx_in_front(tmp_path, gw.port) as proxy,
    ):
        assert gw.dev_key is not None
        client = await proxy.client()
        await client.send(post("/v1/chat/completions", BODY, gw.dev_key.key))
        await read_until(client, b"token0")
        client.writer.transport.abort()  # the client is gone, mid-stream
        await asyncio.wait_for(fake.hung_up.wait(), 5)
    assert fake.closed_streams == 0  # the upstream never got to finish


def test_missing_nginx_skips_but_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda *_, **__: None)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="nginx is not installed"):
        nginx_binary()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true requires it"):
        nginx_binary()
