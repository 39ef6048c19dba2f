"""Large request bodies: decoded on the gateway's decoding thread, not on the event loop;
small ones on the loop, where a thread hop would cost more than the decoding."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from pathlib import Path

import pytest

from sluice.frontdoors.chat import ChatCompletionsDoor
from sluice.server.intake import Intake
from sluice.wire.chat import ChatRequest
from tests.support.fake_openai import completion
from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.gateway import openai_connection_toml, running_gateway
from tests.support.raw_http import exchange, post

LARGE_BODY_BYTES = Intake.LARGE_BODY_BYTES


def chat(size: int) -> bytes:
    return json.dumps(
        {"model": "test/gpt-fake", "messages": [{"role": "user", "content": "x" * size}]}
    ).encode()


async def test_a_large_body_is_decoded_off_the_event_loop(
    tmp_path: Path, fake: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[str] = []
    decode = ChatCompletionsDoor.decode

    def recorded(
        door: ChatCompletionsDoor, body: bytes | bytearray, headers: Mapping[str, str], depth: int
    ) -> ChatRequest:
        threads.append(threading.current_thread().name)
        return decode(door, body, headers, depth)

    monkeypatch.setattr(ChatCompletionsDoor, "decode", recorded)
    fake.default = Reply.json(completion("ok"))
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        assert gw.dev_key is not None
        key = gw.dev_key.key
        small = await exchange(gw.host, gw.port, post("/v1/chat/completions", chat(100), key))
        large = await exchange(
            gw.host, gw.port, post("/v1/chat/completions", chat(LARGE_BODY_BYTES + 1), key)
        )
    assert (small.status, large.status) == (200, 200)
    assert threads[0] == threading.main_thread().name
    assert threads[1].startswith("sluice-decode")
    assert len(fake.requests[1].body) > LARGE_BODY_BYTES  # forwarded whole
