"""Breakers per (connection, model): an overloaded model at a provider cools down alone;
the connection's other models keep being served, and the log says which circuit
opened, why and for how long."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from tests.support.fake_openai import text_stream
from tests.support.fake_upstream import Recorded, Reply, responding
from tests.support.gateway import openai_connection_toml, running_gateway
from tests.support.raw_http import exchange, post

CONFIG = (
    "[server]\nport = 0\nsse_keepalive_interval = 0\n"
    "[routing]\nbreaker_failures = 2\nbreaker_cooldown = 60\n"
)
OVERLOADED = {"error": {"message": "The model is overloaded", "type": "server_error"}}


def _body(model: str) -> bytes:
    doc = {"model": model, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    return json.dumps(doc).encode()


def _answer(request: Recorded) -> Reply:
    if request.json()["model"] == "gpt-fake":
        return Reply.json(OVERLOADED, status=503)
    return Reply.stream(*text_stream("still", " here"))


async def test_an_overloaded_model_cools_alone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="sluice.routing")
    async with (
        responding(_answer) as fake,
        running_gateway(tmp_path, CONFIG + openai_connection_toml(fake.base_url)) as gw,
    ):
        assert gw.dev_key is not None
        key = gw.dev_key.key
        failing = [
            await exchange(
                gw.host, gw.port, post("/v1/chat/completions", _body("test/gpt-fake"), key)
            )
            for _ in range(3)
        ]
        other = await exchange(
            gw.host, gw.port, post("/v1/chat/completions", _body("test/unpriced"), key)
        )
        sent = [r.json()["model"] for r in fake.requests]
    # two failures open the circuit of (conn_fake, test/gpt-fake): the third is refused
    # without an upstream call; the connection's other model is still served
    assert [r.status for r in failing] == [503, 503, 503]
    assert failing[2].json()["error"]["code"] == "connections_cooling_down"
    assert sent == ["gpt-fake", "gpt-fake", "gpt-unpriced"]
    assert other.status == 200 and other.body.endswith(b"data: [DONE]\n\n")
    opened = [r.getMessage() for r in caplog.records if "circuit open" in r.getMessage()]
    assert len(opened) == 1
    assert "conn_fake" in opened[0] and "test/gpt-fake" in opened[0] and "60 s" in opened[0]
