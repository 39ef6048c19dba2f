"""Circuit breakers shared through Redis (``[limits] redis_url``): a circuit that opens
in one gateway process is skipped by the others at once, and by one that starts later;
the connection's other models are served everywhere."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

from tests.support.fake_openai import text_stream
from tests.support.fake_upstream import Recorded, Reply, responding
from tests.support.gateway import openai_connection_toml, running_gateway
from tests.support.raw_http import RawResponse, exchange, post

OVERLOADED = {"error": {"message": "The model is overloaded", "type": "server_error"}}


def _config(prefix: str, base_url: str) -> str:
    return (
        "[server]\nport = 0\nsse_keepalive_interval = 0\n"
        "[routing]\nbreaker_failures = 2\nbreaker_cooldown = 60\n"
        f'[limits]\nredis_url = "redis://127.0.0.1:6379/0"\nkey_prefix = "{prefix}"\n'
        + openai_connection_toml(base_url)
    )


def _answer(request: Recorded) -> Reply:
    if request.json()["model"] == "gpt-fake":
        return Reply.json(OVERLOADED, status=503)
    return Reply.stream(*text_stream("fine"))


def _body(model: str) -> bytes:
    doc = {"model": model, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    return json.dumps(doc).encode()


async def _ask(gw: object, model: str) -> RawResponse:
    key = gw.dev_key.key  # type: ignore[attr-defined]
    return await exchange(gw.host, gw.port, post("/v1/chat/completions", _body(model), key))  # type: ignore[attr-defined]


ADMIN = "admin-" + "b" * 40
OPEN = b'sluice_connection_breaker_state{connection="conn_fake"} 2.0'


async def _until_told(gw: object, seconds: float = 5.0) -> None:
    """Until ``gw``'s own breaker holds the circuit open: Redis's message takes a few
    milliseconds to arrive, and a request in between is (rightly) tried."""
    head = f"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ADMIN}\r\n\r\n"
    async with asyncio.timeout(seconds):
        while OPEN not in (await exchange(gw.host, gw.port, head.encode())).body:  # type: ignore[attr-defined]
            await asyncio.sleep(0.01)


async def _until_refused(gw: object, seconds: float = 5.0) -> RawResponse:
    async with asyncio.timeout(seconds):
        while True:
            answer = await _ask(gw, "test/gpt-fake")
            if answer.status == 503 and b"connections_cooling_down" in answer.body:
                return answer
            await asyncio.sleep(0.05)


async def test_an_open_circuit_is_skipped_by_every_process(tmp_path: Path) -> None:
    prefix = f"sluice-test:{uuid.uuid4().hex}:"
    async with responding(_answer) as fake:
        config = _config(prefix, fake.base_url)
        env = {"SLUICE_ADMIN_KEY": ADMIN}
        async with (
            running_gateway(tmp_path / "a", config) as a,
            running_gateway(tmp_path / "b", config, env=env) as b,
        ):
            failed = [await _ask(a, "test/gpt-fake") for _ in range(2)]
            assert [f.status for f in failed] == [503, 503]
            sent = len(fake.requests)
            await _until_told(b)  # through Redis: b never failed on its own
            refused = await _ask(b, "test/gpt-fake")
            assert b"connections_cooling_down" in refused.body, refused.body
            assert refused.status == 503 and len(fake.requests) == sent  # not tried here
            served = await _ask(b, "test/unpriced")
            assert served.status == 200 and served.body.endswith(b"data: [DONE]\n\n")
            async with running_gateway(tmp_path / "c", config) as c:  # starts later
                late = await _until_refused(c, 2.0)
            assert late.status == 503
            assert len(fake.requests) == sent + 1  # only the other model's request
