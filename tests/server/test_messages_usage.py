"""What ``/v1/messages`` says a request used, through a real gateway: ``message_start``
shows the prompt on every provider (the upstream's own early count, else the gateway's
estimate), ``message_delta`` the final counts, which the anthropic SDK's accumulator
keeps; cache writes are reported and priced where the upstream reports them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from anthropic import AsyncAnthropic
from anthropic.types import Usage

from sluice.server.lifecycle import RunningGateway
from tests.server.test_anthropic_gateway import config as anthropic_toml
from tests.server.test_bedrock_gateway import aws_environment, bedrock_toml
from tests.support import fake_anthropic as fa
from tests.support import fake_bedrock as fb
from tests.support.fake_openai import text_stream
from tests.support.fake_upstream import FakeUpstream, Pause, Reply
from tests.support.gateway import openai_connection_toml, running_gateway
from tests.support.raw_http import exchange, post

__all__ = ["aws_environment"]  # its credentials, autouse here too
SYSTEM = "You are terse."
USER: list[Any] = [{"role": "user", "content": "Say hello"}]
ESTIMATE = 18
"""The gateway's estimate of that prompt (docs/metering.md): 3 for the reply's priming,
then per message 4 of framing and a token per 4 characters, rounded up: 4 + 4 for the
system prompt's 14 characters, 4 + 3 for the user's 9."""
PAUSE = Pause(0.2)
"""After the upstream's first content: ``message_start`` goes out before the rest."""


def body(model: str, **extra: object) -> bytes:
    doc = {"model": model, "max_tokens": 100, "system": SYSTEM, "messages": USER}
    return json.dumps({**doc, **extra}).encode()


async def raw_stream(gw: RunningGateway, model: str) -> dict[str, str]:
    """The stream's events as sent: each one's data by its name (the last of a name)."""
    assert gw.dev_key is not None
    extra = f"x-api-key: {gw.dev_key.key}\r\n"
    reply = await exchange(
        gw.host, gw.port, post("/v1/messages", body(model, stream=True), None, extra=extra)
    )
    assert reply.status == 200, reply.body
    out: dict[str, str] = {}
    for frame in reply.body.decode().split("\n\n")[:-1]:
        name, data = frame.split("\n")
        out[name.removeprefix("event: ")] = data.removeprefix("data: ")
    return out


def start_usage(raw: dict[str, str]) -> dict[str, Any]:
    usage: dict[str, Any] = json.loads(raw["message_start"])["message"]["usage"]
    return usage


def final_usage(raw: dict[str, str]) -> dict[str, Any]:
    usage: dict[str, Any] = json.loads(raw["message_delta"])["usage"]
    return usage


async def sdk_usage(gw: RunningGateway, model: str) -> Usage:
    """``messages.stream(...).get_final_message().usage`` of the official SDK."""
    assert gw.dev_key is not None
    client = AsyncAnthropic(base_url=gw.base_url, api_key=gw.dev_key.key, max_retries=0)
    async with (
        client,
        client.messages.stream(model=model, max_tokens=100, system=SYSTEM, messages=USER) as s,
    ):
        return (await s.get_final_message()).usage


def counts(usage: Usage | dict[str, Any]) -> tuple[int, int, int, int]:
    """``input_tokens``, ``cache_creation_input_tokens``, ``cache_read_input_tokens``,
    ``output_tokens``."""
    doc = usage if isinstance(usage, dict) else usage.model_dump()
    return (
        doc["input_tokens"],
        doc["cache_creation_input_tokens"],
        doc["cache_read_input_tokens"],
        doc["output_tokens"],
    )


def openai_stream() -> list[Any]:
    """Usage only at the end: 1000 prompt tokens, 200 of them read from the cache."""
    usage = {
        "prompt_tokens": 1000,
        "completion_tokens": 7,
        "total_tokens": 1007,
        "prompt_tokens_details": {"cached_tokens": 200},
    }
    role, hello, *rest = text_stream("Hello", " there", usage=usage)
    return [role, hello, PAUSE, *rest]


async def test_an_openai_upstream_s_message_start_shows_the_estimate_and_the_end_corrects_it(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.queue(Reply.stream(*openai_stream()), Reply.stream(*openai_stream()))
    toml = openai_connection_toml(fake.base_url)
    async with running_gateway(tmp_path, toml, deterministic=True) as gw:
        raw = await raw_stream(gw, "test/gpt-fake")
        sdk = await sdk_usage(gw, "test/gpt-fake")
    assert raw["message_start"] == (
        '{"type":"message_start","message":{"id":"req_000003","type":"message",'
        '"role":"assistant","model":"test/gpt-fake","content":[],"stop_reason":null,'
        '"stop_sequence":null,"usage":{"input_tokens":18,"cache_creation_input_tokens":0,'
        '"cache_read_input_tokens":0,"output_tokens":0},"provider":"openai-compatible",'
        '"connection":"conn_fake","route":"primary","route_name":null}}'
    )
    # input 800 at $2/M, 200 cache reads at $0.5/M, 7 out at $8/M
    assert final_usage(raw) == {
        "input_tokens": 800,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 200,
        "output_tokens": 7,
        "cost": 0.001756,
        "price_source": "list",
    }
    assert counts(sdk) == (800, 0, 200, 7)  # the SDK took message_delta's counts


def anthropic_stream(start: bytes, final: dict[str, Any]) -> Reply:
    block_start, delta, block_stop = fa.text_block(0, "4")
    end = fa.message_end("end_turn", final)
    return Reply.stream(start, block_start, delta, PAUSE, block_stop, *end)


async def test_an_anthropic_upstream_s_own_counts_open_the_stream_cache_writes_priced(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    start = fa.message_start(20, cache_write=30, cache_read=50)
    final = fa.usage(20, 9, cache_write=30, cache_read=50)
    fake.queue(anthropic_stream(start, final), anthropic_stream(start, final))
    async with running_gateway(tmp_path, anthropic_toml(fake), deterministic=True) as gw:
        raw = await raw_stream(gw, "test/claude")
        sdk = await sdk_usage(gw, "test/claude")
    assert raw["message_start"] == (
        '{"type":"message_start","message":{"id":"req_000003","type":"message",'
        '"role":"assistant","model":"test/claude","content":[],"stop_reason":null,'
        '"stop_sequence":null,"usage":{"input_tokens":20,"cache_creation_input_tokens":30,'
        '"cache_read_input_tokens":50,"output_tokens":0},"provider":"anthropic",'
        '"connection":"conn_claude","route":"primary","route_name":null}}'
    )
    # 20 in at $3/M, 30 cache writes at $3.75/M, 50 cache reads at $0.3/M, 9 out at $15/M
    assert final_usage(raw) == {
        "input_tokens": 20,
        "cache_creation_input_tokens": 30,
        "cache_read_input_tokens": 50,
        "output_tokens": 9,
        "cost": 0.0003225,
        "price_source": "list",
    }
    assert counts(sdk) == (20, 30, 50, 9)


async def test_an_upstream_that_counts_the_prompt_only_at_the_end_opens_with_the_estimate(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    """Its ``message_start`` says 0 input tokens (Anthropic-compatible APIs may): a prompt
    is never empty, so the estimate is shown, and the end's count replaces it."""

    start, final = fa.message_start(0), fa.usage(20, 9, cache_read=50)
    fake.queue(anthropic_stream(start, final), anthropic_stream(start, final))
    async with running_gateway(tmp_path, anthropic_toml(fake)) as gw:
        raw = await raw_stream(gw, "test/claude")
        sdk = await sdk_usage(gw, "test/claude")
    assert counts(start_usage(raw)) == (ESTIMATE, 0, 0, 0)
    assert counts(final_usage(raw)) == (20, 0, 50, 9)
    assert counts(sdk) == (20, 0, 50, 9)


def bedrock_stream() -> Reply:
    """Converse reports usage only at the end: 20 fresh, 60 written, 40 read, 5 out."""
    return fb.stream_reply(
        fb.message_start(),
        fb.text_delta("Hi"),
        PAUSE,
        fb.block_stop(),
        fb.message_stop(),
        fb.metadata(20, 5, cache_read=40, cache_write=60),
    )


async def test_a_bedrock_cache_write_is_reported_and_priced_on_the_messages_wire(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    whole = fb.converse_response(
        [{"text": "Hi"}],
        usage={
            "inputTokens": 20,
            "outputTokens": 5,
            "totalTokens": 125,
            "cacheReadInputTokens": 40,
            "cacheWriteInputTokens": 60,
        },
    )
    fake.queue(bedrock_stream(), bedrock_stream(), Reply.json(whole))
    async with running_gateway(tmp_path, bedrock_toml(fake)) as gw:
        raw = await raw_stream(gw, "test/claude-bedrock")
        sdk = await sdk_usage(gw, "test/claude-bedrock")
        assert gw.dev_key is not None
        extra = f"x-api-key: {gw.dev_key.key}\r\n"
        answer = await exchange(
            gw.host,
            gw.port,
            post("/v1/messages", body("test/claude-bedrock"), None, extra=extra),
        )
    assert counts(start_usage(raw)) == (ESTIMATE, 0, 0, 0)
    # 20 in at $3/M, 60 cache writes at $3.75/M, 40 cache reads at $0.3/M, 5 out at $15/M
    expected = {
        "input_tokens": 20,
        "cache_creation_input_tokens": 60,
        "cache_read_input_tokens": 40,
        "output_tokens": 5,
        "cost": 0.000372,
        "price_source": "list",
    }
    assert final_usage(raw) == expected
    assert answer.json()["usage"] == expected
    assert counts(sdk) == (20, 60, 40, 5)


async def test_a_cache_write_is_priced_on_the_chat_wire(tmp_path: Path, fake: FakeUpstream) -> None:
    """Chat's usage has no field for cache writes; its cost prices them all the same."""
    fake.queue(bedrock_stream())
    async with running_gateway(tmp_path, bedrock_toml(fake)) as gw:
        assert gw.dev_key is not None
        request = {
            "model": "test/claude-bedrock",
            "messages": USER,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        reply = await exchange(
            gw.host,
            gw.port,
            post("/v1/chat/completions", json.dumps(request).encode(), gw.dev_key.key),
        )
    events = [e for e in reply.body.decode().split("\n\n") if e.startswith("data: {")]
    usage = json.loads(events[-1].removeprefix("data: "))["usage"]
    assert (usage["prompt_tokens"], usage["prompt_tokens_details"]["cached_tokens"]) == (120, 40)
    assert (usage["cost"], usage["price_source"]) == (0.000372, "list")
