"""Bedrock's wire format for the fake upstream: event-stream frames, Converse events,
responses and errors.

The frame encoder is written here from the AWS framing rules, independently of the
decoder in ``sluice.wire.eventstream``; ``tests/wire/test_eventstream.py`` checks both
against botocore's own parser. Event payloads carry the ``p`` padding field real
Bedrock streams carry (clients ignore it).
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass
from typing import Any

from tests.support.fake_upstream import Reply, Step

EVENTSTREAM = "application/vnd.amazon.eventstream"
PADDING = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


@dataclass(frozen=True)
class Typed:
    """A header value with an explicit wire type (2 byte, 3 short, 5 long, 8 timestamp,
    9 uuid); plain ``bool``, ``int`` (int32), ``bytes`` and ``str`` need no wrapper."""

    kind: int
    value: int | bytes


def _header(name: str, value: bool | int | bytes | str | Typed) -> bytes:
    raw_name = name.encode()
    out = struct.pack("!B", len(raw_name)) + raw_name
    if isinstance(value, bool):
        return out + struct.pack("!B", 0 if value else 1)
    if isinstance(value, Typed):
        if value.kind == 9:
            assert isinstance(value.value, bytes) and len(value.value) == 16
            return out + b"\x09" + value.value
        fmt = {2: "!b", 3: "!h", 4: "!i", 5: "!q", 8: "!q"}[value.kind]
        return out + struct.pack("!B", value.kind) + struct.pack(fmt, value.value)
    if isinstance(value, int):
        return out + b"\x04" + struct.pack("!i", value)
    data, kind = (value, 6) if isinstance(value, bytes) else (value.encode(), 7)
    return out + struct.pack("!BH", kind, len(data)) + data


def frame(headers: dict[str, bool | int | bytes | str | Typed], payload: bytes) -> bytes:
    """One event-stream message."""
    head = b"".join(_header(name, value) for name, value in headers.items())
    total = 12 + len(head) + len(payload) + 4
    prelude = struct.pack("!II", total, len(head))
    prelude += struct.pack("!I", zlib.crc32(prelude))
    body = prelude + head + payload
    return body + struct.pack("!I", zlib.crc32(body))


def event(event_type: str, doc: dict[str, Any]) -> bytes:
    """A Converse stream event: its members as JSON, plus the padding field."""
    payload = json.dumps({**doc, "p": PADDING[: 1 + len(json.dumps(doc)) % 40]})
    headers: dict[str, bool | int | bytes | str | Typed] = {
        ":event-type": event_type,
        ":content-type": "application/json",
        ":message-type": "event",
    }
    return frame(headers, payload.encode())


def exception(exception_type: str, message: str, **extra: Any) -> bytes:
    """An exception frame, e.g. ``throttlingException``."""
    headers: dict[str, bool | int | bytes | str | Typed] = {
        ":exception-type": exception_type,
        ":content-type": "application/json",
        ":message-type": "exception",
    }
    return frame(headers, json.dumps({"message": message, **extra}).encode())


# --- Converse stream events ------------------------------------------------------------


def message_start() -> bytes:
    return event("messageStart", {"role": "assistant"})


def text_delta(text: str, block: int = 0) -> bytes:
    return event("contentBlockDelta", {"contentBlockIndex": block, "delta": {"text": text}})


def reasoning_delta(block: int = 0, **delta: str) -> bytes:
    """``text=…``, ``signature=…`` or ``redactedContent=<base64>``."""
    doc = {"contentBlockIndex": block, "delta": {"reasoningContent": delta}}
    return event("contentBlockDelta", doc)


def tool_start(block: int, tool_use_id: str, name: str) -> bytes:
    start = {"toolUse": {"toolUseId": tool_use_id, "name": name}}
    return event("contentBlockStart", {"contentBlockIndex": block, "start": start})


def tool_delta(block: int, fragment: str) -> bytes:
    doc = {"contentBlockIndex": block, "delta": {"toolUse": {"input": fragment}}}
    return event("contentBlockDelta", doc)


def block_stop(block: int = 0) -> bytes:
    return event("contentBlockStop", {"contentBlockIndex": block})


def message_stop(reason: str = "end_turn") -> bytes:
    return event("messageStop", {"stopReason": reason})


def metadata(
    input_tokens: int, output_tokens: int, *, cache_read: int = 0, cache_write: int = 0
) -> bytes:
    usage: dict[str, int] = {
        "inputTokens": input_tokens,
        "outputTokens": output_tokens,
        "totalTokens": input_tokens + output_tokens + cache_read + cache_write,
    }
    if cache_read or cache_write:
        usage["cacheReadInputTokens"] = cache_read
        usage["cacheWriteInputTokens"] = cache_write
    return event("metadata", {"usage": usage, "metrics": {"latencyMs": 412}})


def text_stream(*pieces: str, usage: tuple[int, int] = (12, 4)) -> list[bytes]:
    steps = [message_start()]
    steps += [text_delta(piece) for piece in pieces]
    steps += [block_stop(), message_stop(), metadata(*usage)]
    return steps


def stream_reply(*steps: Step) -> Reply:
    headers = {"content-type": EVENTSTREAM, "x-amzn-requestid": "7c0b5ad4-fake-4d7e-9a0b"}
    return Reply(200, headers, steps=list(steps))


# --- Converse (non-streaming) and errors ------------------------------------------------


def converse_response(
    content: list[dict[str, Any]],
    *,
    stop: str = "end_turn",
    usage: dict[str, int] | None = None,
) -> dict[str, Any]:
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop,
        "usage": usage or {"inputTokens": 12, "outputTokens": 4, "totalTokens": 16},
        "metrics": {"latencyMs": 380},
    }


def error_reply(status: int, error_type: str, message: str) -> Reply:
    headers = {
        "x-amzn-errortype": f"{error_type}:http://internal.amazon.com/coral/com.amazon.bedrock/",
        "x-amzn-requestid": "7c0b5ad4-fake-4d7e-9a0b",
    }
    return Reply.json({"message": message}, status, **headers)
