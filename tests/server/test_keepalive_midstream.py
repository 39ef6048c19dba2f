"""Keep-alives mid-stream: when the upstream pauses longer than
``sse_keepalive_interval`` after its first event (a reasoning model thinking), the
client still gets a byte every interval or two (proxies cut idle connections near
60-100 s); a stream that never pauses gets none, and none follows the end."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.fake_openai import chunk, text_stream
from tests.support.fake_upstream import FakeUpstream, Pause, Reply
from tests.support.gateway import openai_connection_toml, running_gateway
from tests.support.raw_http import exchange, post

SERVER = "[server]\nport = 0\nsse_keepalive_interval = 0.1\n"
CHAT = json.dumps(
    {"model": "test/gpt-fake", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
).encode()
MESSAGES = json.dumps(
    {
        "model": "test/gpt-fake",
        "stream": True,
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "hi"}],
    }
).encode()
COMMENT = b": keep-alive"
PING = b'event: ping\ndata: {"type":"ping"}'


def _paused(seconds: float) -> Reply:
    rest = text_stream("after", " the pause")[1:]
    return Reply.stream(
        chunk(role="assistant", content=""), chunk(content="before"), Pause(seconds), *rest
    )


async def test_a_pause_mid_stream_gets_keep_alive_comments(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.queue(_paused(0.55))
    async with running_gateway(tmp_path, SERVER + openai_connection_toml(fake.base_url)) as gw:
        assert gw.dev_key is not None
        resp = await exchange(gw.host, gw.port, post("/v1/chat/completions", CHAT, gw.dev_key.key))
    assert resp.status == 200
    events = [e for e in resp.body.split(b"\n\n") if e]
    before = next(i for i, e in enumerate(events) if b'"content":"before"' in e)
    after = next(i for i, e in enumerate(events) if b'"content":"after"' in e)
    between = events[before + 1 : after]
    # 0.55 s of silence at 0.1 s: at least one comment every two intervals
    assert len(between) >= 2 and set(between) == {COMMENT}
    assert events[-1] == b"data: [DONE]" and COMMENT not in events[after:]


async def test_a_stream_without_pauses_gets_none(tmp_path: Path, fake: FakeUpstream) -> None:
    fake.queue(Reply.stream(*text_stream("no", " pause", " at", " all")))
    async with running_gateway(tmp_path, SERVER + openai_connection_toml(fake.base_url)) as gw:
        assert gw.dev_key is not None
        resp = await exchange(gw.host, gw.port, post("/v1/chat/completions", CHAT, gw.dev_key.key))
    assert resp.status == 200 and COMMENT not in resp.body
    assert resp.body.endswith(b"data: [DONE]\n\n")


async def test_the_messages_door_pings_mid_stream(tmp_path: Path, fake: FakeUpstream) -> None:
    fake.queue(_paused(0.45))
    async with running_gateway(tmp_path, SERVER + openai_connection_toml(fake.base_url)) as gw:
        assert gw.dev_key is not None
        extra = f"x-api-key: {gw.dev_key.key}\r\n"
        resp = await exchange(gw.host, gw.port, post("/v1/messages", MESSAGES, None, extra=extra))
    events = [e for e in resp.body.split(b"\n\n") if e]
    before = next(i for i, e in enumerate(events) if b'"text":"before"' in e)
    after = next(i for i, e in enumerate(events) if b'"text":"after"' in e)
    assert len(events[before + 1 : after]) >= 2 and set(events[before + 1 : after]) == {PING}
    assert b"message_stop" in events[-1] and PING not in events[after:]
