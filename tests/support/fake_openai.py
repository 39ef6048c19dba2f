"""OpenAI's wire format for the fake upstream: chunks, streams, completions."""

from __future__ import annotations

import json
from typing import Any

from tests.support.fake_upstream import FakeUpstream, Reply, Step

DONE = b"data: [DONE]\n\n"


def chunk(
    *,
    content: str | None = None,
    role: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    finish: str | None = None,
    index: int = 0,
    reasoning: str | None = None,
    usage: dict[str, Any] | None = None,
    choices: bool = True,
) -> bytes:
    """One OpenAI ``chat.completion.chunk`` SSE event."""
    delta: dict[str, Any] = {}
    if role is not None:
        delta["role"] = role
    if content is not None:
        delta["content"] = content
    if reasoning is not None:
        delta["reasoning_content"] = reasoning
    if tool_calls is not None:
        delta["tool_calls"] = tool_calls
    doc: dict[str, Any] = {
        "id": "chatcmpl-fake123",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "gpt-fake",
        "system_fingerprint": "fp_fake",
        "choices": [{"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}]
        if choices
        else [],
    }
    if usage is not None:
        doc["usage"] = usage
    return b"data: " + json.dumps(doc, separators=(",", ":")).encode() + b"\n\n"


def text_stream(
    *pieces: str, usage: dict[str, Any] | None = None, finish: str = "stop"
) -> list[Step]:
    steps: list[Step] = [chunk(role="assistant", content="")]
    steps += [chunk(content=p) for p in pieces]
    steps.append(chunk(finish=finish))
    if usage is not None:
        steps.append(chunk(usage=usage, choices=False))
    steps.append(DONE)
    return steps


def completion(
    content: str | None,
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    finish: str = "stop",
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-fake123",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "gpt-fake",
        "system_fingerprint": "fp_fake",
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        "usage": usage or {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def openai_default(fake: FakeUpstream) -> FakeUpstream:
    """Answer unscripted requests with a short OpenAI stream."""
    fake.default = Reply.stream(*text_stream("Hello", " world"))
    return fake
