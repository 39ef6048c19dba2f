"""The Messages door rides the same exchange as chat completions: an output guardrail
holds back and blocks with the Messages error event, a client that leaves cancels the
upstream and refunds its hold, the credit hold and charge are the chat door's, and
ping events keep a slow first token alive."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import anthropic
import pytest
from anthropic import AsyncAnthropic

from sluice.server.lifecycle import RunningGateway
from tests.server.test_cancellation import slow_stream
from tests.server.test_guardrails import KEY, NO_KEYS, THREE_CHUNKS, rail
from tests.support.accounts import metered_key, settled
from tests.support.fake_openai import text_stream
from tests.support.fake_upstream import FakeUpstream, Pause, Reply
from tests.support.gateway import openai_connection_toml, running_gateway
from tests.support.raw_http import RawClient, exchange, get, post

USD = 10**9
USAGE = {"prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500}


def body(**extra: object) -> bytes:
    doc = {
        "model": "test/gpt-fake",
        "max_tokens": 1000,
        "messages": [{"role": "user", "content": "hi"}],
    }
    return json.dumps({**doc, **extra}).encode()


def as_messages(key: str) -> str:
    return f"x-api-key: {key}\r\n"


async def row(gw: RunningGateway, request_id: str, key: str) -> dict[str, Any]:
    await settled(gw.gateway)
    answer = await exchange(gw.host, gw.port, get(f"/v1/requests/{request_id}", key))
    found: dict[str, Any] = answer.json()
    return found


async def test_an_output_guardrail_blocks_with_the_messages_error_event(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.queue(Reply.stream(*text_stream(*THREE_CHUNKS)))
    config = openai_connection_toml(fake.base_url) + rail("no-secrets", **NO_KEYS)
    seen: list[str] = []
    async with running_gateway(tmp_path, config) as gw:
        assert gw.dev_key is not None
        client = AsyncAnthropic(base_url=gw.base_url, api_key=gw.dev_key.key, max_retries=0)
        async with client:
            with pytest.raises(anthropic.APIStatusError) as info:
                async with client.messages.stream(
                    model="test/gpt-fake",
                    max_tokens=100,
                    messages=[{"role": "user", "content": "key?"}],
                ) as stream:
                    async for text in stream.text_stream:
                        seen.append(text)
    assert "".join(seen) == "The key is "
    error: Any = info.value.body
    assert error["type"] == "error"
    assert (error["error"]["type"], error["error"]["code"]) == (
        "invalid_request_error",
        "guardrail_blocked",
    )
    assert KEY not in json.dumps(error)


async def test_a_client_that_leaves_cancels_the_upstream_and_its_hold_is_refunded(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.queue(Reply.stream(*slow_stream()))
    server = "[server]\nport = 0\nsse_keepalive_interval = 0\n"
    async with running_gateway(tmp_path, server + openai_connection_toml(fake.base_url)) as gw:
        key = await metered_key(gw.gateway.store, "team", USD)
        client = await RawClient.connect(gw.host, gw.port)
        await client.send(post("/v1/messages", body(stream=True), None, extra=as_messages(key)))
        status, _ = await client.read_head()
        seen = b""
        while b'"text":"token' not in seen:
            piece = await client.read_chunk()
            assert piece is not None
            seen += piece
        await client.close()
        await asyncio.wait_for(fake.hung_up.wait(), 2)
        request_id = seen.split(b'"id":"', 1)[1].split(b'"', 1)[0].decode()
        logged = await row(gw, request_id, key)
        account = await gw.gateway.store.get_account("team")
    assert status == 200 and fake.closed_streams == 0
    assert (logged["status"], logged["disconnect"], logged["front_door"]) == (
        "cancelled",
        "cancel",
        "messages",
    )
    assert account is not None and account.held == 0
    assert account.balance == USD - round(logged["credits_charged"] * USD)


async def test_a_metered_answer_is_held_charged_and_reports_credits(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.queue(Reply.stream(*text_stream("Hi", usage=USAGE)))
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        key = await metered_key(gw.gateway.store, "team", USD)
        reply = await exchange(
            gw.host, gw.port, post("/v1/messages", body(stream=True), None, extra=as_messages(key))
        )
        await settled(gw.gateway)
        account = await gw.gateway.store.get_account("team")
        assert await gw.gateway.store.reconcile() == []
    events = [e for e in reply.body.split(b"\n\n") if e.startswith(b"event: message_delta")]
    usage = json.loads(events[0].split(b"data: ", 1)[1])["usage"]
    assert account is not None and account.held == 0
    assert usage["credits_used"] == (USD - account.balance) / USD > 0
    assert (usage["input_tokens"], usage["output_tokens"]) == (1000, 500)


async def test_pings_keep_a_slow_first_token_alive(tmp_path: Path, fake: FakeUpstream) -> None:
    fake.queue(Reply.stream(Pause(0.35), *text_stream("late")))
    server = "[server]\nport = 0\nsse_keepalive_interval = 0.1\n"
    async with running_gateway(tmp_path, server + openai_connection_toml(fake.base_url)) as gw:
        assert gw.dev_key is not None
        reply = await exchange(
            gw.host,
            gw.port,
            post("/v1/messages", body(stream=True), None, extra=as_messages(gw.dev_key.key)),
        )
    events = [e for e in reply.body.split(b"\n\n") if e]
    pings = [e for e in events if e == b'event: ping\ndata: {"type":"ping"}']
    assert len(pings) >= 2
    assert events.index(pings[-1]) < events.index(next(e for e in events if b"message_start" in e))
