"""Browsers on other origins: nothing allowed by default; ``[server] cors_origins``
answers their preflight and names the origin on every answer, errors and streams too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sluice.config import parse_config
from sluice.errors import ConfigError
from tests.support.gateway import running_gateway
from tests.support.raw_http import exchange, get, post

APP = "https://app.test"
PREFLIGHT = (
    "OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: x\r\nOrigin: {origin}\r\n"
    "Access-Control-Request-Method: POST\r\n"
    "Access-Control-Request-Headers: authorization, content-type\r\n\r\n"
)
BODY = json.dumps(
    {"model": "sluice/demo", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
)


def preflight(origin: str) -> bytes:
    return PREFLIGHT.format(origin=origin).encode()


async def test_nothing_is_allowed_by_default(tmp_path: Path) -> None:
    async with running_gateway(tmp_path) as gw:
        answer = await exchange(gw.host, gw.port, preflight(APP))
        models = await exchange(
            gw.host, gw.port, get("/v1/models", None, extra=f"Origin: {APP}\r\n")
        )
    assert answer.status == 405
    assert "access-control-allow-origin" not in answer.headers
    assert "access-control-allow-origin" not in models.headers


async def test_an_allowed_origin_is_answered_and_named_on_every_answer(tmp_path: Path) -> None:
    config = f'[server]\nport = 0\nmax_body_bytes = 2000\ncors_origins = ["{APP}"]\n'
    async with running_gateway(tmp_path, config) as gw:
        assert gw.dev_key is not None
        allowed = await exchange(gw.host, gw.port, preflight(APP))
        other = await exchange(gw.host, gw.port, preflight("https://evil.test"))
        origin = f"Origin: {APP}\r\n"
        streamed = await exchange(
            gw.host,
            gw.port,
            post("/v1/chat/completions", BODY.encode(), gw.dev_key.key, extra=origin),
        )
        refused = await exchange(
            gw.host, gw.port, post("/v1/chat/completions", BODY.encode(), None, extra=origin)
        )
        large = b'{"model":"sluice/demo","messages":[{"role":"user","content":"%b"}]}' % (
            b"x" * 3000
        )
        too_large = await exchange(  # refused by the HTTP layer, before any handler
            gw.host, gw.port, post("/v1/chat/completions", large, gw.dev_key.key, extra=origin)
        )
        elsewhere = await exchange(
            gw.host,
            gw.port,
            post("/v1/messages", large, gw.dev_key.key, extra="Origin: https://evil.test\r\n"),
        )
    assert too_large.status == 413 and too_large.headers["access-control-allow-origin"] == APP
    assert elsewhere.status == 413 and "access-control-allow-origin" not in elsewhere.headers
    assert allowed.status == 204
    assert allowed.headers["access-control-allow-origin"] == APP
    assert "POST" in allowed.headers["access-control-allow-methods"]
    assert allowed.headers["access-control-allow-headers"] == "authorization, content-type"
    assert other.status == 405 and "access-control-allow-origin" not in other.headers
    for answer in (streamed, refused):
        assert answer.headers["access-control-allow-origin"] == APP
        exposed = answer.headers["access-control-expose-headers"]
        assert "x-request-id" in exposed
        assert "x-sluice-resume-url" in exposed  # a page's toolkit resumes and stops it
    assert streamed.status == 200 and refused.status == 401


async def test_a_star_allows_any_origin(tmp_path: Path) -> None:
    async with running_gateway(tmp_path, '[server]\nport = 0\ncors_origins = ["*"]\n') as gw:
        answer = await exchange(gw.host, gw.port, preflight("http://localhost:5173"))
    assert answer.status == 204
    assert answer.headers["access-control-allow-origin"] == "http://localhost:5173"


@pytest.mark.parametrize(
    "origin", ["app.test", "https://app.test/", "https://app.test/path", "ftp://x"]
)
def test_an_origin_that_is_not_one_is_refused_when_loaded(origin: str) -> None:
    with pytest.raises(ConfigError, match="is not an origin"):
        parse_config(f'[server]\ncors_origins = ["{origin}"]\n')
