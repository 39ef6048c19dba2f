"""Errors before the stream: precise status, the envelope of docs/api.md#errors, request id,
no upstream call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sluice.server.lifecycle import RunningGateway
from tests.support.fake_openai import openai_default
from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.gateway import openai_connection_toml, running_gateway
from tests.support.raw_http import RawResponse, exchange, get, post

GOOD = {"model": "test/gpt-fake", "messages": [{"role": "user", "content": "hi"}]}


def key(gw: RunningGateway) -> str:
    assert gw.dev_key is not None
    return gw.dev_key.key


def assert_error(
    resp: RawResponse, status: int, type_: str, code: str | None, param: str | None = None
) -> None:
    assert resp.status == status, resp.body
    assert resp.headers["content-type"] == "application/json"
    assert resp.headers["x-request-id"].startswith("req_")
    error = resp.json()["error"]
    assert set(error) == {"message", "type", "code", "param"}
    assert (error["type"], error["code"], error["param"]) == (type_, code, param)
    assert error["message"] and "Traceback" not in error["message"]


@pytest.mark.parametrize(
    ("raw", "code", "param"),
    [
        (b"{oops", "invalid_json", None),
        (json.dumps({**GOOD, "model": ["a"]}).encode(), "invalid_type", "model"),
        (json.dumps({"model": "test/gpt-fake"}).encode(), "missing_required_parameter", "messages"),
        (json.dumps({**GOOD, "messages": []}).encode(), "invalid_value", "messages"),
        (json.dumps({**GOOD, "stream": 1}).encode(), "invalid_type", "stream"),
    ],
    ids=["malformed-json", "wrong-type", "missing-messages", "empty-messages", "stream-type"],
)
async def test_invalid_bodies(
    tmp_path: Path, fake: FakeUpstream, raw: bytes, code: str, param: str | None
) -> None:
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        resp = await exchange(gw.host, gw.port, post("/v1/chat/completions", raw, key(gw)))
    assert_error(resp, 400, "invalid_request_error", code, param)
    assert fake.requests == []


async def test_unknown_model(tmp_path: Path, fake: FakeUpstream) -> None:
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        body = json.dumps({**GOOD, "model": "nobody/nothing"}).encode()
        resp = await exchange(gw.host, gw.port, post("/v1/chat/completions", body, key(gw)))
        unserved = json.dumps({**GOOD, "model": "anthropic/claude-sonnet-5"}).encode()
        resp2 = await exchange(gw.host, gw.port, post("/v1/chat/completions", unserved, key(gw)))
    assert_error(resp, 404, "model_not_found", "model_not_found", "model")
    assert_error(resp2, 404, "model_not_found", "model_not_served", "model")
    assert fake.requests == []


CONFIG_SMALL_BODY = "[server]\nport = 0\nmax_body_bytes = 2000\n"


async def test_body_over_the_limit_is_413_before_it_is_read(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    config = CONFIG_SMALL_BODY + openai_connection_toml(fake.base_url)
    async with running_gateway(tmp_path, config) as gw:
        big = json.dumps({**GOOD, "messages": [{"role": "user", "content": "x" * 5000}]}).encode()
        resp = await exchange(gw.host, gw.port, post("/v1/chat/completions", big, key(gw)))
        head = (
            f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
            f"{key(gw)}\r\nTransfer-Encoding: chunked\r\n\r\n"
        ).encode()
        chunked = b"".join(b"400\r\n" + b"x" * 0x400 + b"\r\n" for _ in range(3))
        resp2 = await exchange(gw.host, gw.port, head + chunked + b"0\r\n\r\n")
        small = json.dumps({**GOOD, "stream": True}).encode()
        ok = await exchange(gw.host, gw.port, post("/v1/chat/completions", small, key(gw)))
    assert_error(resp, 413, "invalid_request_error", "request_too_large")
    assert_error(resp2, 413, "invalid_request_error", "request_too_large")
    assert resp.headers["connection"] == "close"
    assert ok.status == 200
    assert len(fake.requests) == 1


ODD_KEYS = [
    "",
    "Bearer",
    "Bearer ",
    "Basic dXNlcjpwYXNz",
    "Bearer sk-sluice-",
    "Bearer ' OR '1'='1",
    "Bearer sk-sluice-' OR 1=1 --aaaaaaaaaaaaaaaaaaaaaaaaaa",
    'Bearer "sk-sluice-0000000000000000000000000000000000000000"',
    "Bearer sk-sluice-0000000000000000000000000000000000000000",  # right shape, unknown
    "Bearer sk-sluice-000000000000000000000000000000000000000%00",
    "Bearer sk-" + "a" * 5000,
    "Bearer sk-sluice-0000000000000000000000000000000000000000 x",
    "Bearer null",
    "Bearer undefined",
    "Bearer sk-proj-abc",
]


@pytest.mark.parametrize("authorization", ODD_KEYS, ids=range(len(ODD_KEYS)))
async def test_missing_wrong_and_odd_keys_are_401(
    tmp_path: Path, fake: FakeUpstream, authorization: str
) -> None:
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        body = json.dumps(GOOD).encode()
        header = f"Authorization: {authorization}\r\n" if authorization else ""
        resp = await exchange(
            gw.host, gw.port, post("/v1/chat/completions", body, None, extra=header)
        )
        models = await exchange(gw.host, gw.port, get("/v1/models", None, extra=header))
    code = "missing_api_key" if not authorization else "invalid_api_key"
    assert_error(resp, 401, "authentication_error", code)
    assert_error(models, 401, "authentication_error", code)
    presented = authorization.partition(" ")[2]
    if len(presented) > 8:  # the presented key is never echoed back
        assert presented not in resp.body.decode()
    assert fake.requests == []


async def test_unknown_path_and_method(tmp_path: Path) -> None:
    async with running_gateway(tmp_path) as gw:
        missing = await exchange(gw.host, gw.port, get("/v1/nothing", key(gw)))
        method = await exchange(gw.host, gw.port, get("/v1/chat/completions", key(gw)))
    assert_error(missing, 404, "invalid_request_error", "unknown_url")
    assert_error(method, 405, "invalid_request_error", "method_not_allowed")


@pytest.mark.parametrize(
    ("status", "upstream", "expected"),
    [
        (
            400,
            {
                "error": {
                    "message": "max_tokens is too large",
                    "type": "invalid_request_error",
                    "param": "max_tokens",
                    "code": "invalid_value",
                }
            },
            (400, "invalid_request_error", "invalid_value", "max_tokens"),
        ),
        (
            401,
            {"error": {"message": "Incorrect API key provided: sk-upstream-SECRET"}},
            (502, "upstream_error", "upstream_authentication_failed", None),
        ),
        (
            429,
            {"error": {"message": "Rate limit reached"}},
            (429, "rate_limit_error", "upstream_rate_limited", None),
        ),
        (
            503,
            {"error": {"message": "overloaded"}},
            (503, "service_unavailable", "upstream_overloaded", None),
        ),
    ],
    ids=["400", "401", "429", "503"],
)
async def test_upstream_errors_map_to_our_types(
    tmp_path: Path,
    fake: FakeUpstream,
    status: int,
    upstream: dict[str, object],
    expected: tuple[int, str, str, str | None],
) -> None:
    fake.queue(Reply.json(upstream, status=status, **{"retry-after": "3"}))
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        body = json.dumps({**GOOD, "stream": True}).encode()
        resp = await exchange(gw.host, gw.port, post("/v1/chat/completions", body, key(gw)))
    assert_error(resp, *expected)
    assert "SECRET" not in resp.body.decode()
    if status == 400:
        assert resp.json()["error"]["message"] == "max_tokens is too large"
    if status == 429:
        assert resp.headers["retry-after"] == "3"


async def test_failover_to_the_next_connection_before_the_first_event(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    second = openai_default(FakeUpstream())
    await second.start()
    try:
        fake.queue(Reply.json({"error": {"message": "boom"}}, status=500))
        config = (
            openai_connection_toml(fake.base_url)
            + f"""
[[connections]]
id = "conn_second"
provider = "openai-compatible"
base_url = "{second.base_url}"

[[models]]
id = "test/gpt-fake"
providers = {{ conn_fake = "gpt-fake", conn_second = "gpt-fake-2" }}
"""
        )
        async with running_gateway(tmp_path, config) as gw:
            body = json.dumps({**GOOD, "stream": True}).encode()
            resp = await exchange(gw.host, gw.port, post("/v1/chat/completions", body, key(gw)))
    finally:
        await second.close()
    assert resp.status == 200
    first = json.loads(resp.body.split(b"\n\n")[0].removeprefix(b"data: "))
    assert (first["connection"], first["route"]) == ("conn_second", "primary")
    assert second.requests[0].json()["model"] == "gpt-fake-2"
    assert len(fake.requests) == 1
