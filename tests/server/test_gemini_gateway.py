"""The official openai SDK → the gateway → a fake Gemini upstream, over real sockets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletionMessageFunctionToolCall, ChatCompletionMessageParam

from sluice.server.lifecycle import RunningGateway
from tests.support.fake_gemini import call, candidate, error, response, text, usage
from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.gateway import UPSTREAM_KEY, running_gateway
from tests.support.transcript import FIXTURES

USER: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Say hello"}]
MODEL = "google/gemini-test"


def gemini_toml(fake: FakeUpstream) -> str:
    return f"""
[[connections]]
id = "conn_gemini"
provider = "gemini"
base_url = "{fake.root_url}"
api_key_env = "FAKE_UPSTREAM_KEY"

[[models]]
id = "{MODEL}"
providers = {{ conn_gemini = "gemini-test" }}
price = {{ input = 1.25, output = 10.0, cache_read = 0.3125 }}
"""


def sdk(gw: RunningGateway) -> AsyncOpenAI:
    assert gw.dev_key is not None
    return AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=gw.dev_key.key, max_retries=0)


def fixture(name: str) -> Reply:
    return Reply.stream((FIXTURES / "gemini" / f"{name}.raw").read_bytes())


def extra(obj: Any) -> dict[str, Any]:
    return dict(obj.model_extra or {})


async def test_stream_text_usage_and_the_request_gemini_receives(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.queue(fixture("prompt_cache"))
    async with running_gateway(tmp_path, gemini_toml(fake)) as gw, sdk(gw) as client:
        stream = await client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "system", "content": "Answer from the manual."}, *USER],
            stream=True,
            stream_options={"include_usage": True},
            temperature=0.3,
            max_tokens=200,
        )
        chunks = [c async for c in stream]
    text_out = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text_out == (
        "According to the manual, reset the router by holding the button for ten seconds."
    )
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert extra(chunks[0])["provider"] == "gemini"
    used = chunks[-1].usage
    assert chunks[-1].choices == [] and used is not None
    assert (used.prompt_tokens, used.completion_tokens, used.total_tokens) == (4286, 19, 4305)
    assert used.prompt_tokens_details is not None
    assert used.prompt_tokens_details.cached_tokens == 4011
    cost = ((4286 - 4011) * 1.25 + 4011 * 0.3125 + 19 * 10.0) / 1e6
    assert extra(used)["cost"] == pytest.approx(cost, abs=1e-12)

    sent = fake.requests[0]
    assert sent.method == "POST"
    assert sent.path == "/v1beta/models/gemini-test:streamGenerateContent?alt=sse"
    assert sent.headers["x-goog-api-key"] == UPSTREAM_KEY
    assert "authorization" not in sent.headers
    assert sent.json() == {
        "contents": [{"parts": [{"text": "Say hello"}], "role": "user"}],
        "systemInstruction": {"parts": [{"text": "Answer from the manual."}]},
        "generationConfig": {"maxOutputTokens": 200, "temperature": 0.3},
    }


ARGS: dict[str, dict[int, tuple[str, Any]]] = {
    "tool_call_fragments": {
        0: (
            "search_places",
            {
                "query": 'cafés near "Bahnhofstrasse"',
                "filters": [
                    {"field": "rating", "op": "gte", "value": 4.5},
                    {"field": "open_now", "op": "eq", "value": True},
                ],
                "location": {"city": "Zürich", "country": "CH", "radius_km": 1.5},
                "limit": 5,
                "notes": "line one\nline two",
                "tags": [],
            },
        )
    },
    "parallel_tool_calls": {
        0: ("get_weather", {"city": "Paris", "unit": "celsius"}),
        1: ("get_time", {"tz": "Europe/Paris"}),
    },
    "text_then_tool": {0: ("get_weather", {"city": "Berlin"})},
}


@pytest.mark.parametrize("name", sorted(ARGS))
async def test_tool_call_arguments_reassemble_to_the_exact_json(
    tmp_path: Path, fake: FakeUpstream, name: str
) -> None:
    fake.queue(fixture(name))
    async with (
        running_gateway(tmp_path, gemini_toml(fake)) as gw,
        sdk(gw) as client,
        client.chat.completions.stream(model=MODEL, messages=USER) as stream,
    ):
        final = await stream.get_final_completion()
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = choice.message.tool_calls or []
    assert {i: c.function.name for i, c in enumerate(calls)} == {
        i: name for i, (name, _) in ARGS[name].items()
    }
    for i, c in enumerate(calls):
        compact = json.dumps(ARGS[name][i][1], separators=(",", ":"), ensure_ascii=False)
        assert c.function.arguments == compact
    assert all(c.id for c in calls) and len({c.id for c in calls}) == len(calls)
    if name == "text_then_tool":
        assert calls[0].id == "3vfrwh2k"
        assert choice.message.content == "Let me check the weather in Berlin for you."


async def test_thoughts_stream_as_reasoning_content(tmp_path: Path, fake: FakeUpstream) -> None:
    fake.queue(fixture("thinking"))
    async with running_gateway(tmp_path, gemini_toml(fake)) as gw, sdk(gw) as client:
        stream = await client.chat.completions.create(
            model=MODEL,
            messages=USER,
            stream=True,
            stream_options={"include_usage": True},
            reasoning_effort="low",
        )
        chunks = [c async for c in stream]
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    reasoning = "".join(extra(d).get("reasoning_content", "") for d in deltas)
    assert reasoning.startswith("**Comparing the numbers**")
    assert "".join(d.content or "" for d in deltas) == "9.9 is larger than 9.11."
    used = chunks[-1].usage
    assert used is not None and used.completion_tokens_details is not None
    assert (used.completion_tokens, used.completion_tokens_details.reasoning_tokens) == (310, 301)
    config = fake.requests[0].json()["generationConfig"]
    assert config == {"thinkingConfig": {"thinkingBudget": 1024, "includeThoughts": True}}


async def test_mid_stream_error_reaches_the_sdk(tmp_path: Path, fake: FakeUpstream) -> None:
    fake.queue(fixture("error_midstream"))
    seen = []
    async with running_gateway(tmp_path, gemini_toml(fake)) as gw, sdk(gw) as client:
        stream = await client.chat.completions.create(model=MODEL, messages=USER, stream=True)
        with pytest.raises(openai.APIError) as info:
            async for chunk in stream:
                seen.append(chunk)
    assert "".join(c.choices[0].delta.content or "" for c in seen if c.choices) == "Partial"
    assert "overloaded" in info.value.message


async def test_safety_stop_is_content_filter(tmp_path: Path, fake: FakeUpstream) -> None:
    fake.queue(fixture("safety"))
    async with running_gateway(tmp_path, gemini_toml(fake)) as gw, sdk(gw) as client:
        stream = await client.chat.completions.create(model=MODEL, messages=USER, stream=True)
        chunks = [c async for c in stream]
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "content_filter"


async def test_non_stream_answer(tmp_path: Path, fake: FakeUpstream) -> None:
    doc = response(
        candidate(text("Hi", thought=True), text("Hello there"), finish="STOP"),
        usage=usage(12, 3, thoughts=4),
    )
    fake.queue(Reply.json(doc))
    async with running_gateway(tmp_path, gemini_toml(fake)) as gw, sdk(gw) as client:
        result = await client.chat.completions.create(model=MODEL, messages=USER, n=1)
    choice = result.choices[0]
    assert (choice.message.content, choice.finish_reason) == ("Hello there", "stop")
    assert extra(choice.message)["reasoning_content"] == "Hi"
    assert result.usage is not None
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (12, 7)
    sent = fake.requests[0]
    assert sent.path == "/v1beta/models/gemini-test:generateContent"
    assert sent.json()["generationConfig"] == {"candidateCount": 1}


async def test_a_tool_conversation_is_sent_as_gemini_turns(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.queue(Reply.json(response(candidate(text("It is 21°C."), finish="STOP"))))
    messages: list[ChatCompletionMessageParam] = [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_x1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_x1", "content": '{"temp_c": 21}'},
    ]
    async with running_gateway(tmp_path, gemini_toml(fake)) as gw, sdk(gw) as client:
        result = await client.chat.completions.create(model=MODEL, messages=messages)
    assert result.choices[0].message.content == "It is 21°C."
    assert fake.requests[0].json()["contents"] == [
        {"parts": [{"text": "Weather in Paris?"}], "role": "user"},
        {
            "parts": [
                {
                    "functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
                    "thoughtSignature": "skip_thought_signature_validator",
                }
            ],
            "role": "model",
        },
        {
            "parts": [{"functionResponse": {"name": "get_weather", "response": {"temp_c": 21}}}],
            "role": "user",
        },
    ]


async def test_upstream_rate_limit_becomes_429(tmp_path: Path, fake: FakeUpstream) -> None:
    retry = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "12s"}
    fake.queue(Reply.json(error(429, "Quota exceeded.", "RESOURCE_EXHAUSTED", retry), 429))
    async with running_gateway(tmp_path, gemini_toml(fake)) as gw, sdk(gw) as client:
        with pytest.raises(openai.RateLimitError) as info:
            await client.chat.completions.create(model=MODEL, messages=USER, stream=True)
    assert info.value.response.headers["retry-after"] == "12"


async def test_invalid_key_is_an_upstream_error_that_never_echoes_it(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    doc = error(400, f"API key not valid: {UPSTREAM_KEY}", "INVALID_ARGUMENT")
    doc["error"]["details"] = [
        {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"}
    ]
    fake.queue(Reply.json([doc], 400))
    async with running_gateway(tmp_path, gemini_toml(fake)) as gw, sdk(gw) as client:
        with pytest.raises(openai.APIStatusError) as info:
            await client.chat.completions.create(model=MODEL, messages=USER)
    assert info.value.status_code == 502
    assert UPSTREAM_KEY not in info.value.response.text
    assert "upstream_authentication_failed" in info.value.response.text


async def test_blocked_prompt_is_a_400(tmp_path: Path, fake: FakeUpstream) -> None:
    fake.queue(fixture("prompt_blocked"))
    async with running_gateway(tmp_path, gemini_toml(fake)) as gw, sdk(gw) as client:
        with pytest.raises(openai.BadRequestError) as info:
            await client.chat.completions.create(model=MODEL, messages=USER, stream=True)
    assert info.value.code == "content_filter"


async def test_a_function_call_id_from_gemini_is_kept(tmp_path: Path, fake: FakeUpstream) -> None:
    doc = response(candidate(call("f", {"a": 1}, id="fc_9"), finish="STOP"))
    fake.queue(Reply.json(doc))
    async with running_gateway(tmp_path, gemini_toml(fake)) as gw, sdk(gw) as client:
        result = await client.chat.completions.create(model=MODEL, messages=USER)
    calls = result.choices[0].message.tool_calls or []
    assert all(isinstance(c, ChatCompletionMessageFunctionToolCall) for c in calls)
    assert [(c.id, c.function.arguments) for c in calls if c.type == "function"] == [
        ("fc_9", '{"a":1}')
    ]
    assert result.choices[0].finish_reason == "tool_calls"
