"""boto3 reads what the fake Bedrock sends and what the fixtures hold, and accepts the
bodies the adapter builds.

If botocore's own event-stream parser and Converse model read the fake's frames,
responses and errors into the text, tool inputs and usage we expect, the fake speaks
Bedrock's wire format, so the gateway tests built on it mean something. botocore's
parameter validation of the adapter's request bodies checks the other direction.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, EventStreamError

from sluice.core.connection import ConnectionSettings, Target, Timeouts
from sluice.frontdoors.chat import decode_chat_request
from sluice.providers.bedrock import BedrockAdapter
from tests.support.fake_bedrock import converse_response, error_reply, stream_reply, text_stream
from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.gateway import counting_ids
from tests.support.transcript import FIXTURES

MODEL = "anthropic.claude-test-v1:0"
USER = [{"role": "user", "content": [{"text": "hi"}]}]
COMPLETE = [
    "text",
    "tool_call_fragments",
    "parallel_tool_calls",
    "text_then_tool",
    "reasoning",
    "length",
    "prompt_cache",
    "content_filter",
]
_T = TypeVar("_T")


@pytest.fixture(autouse=True)
def no_aws_files(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.setenv(name, "/nonexistent/aws")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


async def with_boto3(fake: FakeUpstream, call: Callable[[Any], _T]) -> _T:
    """Run ``call(client)`` in a thread while the fake serves on this loop."""

    def run() -> _T:
        session = boto3.session.Session(
            aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="x", region_name="us-east-1"
        )
        client: Any = session.client(
            "bedrock-runtime",
            endpoint_url=fake.root_url,
            config=Config(retries={"total_max_attempts": 1}),
        )
        try:
            return call(client)
        finally:
            client.close()

    return await asyncio.to_thread(run)


def stream_events(client: Any, **request: Any) -> list[dict[str, Any]]:
    request.setdefault("messages", USER)
    stream = client.converse_stream(modelId=MODEL, **request)["stream"]
    try:
        return list(stream)
    finally:  # a stream that raised keeps its connection out of the pool: close it
        stream.close()


def summarize(events: list[dict[str, Any]]) -> dict[str, Any]:
    """What a boto3 user reads from the events."""
    text, reasoning, tools, names = "", "", {}, {}
    stop, usage = None, None
    for ev in events:
        if "contentBlockStart" in ev:
            tool = ev["contentBlockStart"]["start"]["toolUse"]
            names[tool["toolUseId"]] = tool["name"]
            tools[tool["toolUseId"]] = ""
        elif "contentBlockDelta" in ev:
            delta = ev["contentBlockDelta"]["delta"]
            text += delta.get("text", "")
            reasoning += delta.get("reasoningContent", {}).get("text", "")
            if "toolUse" in delta:
                tools[list(tools)[-1]] += delta["toolUse"]["input"]
        elif "messageStop" in ev:
            stop = ev["messageStop"]["stopReason"]
        elif "metadata" in ev:
            usage = ev["metadata"]["usage"]
    calls = {i: (names[i], json.loads(args)) for i, args in tools.items()}
    return {"text": text, "reasoning": reasoning, "calls": calls, "stop": stop, "usage": usage}


def ours(name: str) -> dict[str, Any]:
    """The same from our expected transcript."""
    lines = [
        json.loads(line)
        for line in (FIXTURES / "aws-bedrock" / f"{name}.chunks.jsonl").read_text().splitlines()
    ]
    deltas = [line["choices"][0]["delta"] for line in lines[:-1]]
    args: dict[int, list[str]] = {}
    ids: dict[int, tuple[str, str]] = {}
    for delta in deltas:
        for call in delta.get("tool_calls", []):
            if "id" in call:
                ids[call["index"]] = (call["id"], call["function"]["name"])
            args.setdefault(call["index"], []).append(call["function"]["arguments"])
    usage = lines[-1]["usage"]
    return {
        "text": "".join(d.get("content", "") for d in deltas),
        "reasoning": "".join(d.get("reasoning_content", "") for d in deltas),
        "calls": {ids[i][0]: (ids[i][1], json.loads("".join(a))) for i, a in args.items()},
        "prompt_tokens": usage["prompt_tokens"],
        "completion_tokens": usage["completion_tokens"],
        "cached_tokens": usage["cached_tokens"],
    }


async def test_boto3_reads_the_fakes_stream_at_the_path_the_adapter_builds(
    fake: FakeUpstream,
) -> None:
    fake.queue(stream_reply(*text_stream("Hel", "lo", usage=(9, 2))))
    got = summarize(await with_boto3(fake, stream_events))
    assert (got["text"], got["stop"]) == ("Hello", "end_turn")
    assert got["usage"]["inputTokens"] == 9 and got["usage"]["outputTokens"] == 2
    req = decode_chat_request(
        b'{"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}]}'
    )
    conn = ConnectionSettings(
        "c", "aws-bedrock", fake.root_url, region="us-east-1", timeouts=Timeouts()
    )
    up = BedrockAdapter("aws-bedrock", counting_ids()).build_request(req, Target("m", MODEL, conn))
    assert fake.requests[0].path == up.url.removeprefix(fake.root_url)
    assert fake.requests[0].json() == json.loads(up.body)
    assert (
        fake.requests[0]
        .headers["authorization"]
        .startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    )


@pytest.mark.parametrize("name", COMPLETE)
async def test_boto3_reads_every_complete_fixture(fake: FakeUpstream, name: str) -> None:
    fake.queue(stream_reply((FIXTURES / "aws-bedrock" / f"{name}.raw").read_bytes()))
    got = summarize(await with_boto3(fake, stream_events))
    want = ours(name)
    assert (got["text"], got["reasoning"], got["calls"]) == (
        want["text"],
        want["reasoning"],
        want["calls"],
    )
    usage = got["usage"]
    cached = usage.get("cacheReadInputTokens", 0)
    prompt = usage["inputTokens"] + cached + usage.get("cacheWriteInputTokens", 0)
    assert (prompt, usage["outputTokens"], cached) == (
        want["prompt_tokens"],
        want["completion_tokens"],
        want["cached_tokens"],
    )


async def test_boto3_raises_on_the_error_fixture(fake: FakeUpstream) -> None:
    fake.queue(stream_reply((FIXTURES / "aws-bedrock" / "error_midstream.raw").read_bytes()))
    with pytest.raises(EventStreamError) as info:
        await with_boto3(fake, stream_events)
    assert info.value.response["Error"]["Code"] == "modelStreamErrorException"


def test_every_fixture_is_classified() -> None:
    names = {p.stem for p in (FIXTURES / "aws-bedrock").glob("*.raw")}
    assert names == {*COMPLETE, "error_midstream", "cut"}


async def test_boto3_reads_the_fakes_completion(fake: FakeUpstream) -> None:
    content: list[dict[str, Any]] = [
        {"text": "Checking."},
        {"toolUse": {"toolUseId": "tooluse_a", "name": "get_weather", "input": {"city": "Oslo"}}},
    ]
    doc = converse_response(content, stop="tool_use")
    fake.queue(Reply.json(doc))
    result = await with_boto3(fake, lambda c: c.converse(modelId=MODEL, messages=USER))
    assert result["output"]["message"]["content"] == content
    assert result["stopReason"] == "tool_use" and result["usage"]["totalTokens"] == 16
    assert fake.requests[0].path == "/model/anthropic.claude-test-v1%3A0/converse"
    parsed = BedrockAdapter("aws-bedrock", counting_ids()).parse_response(
        200, {}, json.dumps(doc).encode()
    )
    message = parsed.choices[0].message
    assert message.content == "Checking."
    assert message.tool_calls and json.loads(message.tool_calls[0].function.arguments) == {
        "city": "Oslo"
    }


async def test_boto3_reads_the_fakes_error(fake: FakeUpstream) -> None:
    fake.queue(error_reply(429, "ThrottlingException", "Too many requests, please wait."))
    with pytest.raises(ClientError) as info:
        await with_boto3(fake, lambda c: c.converse(modelId=MODEL, messages=USER))
    assert info.value.response["Error"] == {
        "Code": "ThrottlingException",
        "Message": "Too many requests, please wait.",
    }


RICH_REQUEST = {
    "model": "m",
    "stream": True,
    "max_tokens": 2048,
    "temperature": 0.3,
    "stop": ["###"],
    "reasoning_effort": "low",
    "messages": [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is here?", "cache_control": {"type": "ephemeral"}},
                {
                    "type": "image_url",
                    "image_url": {"url": "data:image/gif;base64,R0lGODlhAQABAAAAACw="},
                },
            ],
        },
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [
                {
                    "id": "tooluse_1",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": '{"q": "x"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "tooluse_1", "content": '{"found": true}'},
    ],
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "lookup",
                "description": "Look something up",
                "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
            },
        }
    ],
    "tool_choice": "auto",
    "response_format": {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": {"type": "object"}},
    },
}


def blobs_as_bytes(value: Any) -> Any:
    """boto3 takes blobs as bytes and base64-encodes them itself."""
    if isinstance(value, dict):
        if set(value) == {"bytes"} and isinstance(value["bytes"], str):
            return {"bytes": base64.b64decode(value["bytes"])}
        return {k: blobs_as_bytes(v) for k, v in value.items()}
    if isinstance(value, list):
        return [blobs_as_bytes(v) for v in value]
    return value


def walk(value: Any) -> Iterator[Any]:
    yield value
    children = (
        value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    )
    for child in children:
        yield from walk(child)


async def test_botocore_accepts_the_adapters_body_and_sends_it_unchanged(
    fake: FakeUpstream,
) -> None:
    req = decode_chat_request(json.dumps(RICH_REQUEST).encode())
    ours = json.loads(
        BedrockAdapter("aws-bedrock", counting_ids())
        .build_request(
            req, Target("m", MODEL, ConnectionSettings("c", "aws-bedrock", "x", region="r"))
        )
        .body
    )
    assert {"toolConfig", "additionalModelRequestFields", "outputConfig", "system"} <= set(ours)
    assert any(isinstance(v, dict) and "toolResult" in v for v in walk(ours))
    fake.queue(stream_reply(*text_stream("ok")))
    await with_boto3(fake, lambda c: stream_events(c, **blobs_as_bytes(ours)))
    assert fake.requests[0].json() == ours
