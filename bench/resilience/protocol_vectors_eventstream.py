"""The event-stream (Bedrock) hand vectors of the "malformed SSE and event streams" rows:
damaged CRCs and lengths, hostile headers, cut and garbled frames, odd payloads."""

from __future__ import annotations

import random
import struct
import zlib

from bench.resilience.protocol_streams import BEDROCK, DEEP, SMALL, Vector, fixture, frames
from sluice.wire.bounds import DEFAULT_MAX_EVENT_BYTES
from tests.support import fake_bedrock as bedrock


def frame(
    head: bytes, payload: bytes, *, total: int | None = None, headers: int | None = None
) -> bytes:
    """A frame with valid CRCs around any lengths."""
    total = 16 + len(head) + len(payload) if total is None else total
    prelude = struct.pack("!II", total, len(head) if headers is None else headers)
    prelude += struct.pack("!I", zlib.crc32(prelude))
    body = prelude + head + payload
    return body + struct.pack("!I", zlib.crc32(body))


def _header(name: bytes, kind: int, value: bytes) -> bytes:
    return bytes([len(name)]) + name + bytes([kind]) + value


def _string(name: bytes, value: bytes) -> bytes:
    return _header(name, 7, struct.pack("!H", len(value)) + value)


MESSAGE_EVENT = _string(b":message-type", b"event")


def _event_head(event_type: bytes) -> bytes:
    return _string(b":event-type", event_type) + MESSAGE_EVENT


def _flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x41]) + data[at + 1 :]


def eventstream_vectors(rng: random.Random) -> list[Vector]:
    s = SMALL
    text = bedrock.text_delta("hi")
    delta = _event_head(b"contentBlockDelta")
    deep = b'{"delta":' * DEEP + b"{}" + b"}" * DEEP
    return [
        Vector("prelude CRC wrong", _flip(text, 9)),
        Vector("message CRC wrong", _flip(text, len(text) - 1)),
        Vector("payload byte flipped", _flip(text, len(text) - 8)),
        Vector("total length shorter than its parts", frame(delta, b"{}", total=15)),
        Vector("total length 4 GiB", frame(delta, b"{}", total=0xFFFFFFFF)),
        Vector("total length just over the bound", frame(delta, b"x" * s)),
        Vector("total length exactly the bound", frame(b"", b"x" * (s - 16))),
        Vector("headers length over 128 KiB", frame(delta, b"{}", headers=200_000)),
        Vector("headers length past the total", frame(delta, b"{}", headers=len(delta) + 50)),
        Vector("unknown header type 10", frame(_header(b"x", 10, b"abcd") + delta, b"{}")),
        Vector("unknown header type 255", frame(delta + _header(b"y", 255, b""), b"{}")),
        Vector("header name runs past the headers", frame(b"\xff:event-type", b"{}")),
        Vector("string header length runs past", frame(_header(b"s", 7, b"\xff\xffab"), b"{}")),
        Vector("integer header cut short", frame(_header(b"i", 4, b"\x01"), b"")),
        Vector(
            "duplicate header names", frame(delta + _string(b":event-type", b"messageStop"), b"{}")
        ),
        Vector("invalid UTF-8 header name", frame(_string(b"\xff\xfe", b"x") + delta, b"{}")),
        Vector(
            "invalid UTF-8 header value",
            frame(_string(b":event-type", b"\xc3\x28") + MESSAGE_EVENT, b"{}"),
        ),
        Vector("a frame cut short at EOF", text[:-3]),
        Vector("only a prelude", text[:12]),
        Vector("an empty stream", b""),
        Vector("random bytes", rng.randbytes(4096)),
        Vector("valid frames, then garbage", text + rng.randbytes(64)),
        Vector("no :message-type", frame(_string(b":event-type", b"contentBlockDelta"), b"{}")),
        Vector("unknown :message-type", frame(_string(b":message-type", b"surprise"), b"{}")),
        Vector("an exception frame", bedrock.exception("throttlingException", "slow down")),
        Vector("an unknown exception frame", bedrock.exception("fooException", "x" * 100)),
        Vector(
            "an error frame",
            frame(_string(b":message-type", b"error") + _string(b":error-code", b"E"), b""),
        ),
        Vector("a payload that is not JSON", frame(delta, b"{not json")),
        Vector("a payload nested 100,000 deep", frame(delta, deep), DEFAULT_MAX_EVENT_BYTES),
        Vector("tool arguments for a block never started", bedrock.tool_delta(7, '{"a":1}')),
        Vector(
            "usage numbers out of range",
            frame(_event_head(b"metadata"), b'{"usage":{"inputTokens":1e999,"outputTokens":-1}}')
            + frame(_event_head(b"metadata"), b'{"usage":{"inputTokens":' + b"9" * 400 + b"}}"),
        ),
        Vector("messageStop, then garbage", bedrock.message_stop() + rng.randbytes(40)),
        Vector("a thousand empty frames", frame(b"", b"") * 1000),
        Vector(
            "every header value type",
            frame(
                _header(b"t", 0, b"")
                + _header(b"f", 1, b"")
                + _header(b"b", 2, b"\x80")
                + _header(b"h", 3, b"\x80\x00")
                + _header(b"i", 4, b"\x80\x00\x00\x00")
                + _header(b"l", 5, b"\x80" + b"\x00" * 7)
                + _header(b"y", 6, b"\x00\x02\x00\xff")
                + _header(b"ts", 8, b"\xff" * 8)
                + _header(b"u", 9, b"\x00" * 16)
                + delta,
                b'{"contentBlockIndex":0,"delta":{"text":"typed"}}',
            ),
        ),
        Vector(
            "an event type of the wrong type",
            frame(_header(b":event-type", 4, b"\0\0\0\1") + MESSAGE_EVENT, b"{}"),
        ),
        Vector(
            "wrong types in payloads",
            frame(delta, b'{"contentBlockIndex":"x","delta":5}')
            + frame(_event_head(b"messageStop"), b'{"stopReason":7}'),
        ),
        Vector("frames in reverse order", b"".join(reversed(frames(fixture(BEDROCK))))),
        Vector("an SSE stream", fixture("openai")),
    ]
