"""Stopping the gateway: within the grace period responses finish; past it each live
response ends with ``server_shutting_down``, is settled for what it produced, and is
logged as ``shutdown`` (issue 10, finding 6)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

from sluice.config import parse_config
from sluice.server.lifecycle import start_gateway, stop_gateway
from sluice.settings import build_settings
from sluice.storage.factory import open_store
from sluice.storage.sqlite import SqliteStore
from tests.support.accounts import metered_key
from tests.support.fake_openai import DONE, chunk, completion, text_stream
from tests.support.fake_upstream import FakeUpstream, Pause, Reply, Step
from tests.support.gateway import UPSTREAM_KEY, openai_connection_toml
from tests.support.process import gateway_process
from tests.support.raw_http import RawClient, post

USD = 10**9
STREAM = json.dumps(
    {
        "model": "test/gpt-fake",
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": 500,
        "messages": [{"role": "user", "content": "talk for a long time"}],
    }
).encode()
WHOLE = json.dumps(
    {"model": "test/gpt-fake", "messages": [{"role": "user", "content": "answer slowly"}]}
).encode()


def endless(pieces: int) -> list[Step]:
    steps: list[Step] = [chunk(role="assistant", content="")]
    for _ in range(pieces):
        steps += [chunk(content="word "), Pause(0.01)]
    return [*steps, Pause(60)]


async def rest_of(client: RawClient) -> bytes:
    body = b""
    while (piece := await client.read_chunk()) is not None:
        body += piece
    return body


async def test_past_the_grace_period_streams_end_with_the_error_and_are_logged_shutdown(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    late = Reply.json(completion("late"))
    late.delay = 60
    fake.queue(Reply.stream(*endless(5)), late)
    config = "[server]\nport = 0\nshutdown_grace = 0.3\n" + openai_connection_toml(fake.base_url)
    settings = build_settings(parse_config(config), {"FAKE_UPSTREAM_KEY": UPSTREAM_KEY}, tmp_path)
    running = await start_gateway(settings)
    key = await metered_key(running.gateway.store, "team", USD)
    streaming = await RawClient.connect(running.host, running.port)
    await streaming.send(post("/v1/chat/completions", STREAM, key))
    status, _ = await streaming.read_head()
    first = await streaming.read_chunk()
    waiting = await RawClient.connect(running.host, running.port)
    await waiting.send(post("/v1/chat/completions", WHOLE, key))
    await asyncio.sleep(0.2)  # both requests are upstream now
    loop = asyncio.get_running_loop()
    started = loop.time()
    await stop_gateway(running, grace=settings.server.shutdown_grace)
    took = loop.time() - started
    rest = await rest_of(streaming)
    whole = await waiting.read_response()
    await streaming.close()
    await waiting.close()
    store = await open_store(settings.storage_url)
    try:
        assert isinstance(store, SqliteStore)
        rows = [
            await store.get_request(str(r[0]), "acct_team")
            for r in await store.all("SELECT request_id FROM holds ORDER BY created_at")
        ]
        account = await store.get_account("team")
        mismatches = await store.reconcile()
    finally:
        await store.close()
    assert status == 200 and first is not None
    last = json.loads(rest.strip().split(b"\n\n")[-1].removeprefix(b"data: "))
    assert last["error"] == {
        "message": "The gateway is shutting down.",
        "type": "server_error",
        "code": "server_shutting_down",
    }
    assert last["usage"]["completion_tokens"] > 0  # what the cut stream cost
    assert b"[DONE]" not in rest
    assert whole.status == 503 and whole.headers["retry-after"] == "1"
    assert whole.json()["error"]["code"] == "server_shutting_down"
    assert [(r.status, r.disconnect) for r in rows if r is not None] == [
        ("shutdown", None),
        ("shutdown", None),
    ]
    assert account is not None and account.held == 0 and account.balance < USD
    assert mismatches == []
    assert 0.3 <= took < 3.0


async def test_within_the_grace_period_a_stream_finishes(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    steps = text_stream("one", " two", " three")
    fake.queue(Reply.stream(steps[0], Pause(0.3), *steps[1:]))
    config = "[server]\nport = 0\n" + openai_connection_toml(fake.base_url)
    settings = build_settings(parse_config(config), {"FAKE_UPSTREAM_KEY": UPSTREAM_KEY}, tmp_path)
    running = await start_gateway(settings)
    assert running.dev_key is not None
    client = await RawClient.connect(running.host, running.port)
    await client.send(post("/v1/chat/completions", STREAM, running.dev_key.key))
    await client.read_head()
    await asyncio.sleep(0.1)
    await stop_gateway(running, grace=2.0)
    rest = await rest_of(client)
    await client.close()
    assert rest.endswith(b"data: [DONE]\n\n")


async def test_sigterm_past_the_configured_grace_sends_the_error_event(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.queue(Reply.stream(*endless(3)))
    config = "[server]\nshutdown_grace = 0.2\n" + openai_connection_toml(fake.base_url)
    async with gateway_process(tmp_path, config) as gw:
        client = await RawClient.connect(gw.host, gw.port)
        await client.send(post("/v1/chat/completions", STREAM, gw.key))
        await client.read_head()
        await client.read_chunk()
        os.kill(gw.pid, signal.SIGTERM)
        rest = await asyncio.wait_for(rest_of(client), 5)
        await client.close()
    assert b'"code":"server_shutting_down"' in rest
    assert DONE not in rest
