"""Anthropic's Messages wire format for the fake upstream: SSE events, streams, messages.

Events are named (``event: …``) as Anthropic sends them; the official SDK skips
unnamed ones. ``tests/providers/test_anthropic_fidelity.py`` checks the SDK parses all
of it.
"""

from __future__ import annotations

import json
from typing import Any

MODEL = "claude-test"
MESSAGE_ID = "msg_01FakeUpstreamAnthropic01"
PING = b'event: ping\ndata: {"type": "ping"}\n\n'


def event(name: str, doc: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(doc, separators=(',', ':'))}\n\n".encode()


def usage(
    input_tokens: int, output_tokens: int, *, cache_write: int = 0, cache_read: int = 0
) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "cache_creation_input_tokens": cache_write,
        "cache_read_input_tokens": cache_read,
        "output_tokens": output_tokens,
    }


def message_start(input_tokens: int = 12, *, cache_write: int = 0, cache_read: int = 0) -> bytes:
    message: dict[str, Any] = {
        "id": MESSAGE_ID,
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage(input_tokens, 1, cache_write=cache_write, cache_read=cache_read),
    }
    return event("message_start", {"type": "message_start", "message": message})


def block_start(index: int, block: dict[str, Any]) -> bytes:
    return event(
        "content_block_start",
        {"type": "content_block_start", "index": index, "content_block": block},
    )


def block_delta(index: int, delta: dict[str, Any]) -> bytes:
    return event(
        "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
    )


def block_stop(index: int) -> bytes:
    return event("content_block_stop", {"type": "content_block_stop", "index": index})


def text_block(index: int, *pieces: str) -> list[bytes]:
    steps: list[bytes] = [block_start(index, {"type": "text", "text": ""})]
    steps += [block_delta(index, {"type": "text_delta", "text": p}) for p in pieces]
    steps.append(block_stop(index))
    return steps


def tool_block(index: int, call_id: str, name: str, *fragments: str) -> list[bytes]:
    """A ``tool_use`` block whose input arrives as ``input_json_delta`` fragments."""
    steps: list[bytes] = [
        block_start(index, {"type": "tool_use", "id": call_id, "name": name, "input": {}})
    ]
    steps += [
        block_delta(index, {"type": "input_json_delta", "partial_json": f})
        for f in ("", *fragments)
    ]
    steps.append(block_stop(index))
    return steps


def message_end(stop_reason: str, final_usage: dict[str, Any]) -> list[bytes]:
    delta = {"stop_reason": stop_reason, "stop_sequence": None}
    return [
        event("message_delta", {"type": "message_delta", "delta": delta, "usage": final_usage}),
        event("message_stop", {"type": "message_stop"}),
    ]


def error_event(kind: str, message: str) -> bytes:
    doc = {"type": "error", "error": {"type": kind, "message": message}}
    return event("error", doc)


def text_stream(
    *pieces: str, stop_reason: str = "end_turn", final_usage: dict[str, Any] | None = None
) -> list[bytes]:
    return [
        message_start(),
        PING,
        *text_block(0, *pieces),
        *message_end(stop_reason, final_usage or usage(12, len(pieces))),
    ]


def message(
    content: list[dict[str, Any]],
    *,
    stop_reason: str = "end_turn",
    final_usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A whole (non-streaming) Message."""
    return {
        "id": MESSAGE_ID,
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": final_usage or usage(12, 5),
    }


def error_body(kind: str, message: str) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": kind, "message": message},
        "request_id": "req_011CFakeUpstream",
    }


def whole_message(*content: dict[str, Any], stop_reason: str = "end_turn") -> dict[str, Any]:
    """A whole (not streamed) Messages answer holding ``content``."""
    return {
        "id": MESSAGE_ID,
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": list(content),
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 20, "output_tokens": 5},
    }
