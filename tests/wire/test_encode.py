from __future__ import annotations

import json

import msgspec

from sluice.errors import RateLimitError, UpstreamError
from sluice.wire.chunks import (
    ChatCompletionChunk,
    Choice,
    CompletionTokensDetails,
    Delta,
    FunctionDelta,
    PromptTokensDetails,
    ToolCallDelta,
    Usage,
)
from sluice.wire.encode import ChunkEncoder, StreamIdentity
from sluice.wire.errors import error_event, error_json

IDENT = StreamIdentity(
    "req_abc", 1787481600, "anthropic/claude-sonnet-5", "anthropic", "conn_1", "primary", None
)
USAGE = Usage(24, 118, 142, PromptTokensDetails(0), CompletionTokensDetails(0), 0.001228, "list")


def test_prefix_encoding_equals_encoding_the_whole_chunk() -> None:
    encoder = ChunkEncoder(IDENT)
    batches = [
        [Choice(0, Delta(role="assistant", content=""), None)],
        [Choice(0, Delta(content='"quoted" \u2028 text'), None)],
        [
            Choice(
                0,
                Delta(tool_calls=[ToolCallDelta(0, "call_1", "function", FunctionDelta("f", ""))]),
                None,
            )
        ],
        [Choice(0, Delta(), "stop")],
    ]
    expected = b"".join(
        b"data: " + msgspec.json.encode(encoder.chunk(choices)) + b"\n\n" for choices in batches
    )
    assert encoder.events(batches) == expected
    assert encoder.events(batches[:1]) == expected.split(b"\n\n")[0] + b"\n\n"


def test_chunk_carries_every_spec_field_in_order() -> None:
    line = ChunkEncoder(IDENT).events([[Choice(0, Delta(content="Server"), None)]])
    doc = json.loads(line.removeprefix(b"data: "))
    assert list(doc) == [
        "id",
        "object",
        "created",
        "model",
        "provider",
        "connection",
        "route",
        "route_name",
        "choices",
    ]
    assert doc["choices"] == [{"index": 0, "delta": {"content": "Server"}, "finish_reason": None}]
    parsed = msgspec.json.decode(line.removeprefix(b"data: "), type=ChatCompletionChunk)
    assert parsed.route_name is None and parsed.object == "chat.completion.chunk"


def test_usage_chunk_has_empty_choices_and_all_usage_fields() -> None:
    event = ChunkEncoder(IDENT).usage_event(USAGE)
    doc = json.loads(event.removeprefix(b"data: "))
    assert doc["choices"] == []
    assert doc["usage"] == {
        "prompt_tokens": 24,
        "completion_tokens": 118,
        "total_tokens": 142,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0},
        "cost": 0.001228,
        "price_source": "list",
    }
    assert "credits_used" not in doc
    credited = json.loads(ChunkEncoder(IDENT).usage_event(USAGE, 0.5).removeprefix(b"data: "))
    assert credited["credits_used"] == 0.5


def test_error_envelope_before_the_stream() -> None:
    err = RateLimitError("slow down", code="rate_limited", param=None, retry_after=3)
    assert json.loads(error_json(err)) == {
        "error": {
            "message": "slow down",
            "type": "rate_limit_error",
            "code": "rate_limited",
            "param": None,
        }
    }


def test_error_event_mid_stream_with_and_without_usage() -> None:
    err = UpstreamError("The response stream ended before it completed.", code="stream_incomplete")
    plain = error_event(err)
    assert plain == (
        b'data: {"error":{"message":"The response stream ended before it '
        b'completed.","type":"upstream_error","code":"stream_incomplete"}}\n\n'
    )
    with_usage = json.loads(error_event(err, USAGE).removeprefix(b"data: "))
    assert with_usage["usage"]["completion_tokens"] == 118
