"""One catalog model served by different provider kinds (docs/api.md#models-and-routes):
`anthropic/claude-sonnet-5` over an `anthropic` connection, failing over to an
`aws-bedrock` connection, and the client sees one stream format whichever served it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import fake_anthropic, fake_bedrock
from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.gateway import running_gateway
from tests.support.raw_http import exchange, post


@pytest.fixture(autouse=True)
def aws_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_BEARER_TOKEN_BEDROCK"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/aws-credentials")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def config(anthropic: FakeUpstream, bedrock: FakeUpstream) -> str:
    return f"""
[server]
port = 0
sse_keepalive_interval = 0

[[connections]]
id = "conn_anthropic"
provider = "anthropic"
base_url = "{anthropic.root_url}"
api_key_env = "FAKE_UPSTREAM_KEY"

[[connections]]
id = "conn_bedrock"
provider = "aws-bedrock"
base_url = "{bedrock.root_url}"
region = "us-east-1"
"""


def body() -> bytes:
    return json.dumps(
        {
            "model": "anthropic/claude-sonnet-5",
            "stream": True,
            "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": "hi"}],
        }
    ).encode()


def chunks(raw: bytes) -> list[dict[str, object]]:
    return [
        json.loads(e.removeprefix(b"data: "))
        for e in raw[:-2].split(b"\n\n")
        if e.startswith(b"data: {")
    ]


async def run(tmp_path: Path, anthropic: FakeUpstream, bedrock: FakeUpstream) -> bytes:
    async with running_gateway(tmp_path, config(anthropic, bedrock)) as gw:
        assert gw.dev_key is not None
        resp = await exchange(
            gw.host, gw.port, post("/v1/chat/completions", body(), gw.dev_key.key)
        )
    assert resp.status == 200
    return resp.body


async def test_same_model_two_provider_kinds_one_stream_format(tmp_path: Path) -> None:
    anthropic, bedrock = FakeUpstream(), FakeUpstream()
    await anthropic.start()
    await bedrock.start()
    try:
        anthropic.queue(Reply.stream(*fake_anthropic.text_stream("Hello", " there")))
        direct = chunks(await run(tmp_path / "a", anthropic, bedrock))
        anthropic.queue(
            Reply.json(fake_anthropic.error_body("overloaded_error", "busy"), status=529)
        )
        bedrock.queue(fake_bedrock.stream_reply(*fake_bedrock.text_stream("Hello", " there")))
        failed_over = chunks(await run(tmp_path / "b", anthropic, bedrock))
    finally:
        await anthropic.close()
        await bedrock.close()
    assert anthropic.requests[0].json()["model"] == "claude-sonnet-5"
    assert bedrock.requests[0].path == "/model/anthropic.claude-sonnet-5-v1%3A0/converse-stream"
    for stream, provider, connection in (
        (direct, "anthropic", "conn_anthropic"),
        (failed_over, "aws-bedrock", "conn_bedrock"),
    ):
        assert {(c["provider"], c["connection"], c["route"], c["model"]) for c in stream} == {
            (provider, connection, "primary", "anthropic/claude-sonnet-5")
        }
        shape = [
            (c["choices"][0]["delta"], c["choices"][0]["finish_reason"])  # type: ignore[index]
            for c in stream
            if c["choices"]
        ]
        assert shape == [
            ({"role": "assistant", "content": ""}, None),
            ({"content": "Hello"}, None),
            ({"content": " there"}, None),
            ({}, "stop"),
        ]
        assert stream[-1]["usage"]["price_source"] == "list"  # type: ignore[index]
