"""Security basics other gateways got wrong (each has a published advisory)."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest

from sluice.server.lifecycle import RunningGateway
from tests.support.fake_openai import chunk
from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.gateway import UPSTREAM_KEY, openai_connection_toml, running_gateway
from tests.support.raw_http import RawClient, exchange, get, post

GOOD = {"model": "test/gpt-fake", "messages": [{"role": "user", "content": "hi"}], "stream": True}


def key(gw: RunningGateway) -> str:
    assert gw.dev_key is not None
    return gw.dev_key.key


@pytest.mark.parametrize(
    ("target", "headers", "status"),
    [
        ("/v1/models", "Host: localhost\r\n", 401),
        ("/v1/models", "Host: 127.0.0.1:8787\r\nX-Forwarded-Host: localhost\r\n", 401),
        ("/v1/models?auth=off", "", 401),
        ("http://localhost/v1/models", "", 401),  # absolute-form target
        ("/health/../v1/models", "", 404),
        ("/v1/models/", "", 401),  # GET /v1/models/{id}
        ("/models", "", 401),  # every /v1 path also answers without it
        ("/health/../models", "", 404),
        ("//v1/models", "", 404),
        ("/v1/%6dodels", "", 404),
        ("/V1/MODELS", "", 404),
        ("/health", "X-Original-URL: /v1/models\r\nX-Rewrite-URL: /v1/models\r\n", 200),
    ],
)
async def test_routing_and_auth_decide_on_the_raw_path(
    tmp_path: Path, target: str, headers: str, status: int
) -> None:
    async with running_gateway(tmp_path) as gw:
        request = f"GET {target} HTTP/1.1\r\n{headers or 'Host: x'}\r\n\r\n"
        if "Host:" not in request:
            request = request.replace("\r\n\r\n", "\r\nHost: x\r\n\r\n")
        resp = await exchange(gw.host, gw.port, request.encode())
    assert resp.status == status, resp.body
    assert b"sluice/demo" not in resp.body  # the model list never leaks


async def test_body_overrides_are_refused_by_name_and_never_steer_the_call(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    decoy = FakeUpstream()
    await decoy.start()
    try:
        async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
            overrides = {
                "api_base": decoy.base_url,
                "base_url": decoy.base_url,
                "api_key": "sk-attacker-0123456789",
                "extra_headers": {"authorization": "Bearer x"},
                "custom_llm_provider": "openai",
                "azure_endpoint": decoy.base_url,
            }
            for name, value in overrides.items():
                body = json.dumps({**GOOD, name: value}).encode()
                resp = await exchange(gw.host, gw.port, post("/v1/chat/completions", body, key(gw)))
                assert resp.status == 400, name
                error = resp.json()["error"]
                assert (error["param"], error["code"]) == (name, "unsupported_parameter")
                assert error["type"] == "invalid_request_error"
                assert str(value) not in error["message"]  # the value is not echoed
            body = json.dumps({**GOOD, "some_future_field": 1}).encode()
            resp = await exchange(gw.host, gw.port, post("/v1/chat/completions", body, key(gw)))
            assert resp.status == 400  # no connection allows it: refused by name, not dropped
            error = resp.json()["error"]
            assert (error["param"], error["code"]) == ("some_future_field", "unknown_parameter")
            assert fake.requests == []
            good = json.dumps(GOOD).encode()
            resp = await exchange(gw.host, gw.port, post("/v1/chat/completions", good, key(gw)))
    finally:
        await decoy.close()
    assert resp.status == 200
    assert decoy.requests == []
    (sent,) = fake.requests
    assert sent.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"
    assert set(sent.json()) == {"model", "messages", "stream", "stream_options"}


async def test_keys_never_reach_logs_errors_or_responses(
    tmp_path: Path, fake: FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    fake.queue(
        Reply.json(
            {"error": {"message": f"Incorrect API key provided: {UPSTREAM_KEY}"}}, status=401
        ),
        Reply.json({"error": {"message": f"bad request for key {UPSTREAM_KEY}"}}, status=400),
        Reply.stream(
            chunk(role="assistant", content=""),
            chunk(content="x"),
            b'data: {"error": {"message": "failed with '
            + UPSTREAM_KEY.encode()
            + b' and Bearer abc.def"}}\n\n',
        ),
    )
    bodies: list[bytes] = []
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        sluice_key = key(gw)
        for _ in range(3):
            resp = await exchange(
                gw.host,
                gw.port,
                post("/v1/chat/completions", json.dumps(GOOD).encode(), sluice_key),
            )
            bodies.append(resp.body)
        wrong = sluice_key[:-4] + "AAAA"
        resp = await exchange(
            gw.host, gw.port, post("/v1/chat/completions", json.dumps(GOOD).encode(), wrong)
        )
        bodies.append(resp.body)
    assert b"[redacted]" in bodies[1] and b"[redacted]" in bodies[2]
    logged = "\n".join(r.getMessage() for r in caplog.records)
    for secret in (UPSTREAM_KEY, sluice_key, wrong, "abc.def"):
        assert secret not in logged
        assert all(secret.encode() not in b for b in bodies)


async def test_a_client_trickling_its_headers_is_cut_off(tmp_path: Path) -> None:
    config = "[server]\nport = 0\nheader_timeout = 0.3\n"
    async with running_gateway(tmp_path, config) as gw:
        client = await RawClient.connect(gw.host, gw.port)
        try:
            await client.send(b"GET /health HTTP/1.1\r\nHost: x\r\n")
            for _ in range(3):  # keeps sending, but never finishes the head
                await asyncio.sleep(0.15)
                await client.send(b"X-Slow: 1\r\n")
            resp = await asyncio.wait_for(client.read_response(), 3)
            assert await client.at_eof()
        finally:
            await client.close()
    assert resp.status == 408
    assert resp.json()["error"]["type"] == "request_timeout"
    assert resp.json()["error"]["code"] == "client_timeout"


async def test_a_client_trickling_its_body_is_cut_off(tmp_path: Path) -> None:
    config = "[server]\nport = 0\nbody_timeout = 0.3\n"
    async with running_gateway(tmp_path, config) as gw:
        client = await RawClient.connect(gw.host, gw.port)
        try:
            await client.send(post("/v1/chat/completions", b"{" * 100, key(gw))[:-90])
            resp = await asyncio.wait_for(client.read_response(), 3)
            assert await client.at_eof()
        finally:
            await client.close()
    assert resp.status == 408


async def test_idle_connections_are_closed(tmp_path: Path) -> None:
    config = "[server]\nport = 0\nkeepalive_timeout = 0.2\nheader_timeout = 0.2\n"
    async with running_gateway(tmp_path, config) as gw:
        silent = await RawClient.connect(gw.host, gw.port)
        idle = await RawClient.connect(gw.host, gw.port)
        try:
            await idle.send(get("/health", None))
            assert (await idle.read_response()).status == 200
            assert await silent.at_eof(wait=2)
            assert await idle.at_eof(wait=2)
        finally:
            await silent.close()
            await idle.close()


async def test_oversized_or_malformed_heads(tmp_path: Path) -> None:
    config = "[server]\nport = 0\nmax_header_bytes = 4096\n"
    async with running_gateway(tmp_path, config) as gw:
        huge = await exchange(
            gw.host, gw.port, get("/health", None, extra=f"X-Big: {'a' * 8000}\r\n")
        )
        many = await exchange(gw.host, gw.port, get("/health", None, extra="X-A: 1\r\n" * 150))
        garbage = await exchange(gw.host, gw.port, b"NOT HTTP AT ALL\r\n\r\n")
        upgrade = await exchange(
            gw.host,
            gw.port,
            get("/health", None, extra="Connection: Upgrade\r\nUpgrade: websocket\r\n"),
        )
    assert huge.status == 431 and many.status == 431
    assert garbage.status == 400 and upgrade.status == 400
    for resp in (huge, many, garbage, upgrade):
        assert resp.headers["x-request-id"].startswith("req_")
        assert resp.json()["error"]["type"] == "invalid_request_error"


async def test_one_endless_header_is_refused_before_it_fills_memory(tmp_path: Path) -> None:
    """The parser holds a header until its line ends; the raw bytes are counted instead."""
    config = "[server]\nport = 0\nmax_header_bytes = 4096\nheader_timeout = 30\n"
    async with running_gateway(tmp_path, config) as gw:
        client = await RawClient.connect(gw.host, gw.port)
        try:
            await client.send(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Endless: ")
            answer = asyncio.create_task(client.read_response())
            sent = 0
            while not answer.done() and sent < 1 << 20:
                try:
                    await client.send(b"a" * 1024)
                except ConnectionError:
                    break
                sent += 1024
                await asyncio.sleep(0.001)
            async with asyncio.timeout(5):
                resp = await answer
        finally:
            await client.close()
    assert resp.status == 431 and resp.json()["error"]["code"] == "headers_too_large"
    assert sent < 64 * 1024  # refused soon after the limit, not after a megabyte
