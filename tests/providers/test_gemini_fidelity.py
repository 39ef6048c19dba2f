"""The official ``google-genai`` SDK against the fake Gemini upstream and the fixtures.

If the SDK parses what the fake sends and what the fixtures hold into the same text,
function calls and usage our translator produces, the fixtures speak Gemini's wire
format. The SDK's own request for an equivalent call is compared with ours too.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest
from google import genai
from google.genai import errors, types

from sluice.core.connection import ConnectionSettings, Secret, Target, Timeouts
from sluice.frontdoors.chat import decode_chat_request
from sluice.providers.base import StreamShape
from sluice.providers.gemini import GeminiAdapter, GeminiStreamTranslator
from tests.support.fake_gemini import call, candidate, response, text, text_stream, usage
from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.gateway import counting_ids
from tests.support.transcript import FIXTURES, RECORDED_CHOICES, transcript

COMPLETE = [
    "text",
    "tool_call_fragments",
    "parallel_tool_calls",
    "text_then_tool",
    "thinking",
    "length",
    "prompt_cache",
    "safety",
    "two_candidates",
]
KEY = "AIza-fidelity-test-key"


@asynccontextmanager
async def sdk(fake: FakeUpstream) -> AsyncIterator[genai.client.AsyncClient]:
    """An SDK client on our own aiohttp session (its default one warns on creation)."""
    async with aiohttp.ClientSession() as session:
        options = types.HttpOptions(
            base_url=fake.root_url,
            api_version="v1beta",
            aiohttp_client=session,
            retry_options=types.HttpRetryOptions(attempts=1),
        )
        client = genai.Client(api_key=KEY, http_options=options)
        try:
            async with client.aio as aio:
                yield aio
        finally:
            client.close()


async def sdk_stream(fake: FakeUpstream) -> list[types.GenerateContentResponse]:
    async with sdk(fake) as aio:
        stream = await aio.models.generate_content_stream(model="gemini-test", contents="x")
        return [chunk async for chunk in stream]


def ours(name: str) -> list[dict[str, Any]]:
    raw = (FIXTURES / "gemini" / f"{name}.raw").read_bytes()
    shape = StreamShape(choices=RECORDED_CHOICES.get(name, 1))
    return transcript(GeminiStreamTranslator(counting_ids(), shape), [raw])


def sdk_view(chunks: list[types.GenerateContentResponse]) -> dict[int, dict[str, Any]]:
    """Per candidate index: text, thoughts, calls (name, args), finish reason."""
    view: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        for cand in chunk.candidates or []:
            seen = view.setdefault(cand.index or 0, {"text": "", "thoughts": "", "calls": []})
            for part in (cand.content.parts if cand.content else None) or []:
                if part.function_call is not None:
                    seen["calls"].append((part.function_call.name, part.function_call.args))
                elif part.text:
                    seen["thoughts" if part.thought else "text"] += part.text
            if cand.finish_reason is not None:
                seen["finish"] = cand.finish_reason.value
    return view


def transcript_view(lines: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    view: dict[int, dict[str, Any]] = {}
    for line in lines[:-1]:
        (choice,) = line["choices"]
        seen = view.setdefault(choice["index"], {"text": "", "thoughts": "", "calls": []})
        delta = choice["delta"]
        seen["text"] += delta.get("content", "")
        seen["thoughts"] += delta.get("reasoning_content", "")
        for frag in delta.get("tool_calls", []):
            if "name" in frag["function"]:
                seen["calls"].append([frag["function"]["name"], ""])
            else:
                seen["calls"][frag["index"]][1] += frag["function"]["arguments"]
        if choice["finish_reason"] is not None:
            seen["finish"] = choice["finish_reason"]
    for seen in view.values():
        seen["calls"] = [(name, json.loads(args)) for name, args in seen["calls"]]
    return view


OUR_FINISH = {"STOP": "stop", "MAX_TOKENS": "length", "SAFETY": "content_filter"}


async def test_sdk_reads_the_fakes_text_stream(fake: FakeUpstream) -> None:
    fake.queue(Reply.stream(*text_stream("Hel", "lo", usage=usage(3, 2))))
    chunks = await sdk_stream(fake)
    assert "".join(c.text or "" for c in chunks) == "Hello"
    meta = chunks[-1].usage_metadata
    assert meta is not None and (meta.prompt_token_count, meta.total_token_count) == (3, 5)
    sent = fake.requests[0]
    assert sent.path == "/v1beta/models/gemini-test:streamGenerateContent?alt=sse"
    assert sent.headers["x-goog-api-key"] == KEY


async def test_sdk_reads_the_fakes_whole_response(fake: FakeUpstream) -> None:
    doc = response(
        candidate(text("Hi"), call("f", {"a": [1]}, id="c1"), finish="STOP"),
        usage=usage(5, 3, cached=2),
    )
    fake.queue(Reply.json(doc))
    async with sdk(fake) as aio:
        result = await aio.models.generate_content(model="gemini-test", contents="x")
    assert result.text == "Hi"
    assert result.function_calls is not None
    assert [(c.id, c.name, c.args) for c in result.function_calls] == [("c1", "f", {"a": [1]})]
    assert result.usage_metadata is not None
    assert result.usage_metadata.cached_content_token_count == 2
    assert fake.requests[0].path == "/v1beta/models/gemini-test:generateContent"


@pytest.mark.parametrize("name", COMPLETE)
async def test_sdk_reads_every_complete_fixture_as_we_do(fake: FakeUpstream, name: str) -> None:
    fake.queue(Reply.stream((FIXTURES / "gemini" / f"{name}.raw").read_bytes()))
    chunks = await sdk_stream(fake)
    lines = ours(name)
    assert lines[-1]["end"] == "complete"
    theirs = sdk_view(chunks)
    for seen in theirs.values():
        seen["finish"] = OUR_FINISH[seen["finish"]]
        if seen["calls"] and seen["finish"] == "stop":
            seen["finish"] = "tool_calls"
    assert transcript_view(lines) == theirs
    meta = chunks[-1].usage_metadata
    assert meta is not None
    prompt = meta.prompt_token_count or 0
    thoughts = meta.thoughts_token_count or 0
    assert lines[-1]["usage"] == {
        "prompt_tokens": prompt,
        "completion_tokens": (meta.candidates_token_count or 0) + thoughts,
        "cached_tokens": meta.cached_content_token_count or 0,
        "cache_write_tokens": 0,
        "reasoning_tokens": thoughts,
        "provider_cost": None,
        "estimated": False,
    }
    assert lines[-1]["usage"]["prompt_tokens"] + lines[-1]["usage"]["completion_tokens"] == (
        meta.total_token_count
    )


async def test_sdk_raises_on_the_error_fixture(fake: FakeUpstream) -> None:
    fake.queue(Reply.stream((FIXTURES / "gemini" / "error_midstream.raw").read_bytes()))
    with pytest.raises(errors.ServerError) as info:
        await sdk_stream(fake)
    assert info.value.code == 503
    assert ours("error_midstream")[-1]["end"]["type"] == "service_unavailable"


async def test_sdk_fails_on_the_cut_fixture(fake: FakeUpstream) -> None:
    fake.queue(Reply.stream((FIXTURES / "gemini" / "cut.raw").read_bytes()))
    with pytest.raises(errors.UnknownApiResponseError):
        await sdk_stream(fake)
    assert ours("cut")[-1]["end"]["code"] == "stream_incomplete"


async def test_sdk_sees_the_blocked_prompt_we_reject(fake: FakeUpstream) -> None:
    fake.queue(Reply.stream((FIXTURES / "gemini" / "prompt_blocked.raw").read_bytes()))
    (chunk,) = await sdk_stream(fake)
    assert not chunk.candidates
    assert chunk.prompt_feedback is not None
    assert chunk.prompt_feedback.block_reason == types.BlockedReason.PROHIBITED_CONTENT
    assert ours("prompt_blocked")[-1]["end"]["code"] == "content_filter"


async def test_sdk_sees_the_malformed_call_we_reject(fake: FakeUpstream) -> None:
    fake.queue(Reply.stream((FIXTURES / "gemini" / "malformed_function_call.raw").read_bytes()))
    (chunk,) = await sdk_stream(fake)
    assert chunk.candidates is not None
    assert chunk.candidates[0].finish_reason == types.FinishReason.MALFORMED_FUNCTION_CALL
    assert ours("malformed_function_call")[-1]["end"]["code"] == "upstream_invalid_output"


def test_every_fixture_is_classified() -> None:
    names = {p.stem for p in (FIXTURES / "gemini").glob("*.raw")}
    assert names == {
        *COMPLETE,
        "error_midstream",
        "cut",
        "prompt_blocked",
        "malformed_function_call",
    }


# --- the request ------------------------------------------------------------------------

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
PNG = base64.b64decode("iVBORw0KGgo=")


def wire_form(value: Any) -> Any:
    """Protobuf JSON accepts snake_case and camelCase names, and either base64 alphabet."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            name = re.sub(r"_([a-z])", lambda m: m.group(1).upper(), key)
            if name == "thoughtSignature":
                out[name] = base64.urlsafe_b64decode(item)
            else:
                out[name] = wire_form(item)
        return out
    if isinstance(value, list):
        return [wire_form(item) for item in value]
    return value


async def test_our_request_matches_the_sdks_for_the_same_call(fake: FakeUpstream) -> None:
    fake.queue(Reply.stream(*text_stream("ok")))
    contents = [
        types.Content(
            role="user",
            parts=[
                types.Part(text="Weather here?"),
                types.Part(inline_data=types.Blob(mime_type="image/png", data=PNG)),
            ],
        ),
        types.Content(
            role="model",
            parts=[
                types.Part(
                    function_call=types.FunctionCall(name="weather", args={"city": "Oslo"}),
                    thought_signature=base64.urlsafe_b64decode("skip_thought_signature_validator"),
                )
            ],
        ),
        types.Content(
            role="user",
            parts=[
                types.Part(
                    function_response=types.FunctionResponse(name="weather", response={"tempC": -3})
                )
            ],
        ),
    ]
    config = types.GenerateContentConfig(
        system_instruction="Be brief.",
        temperature=0.2,
        top_p=0.9,
        seed=7,
        candidate_count=2,
        max_output_tokens=300,
        stop_sequences=["END"],
        presence_penalty=0.5,
        frequency_penalty=-0.5,
        response_mime_type="application/json",
        response_json_schema=SCHEMA,
        thinking_config=types.ThinkingConfig(thinking_budget=1024, include_thoughts=True),
        tools=[
            types.Tool(
                function_declarations=[
                    types.FunctionDeclaration(
                        name="weather", description="Current weather", parameters_json_schema=SCHEMA
                    )
                ]
            )
        ],
        tool_config=types.ToolConfig(
            function_calling_config=types.FunctionCallingConfig(
                mode=types.FunctionCallingConfigMode.ANY, allowed_function_names=["weather"]
            )
        ),
    )
    async with sdk(fake) as aio:
        stream = await aio.models.generate_content_stream(
            model="gemini-test", contents=contents, config=config
        )
        _ = [chunk async for chunk in stream]
    theirs = fake.requests[0]

    req = decode_chat_request(
        json.dumps(
            {
                "model": "google/gemini-test",
                "stream": True,
                "messages": [
                    {"role": "system", "content": "Be brief."},
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "Weather here?"},
                            {
                                "type": "image_url",
                                "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="},
                            },
                        ],
                    },
                    {
                        "role": "assistant",
                        "tool_calls": [
                            {
                                "id": "call_1",
                                "type": "function",
                                "function": {"name": "weather", "arguments": '{"city":"Oslo"}'},
                            }
                        ],
                    },
                    {"role": "tool", "tool_call_id": "call_1", "content": '{"tempC": -3}'},
                ],
                "temperature": 0.2,
                "top_p": 0.9,
                "seed": 7,
                "n": 2,
                "max_completion_tokens": 300,
                "stop": ["END"],
                "presence_penalty": 0.5,
                "frequency_penalty": -0.5,
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "w", "schema": SCHEMA},
                },
                "reasoning_effort": "low",
                "tools": [
                    {
                        "type": "function",
                        "function": {
                            "name": "weather",
                            "description": "Current weather",
                            "parameters": SCHEMA,
                        },
                    }
                ],
                "tool_choice": {"type": "function", "function": {"name": "weather"}},
            }
        ).encode()
    )
    conn = ConnectionSettings("c", "gemini", fake.root_url, Secret(KEY), timeouts=Timeouts())
    up = GeminiAdapter("gemini", counting_ids()).build_request(
        req, Target("google/gemini-test", "gemini-test", conn)
    )
    assert up.url == fake.root_url + theirs.path
    assert up.headers["x-goog-api-key"] == theirs.headers["x-goog-api-key"]
    sdk_body = theirs.json()
    del sdk_body["systemInstruction"]["role"]  # the SDK adds role "user"; it is optional
    assert wire_form(json.loads(up.body)) == wire_form(sdk_body)
