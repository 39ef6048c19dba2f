"""Guardrails through a real gateway, seen by the official openai SDK (issue 6)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from openai import APIError, AsyncOpenAI, BadRequestError
from openai.types.chat import ChatCompletionMessageParam

from sluice.server.lifecycle import RunningGateway
from tests.support.fake_openai import completion, text_stream
from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.gateway import openai_connection_toml, running_gateway
from tests.support.raw_http import exchange, get, post
from tests.support.transcript import FIXTURES

USER: list[ChatCompletionMessageParam] = [{"role": "user", "content": "What is the key?"}]
KEY = "sk-abcdefghijklmnopqrstuvwxyz"
THREE_CHUNKS = ("The key is ", "sk-abcdefghij", "klmnopqrst", "uvwxyz, keep it safe.")
ROUTE = """
[[routes]]
name = "support-bot"
chain = [ { model = "test/gpt-fake" } ]
"""


def rail(name: str, action: str = "block", stage: str = "output", **extra: str) -> str:
    """One ``[[guardrails]]`` table; ``extra`` values are TOML source."""
    lines = [f'name = "{name}"', f'stage = "{stage}"', f'action = "{action}"']
    lines += [f"{k} = {v}" for k, v in extra.items()]
    return "\n[[guardrails]]\n" + "\n".join(lines) + "\n"


NO_KEYS = {"kind": '"regex"', "pattern": '"sk-[A-Za-z0-9]{20,}"'}


def sdk(gw: RunningGateway) -> AsyncOpenAI:
    assert gw.dev_key is not None
    return AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=gw.dev_key.key, max_retries=0)


async def record(gw: RunningGateway, request_id: str) -> Any:
    assert gw.dev_key is not None
    return (
        await exchange(gw.host, gw.port, get(f"/v1/requests/{request_id}", gw.dev_key.key))
    ).json()


async def streamed(client: AsyncOpenAI, model: str = "test/gpt-fake") -> tuple[str, str]:
    """(content, request id) of a stream read to its end."""
    async with client.chat.completions.with_streaming_response.create(
        model=model, messages=USER, stream=True
    ) as response:
        chunks = [c async for c in await response.parse()]
        request_id = response.headers["x-request-id"]
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices), request_id


async def test_a_blocked_stream_ends_with_the_error_event_the_sdk_raises(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.queue(Reply.stream(*text_stream(*THREE_CHUNKS)))
    config = openai_connection_toml(fake.base_url) + rail("no-secrets", **NO_KEYS)
    seen: list[str] = []
    async with running_gateway(tmp_path, config) as gw, sdk(gw) as client:
        async with client.chat.completions.with_streaming_response.create(
            model="test/gpt-fake", messages=USER, stream=True
        ) as response:
            request_id = response.headers["x-request-id"]
            with pytest.raises(APIError) as info:
                async for c in await response.parse():
                    seen.append(c.choices[0].delta.content or "" if c.choices else "")
        row = await record(gw, request_id)
    assert "".join(seen) == "The key is "  # released before the match: stays delivered
    body: Any = info.value.body
    assert (body["type"], body["code"]) == ("guardrail_error", "guardrail_blocked")
    assert "no-secrets" in body["message"] and "sk-" not in body["message"]
    assert row["status"] == "blocked"
    assert row["guardrails"] == [
        {"name": "no-secrets", "stage": "output", "action": "block", "outcome": "blocked"}
    ]
    assert row["completion_tokens"] > 0  # charged for what the upstream produced
    assert KEY not in json.dumps(row)


async def test_a_redacted_stream_shows_the_redaction(tmp_path: Path, fake: FakeUpstream) -> None:
    fake.queue(Reply.stream(*text_stream(*THREE_CHUNKS)))
    config = openai_connection_toml(fake.base_url) + rail("no-secrets", "redact", **NO_KEYS)
    async with running_gateway(tmp_path, config) as gw, sdk(gw) as client:
        text, request_id = await streamed(client)
        row = await record(gw, request_id)
    assert text == "The key is [REDACTED], keep it safe."
    assert row["status"] == "complete"
    assert row["guardrails"][0]["outcome"] == "redacted"


async def test_a_pattern_spanning_three_chunks_is_caught_by_a_short_window(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    pieces = ("The key is ", "sk-ab", "cdefghijklmnopqrs", "tuvwxyz", " and more text here.")
    fake.queue(Reply.stream(*text_stream(*pieces)))
    bounded = {"kind": '"regex"', "pattern": '"sk-[a-z]{26}"'}  # 29 long: 30 held back
    config = openai_connection_toml(fake.base_url) + rail("exact", "redact", **bounded)
    async with running_gateway(tmp_path, config) as gw, sdk(gw) as client:
        text, _ = await streamed(client)
    assert text == "The key is [REDACTED] and more text here."


async def test_tool_call_arguments_are_checked(tmp_path: Path, fake: FakeUpstream) -> None:
    fake.queue(Reply.stream((FIXTURES / "openai" / "tool_call_fragments.raw").read_bytes()))
    words = {"kind": '"keywords"', "words": '["Berlin"]'}
    config = openai_connection_toml(fake.base_url) + rail("no-cities", "redact", **words)
    async with (
        running_gateway(tmp_path, config) as gw,
        sdk(gw) as client,
        client.chat.completions.stream(model="test/gpt-fake", messages=USER) as stream,
    ):
        final = await stream.get_final_completion()
    [call] = final.choices[0].message.tool_calls or []
    assert json.loads(call.function.arguments) == {"city": "[REDACTED]", "unit": "celsius"}
    assert final.choices[0].finish_reason == "tool_calls"


async def test_an_invalid_structured_output_is_blocked_before_any_of_it_goes_out(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.queue(Reply.stream(*text_stream('{"answer": ', '"yes"', ", oops")))
    schema = {"kind": '"json_schema"', "schema": '{ type = "object", required = ["answer"] }'}
    config = openai_connection_toml(fake.base_url) + rail("json-out", **schema)
    seen: list[str] = []
    async with running_gateway(tmp_path, config) as gw, sdk(gw) as client:
        stream = await client.chat.completions.create(
            model="test/gpt-fake", messages=USER, stream=True
        )
        with pytest.raises(APIError, match="json-out"):
            async for c in stream:
                seen.append(c.choices[0].delta.content or "" if c.choices else "")
    assert "".join(seen) == ""


async def test_an_input_block_is_a_400_and_never_reaches_the_upstream(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    words = {"kind": '"keywords"', "words": '["key"]', "case_insensitive": "true"}
    config = openai_connection_toml(fake.base_url) + rail("no-key-talk", stage="input", **words)
    async with running_gateway(tmp_path, config) as gw, sdk(gw) as client:
        with pytest.raises(BadRequestError) as info:
            await client.chat.completions.create(model="test/gpt-fake", messages=USER, stream=True)
        row = await record(gw, info.value.response.headers["x-request-id"])
    body: Any = info.value.body
    assert info.value.status_code == 400
    assert (body["type"], body["code"]) == ("guardrail_error", "guardrail_blocked")
    assert "no-key-talk" in body["message"] and "key?" not in body["message"]
    assert fake.requests == []
    assert row["status"] == "blocked" and row["credits_held"] is None
    assert row["guardrails"] == [
        {"name": "no-key-talk", "stage": "input", "action": "block", "outcome": "blocked"}
    ]


async def test_an_input_redaction_rewrites_what_the_upstream_gets(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    config = openai_connection_toml(fake.base_url) + rail(
        "pii-in", "redact", stage="input", kind='"pii"', entities='["email"]'
    )
    ask: list[ChatCompletionMessageParam] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Mail jane@example.com now"}]},
    ]
    async with running_gateway(tmp_path, config) as gw, sdk(gw) as client:
        await client.chat.completions.create(model="test/gpt-fake", messages=ask, stream=True)
    sent = fake.requests[0].json()["messages"]
    assert sent[0]["content"] == "Be brief."
    assert sent[1]["content"] == [{"type": "text", "text": "Mail [REDACTED] now"}]


async def test_a_whole_answer_is_redacted_or_blocked(tmp_path: Path, fake: FakeUpstream) -> None:
    fake.queue(Reply.json(completion(f"Here: {KEY}.")), Reply.json(completion("a forbidden word")))
    config = (
        openai_connection_toml(fake.base_url)
        + rail("no-secrets", "redact", **NO_KEYS)
        + rail("words", kind='"keywords"', words='["forbidden"]')
    )
    async with running_gateway(tmp_path, config) as gw, sdk(gw) as client:
        result = await client.chat.completions.create(model="test/gpt-fake", messages=USER)
        with pytest.raises(BadRequestError, match="words") as info:
            await client.chat.completions.create(model="test/gpt-fake", messages=USER)
        row = await record(gw, info.value.response.headers["x-request-id"])
    assert result.choices[0].message.content == "Here: [REDACTED]."
    assert row["status"] == "blocked" and row["completion_tokens"] == 5


async def test_a_route_scoped_guardrail_applies_to_that_route_only(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.queue(Reply.stream(*text_stream(*THREE_CHUNKS)), Reply.stream(*text_stream(*THREE_CHUNKS)))
    config = (
        openai_connection_toml(fake.base_url)
        + ROUTE
        + rail("no-secrets", "redact", applies_to='{ routes = ["support-bot"] }', **NO_KEYS)
    )
    async with running_gateway(tmp_path, config) as gw, sdk(gw) as client:
        routed, _ = await streamed(client, "support-bot")
        direct, _ = await streamed(client, "test/gpt-fake")
    assert routed == "The key is [REDACTED], keep it safe."
    assert direct == "".join(THREE_CHUNKS)


async def test_a_log_action_changes_nothing_but_the_log(tmp_path: Path, fake: FakeUpstream) -> None:
    fake.queue(Reply.stream(*text_stream(*THREE_CHUNKS)))
    config = openai_connection_toml(fake.base_url) + rail("watch", "log", **NO_KEYS)
    async with running_gateway(tmp_path, config) as gw, sdk(gw) as client:
        text, request_id = await streamed(client)
        row = await record(gw, request_id)
    assert text == "".join(THREE_CHUNKS)
    assert row["guardrails"] == [
        {"name": "watch", "stage": "output", "action": "log", "outcome": "matched"}
    ]


async def test_a_redacted_whole_answer_carries_no_logprobs_that_spell_the_secret(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    """The tokens of ``logprobs`` spell the text; after a redaction they would give the
    secret back, so a whole answer loses them as a stream does."""
    doc = completion(f"Here: {KEY}.")
    tokens = ["Here", ":", " ", *[KEY[i : i + 4] for i in range(0, len(KEY), 4)], "."]
    doc["choices"][0]["logprobs"] = {
        "content": [
            {"token": t, "logprob": -0.1, "bytes": None, "top_logprobs": []} for t in tokens
        ]
    }
    fake.queue(Reply.json(doc))
    config = openai_connection_toml(fake.base_url) + rail("no-secrets", "redact", **NO_KEYS)
    async with running_gateway(tmp_path, config) as gw:
        assert gw.dev_key is not None
        body = json.dumps({"model": "test/gpt-fake", "messages": USER, "logprobs": True})
        resp = await exchange(
            gw.host, gw.port, post("/v1/chat/completions", body.encode(), gw.dev_key.key)
        )
    choice = resp.json()["choices"][0]
    assert choice["message"]["content"] == "Here: [REDACTED]."
    assert "logprobs" not in choice or choice["logprobs"] is None
    assert KEY[4:12].encode() not in resp.body
