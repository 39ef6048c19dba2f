"""Hostile upstream streams for the stream translators (the "malformed SSE and event
streams" rows): hand vectors, a reference SSE decoder, and one run of a translator
over one split of a stream, with everything the rows check recorded.

A translator (``AdapterRegistry(...).adapter(kind).stream(req)``) is fed the pieces
of a stream as the transport would feed its reads, then finished. Its *transcript*
(every chunk it produced, then how it ended, its usage and output size) must not
depend on the split; ``feed`` must never raise; ``finish`` may raise only an
:class:`~sluice.errors.ApiError`; and its decoder's ``buffered`` must stay within the
documented bound: ``max_event_bytes`` for SSE ("never above the limit"), one
message's worth plus the last read for the AWS event stream.
"""

from __future__ import annotations

import itertools
import json
import random
import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from sluice.errors import ApiError
from sluice.ids import IdFactory
from sluice.providers.base import StreamTranslator
from sluice.providers.bedrock.stream import BedrockStreamTranslator
from sluice.providers.registry import AdapterRegistry
from sluice.providers.sse_stream import SSEStreamTranslator
from sluice.server.chat import decode_chat_request
from sluice.wire.bounds import DEFAULT_MAX_EVENT_BYTES
from sluice.wire.chat import ChatRequest
from tests.support import fake_bedrock as bedrock

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures"
SSE_KINDS = ("openai", "anthropic", "gemini")
BEDROCK = "aws-bedrock"
KINDS = (*SSE_KINDS, BEDROCK)
SMALL = 1024
"""The decoder bound most vectors are sized against (so "endless" is a few KiB)."""
BOM = b"\xef\xbb\xbf"
DEEP = 100_000


def counting_ids() -> IdFactory:
    counter = itertools.count(1)
    return lambda prefix: f"{prefix}_{next(counter):06d}"


def stream_request() -> ChatRequest:
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "x"}]}
    return decode_chat_request(json.dumps(body).encode())


_REQUEST = stream_request()


def translator(kind: str, bound: int) -> StreamTranslator:
    return AdapterRegistry(counting_ids(), bound).adapter(kind).stream(_REQUEST)


def buffered(t: StreamTranslator) -> int:
    """Bytes the translator's decoder holds right now."""
    if isinstance(t, SSEStreamTranslator):
        return t._sse.buffered
    if isinstance(t, BedrockStreamTranslator):
        return t._decoder.buffered
    raise TypeError(f"no decoder known for {type(t).__name__}")


def _plain(value: object) -> Any:
    return json.loads(msgspec.json.encode(value))


@dataclass
class Run:
    """One translator over one split of one stream."""

    transcript: list[Any]
    problems: list[str] = field(default_factory=list)
    """``feed`` raising, ``finish`` raising something that is not an ApiError."""
    max_buffered: int = 0
    over_bound: int = 0
    """The most bytes ``buffered`` was above its bound (0: never)."""
    worst: tuple[int, int] = (0, 1)
    """(buffered, its cap) where buffered came closest to (or went furthest past) its cap."""


def run(kind: str, bound: int, pieces: Sequence[bytes]) -> Run:
    t = translator(kind, bound)
    sse = isinstance(t, SSEStreamTranslator)
    out: list[Any] = []
    result = Run(out)
    for piece in pieces:
        try:
            batch = t.feed(piece)
        except Exception as exc:  # the one thing feed must never do
            result.problems.append(f"feed raised {type(exc).__name__}: {str(exc)[:80]}")
            out.append({"feed raised": type(exc).__name__})
            return result
        out.extend(_plain(choices) for choices in batch)
        held = buffered(t)
        cap = bound if sse else bound + len(piece)
        result.max_buffered = max(result.max_buffered, held)
        result.over_bound = max(result.over_bound, held - cap)
        if held * result.worst[1] > result.worst[0] * cap:
            result.worst = (held, cap)
        if t.failure is not None:
            break  # the gateway stops reading an upstream that failed
    end: Any
    try:
        out.extend(_plain(choices) for choices in t.finish())
        end = "complete"
    except ApiError as exc:
        end = {"type": exc.type, "code": exc.code}
    except Exception as exc:
        result.problems.append(f"finish raised {type(exc).__name__}: {str(exc)[:80]}")
        end = {"finish raised": type(exc).__name__}
    out.append({"end": end, "usage": _plain(t.usage), "output_chars": t.output_chars})
    return result


def splits(data: bytes, rng: random.Random, count: int, *, bytewise: bool) -> Iterator[list[bytes]]:
    """The splits a stream is fed in: whole, byte by byte (or in 61-byte pieces), then
    ``count`` random splits (1 to 16 cuts, or reads of 1 to 64 bytes)."""
    yield [data]
    step = 1 if bytewise else 61
    yield [data[i : i + step] for i in range(0, len(data), step)]
    for n in range(count):
        if len(data) < 2:
            return
        if n % 2:
            cuts = sorted(rng.sample(range(1, len(data)), k=min(len(data) - 1, rng.randint(1, 16))))
        else:
            cuts, at = [], 0
            while (at := at + rng.randint(1, 64)) < len(data):
                cuts.append(at)
        yield [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]


# --- the reference SSE decoder -------------------------------------------------------


class TooLargeError(Exception):
    """The reference decoder's bound was passed."""


def reference_sse(
    data: bytes, bound: int
) -> tuple[list[tuple[bytes, str | None, str | None, int | None]], bool]:
    """The WHATWG event-stream rules as ``sluice.wire.sse`` documents them, on a whole
    stream: (events as (data, event, id, retry), whether the bound was passed). The
    bound: what one event holds, its data so far (each data line its value and the LF
    that joins it) and the line being read, must stay within ``max_event_bytes``."""
    if data.startswith(BOM):
        data = data[len(BOM) :]
    lines = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
    tail = lines.pop()  # unterminated last line (b"" when the stream ends in a line end)
    events: list[tuple[bytes, str | None, str | None, int | None]] = []
    buf: list[bytes] = []
    size = 0
    event: str | None = None
    last_id: str | None = None
    retry: int | None = None
    try:
        for n, line in enumerate([*lines, tail]):
            if len(line) + size > bound:  # the line being read and the event so far
                raise TooLargeError
            if not line:
                if n == len(lines):
                    break  # the stream ended on a line end
                if buf:
                    events.append((b"\n".join(buf), event, last_id, retry))
                buf, size, event, retry = [], 0, None, None
                continue
            if line.startswith(b":"):
                continue
            name, colon, value = line.partition(b":")
            if colon and value.startswith(b" "):
                value = value[1:]
            if name == b"data":
                size += len(value) + 1
                if size > bound:
                    raise TooLargeError
                buf.append(value)
            elif name == b"event":
                event = value.decode("utf-8", "replace")
            elif name == b"id" and b"\0" not in value:
                last_id = value.decode("utf-8", "replace")
            elif name == b"retry" and value.isdigit() and len(value) <= 15:
                retry = int(value)
    except TooLargeError:
        return events, True
    return events, False


# --- fixtures -----------------------------------------------------------------------


def fixture(folder: str, case: str = "text") -> bytes:
    return (FIXTURES / folder / f"{case}.raw").read_bytes()


def sse_events(raw: bytes) -> list[bytes]:
    """A recorded SSE stream cut into its events (each with its blank line)."""
    body = raw.replace(b"\r\n", b"\n")
    return [e + b"\n\n" for e in body.split(b"\n\n") if e.strip()]


def frames(raw: bytes) -> list[bytes]:
    """A recorded event stream cut into its frames."""
    out, at = [], 0
    while at + 4 <= len(raw):
        (total,) = struct.unpack_from("!I", raw, at)
        if total < 16:
            break
        out.append(raw[at : at + total])
        at += total
    return out


def embedded(kind: str, hostile: bytes) -> bytes:
    """``hostile`` inside that provider's valid text stream, after its first events."""
    if kind == BEDROCK:
        parts = frames(fixture(BEDROCK))
        return b"".join(parts[:2]) + hostile + b"".join(parts[2:])
    parts = sse_events(fixture(kind))
    return b"".join(parts[:2]) + hostile + b"".join(parts[2:])


# --- the SSE hand vectors ---------------------------------------------------------------


@dataclass(frozen=True)
class Vector:
    name: str
    data: bytes
    bound: int = SMALL
    """The decoder bound this vector is run with (the default bound for the 100,000-deep
    JSON, which would otherwise be refused as too large before it is parsed)."""


def _oa(content: str | bytes, **extra: object) -> bytes:
    text = content.decode("latin-1") if isinstance(content, bytes) else content
    doc = {"choices": [{"index": 0, "delta": {"content": text}}], **extra}
    return b"data: " + json.dumps(doc).encode() + b"\n\n"


def sse_vectors(rng: random.Random) -> list[Vector]:
    s = SMALL
    ok = _oa("ok")
    deep = b"[" * DEEP + b"]" * DEEP
    deep_obj = b'{"a":' * DEEP + b"1" + b"}" * DEEP
    anthropic_delta = (
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":%s,'
        b'"delta":{"type":"text_delta","text":"a"}}\n\n'
    )
    gemini_part = b'data: {"candidates":[{"index":%s,"content":{"parts":[{"text":"a"}]}}]}\n\n'
    big_number = b"9" * 400
    return [
        Vector("endless line, never ended", b"data: " + b"a" * (4 * s)),
        Vector("endless line, then its end", b"data: " + b"a" * (4 * s) + b"\n\n" + ok),
        Vector("endless event of many data lines", b"data: 0123456\n" * s + b"\n" + ok),
        Vector("endless event of empty data lines", b"data\n" * (2 * s) + b"\n" + ok),
        Vector("endless comment line", b":" + b"x" * (4 * s) + b"\n" + ok),
        Vector("huge id", b"id: " + b"9" * (4 * s) + b"\n" + ok),
        Vector("huge event name", b"event: " + b"e" * (4 * s) + b"\n" + ok),
        Vector("huge retry", b"retry: " + b"9" * (4 * s) + b"\n" + ok),
        Vector(
            "retry of 5,000 digits, within the bound",
            b"retry: " + b"9" * 5000 + b"\n\n" + ok,
            DEFAULT_MAX_EVENT_BYTES,
        ),
        Vector("huge unknown field", b"x-junk: " + b"j" * (4 * s) + b"\n" + ok),
        Vector("data line of exactly the bound", b"data: " + b"a" * (s - 6) + b"\n\n" + ok),
        Vector(
            "data line one byte past the bound (its value within it)",
            b"data: " + b"a" * (s - 5) + b"\n\n" + ok,
        ),
        Vector(
            "an event's data near the bound and a long unfinished line",
            b"data: " + b"a" * (s - 8) + b"\n" + b"data: " + b"b" * (s - 8),
        ),
        Vector("NUL bytes in data", _oa("a\x00b") + b"data: \x00\x00\n\n"),
        Vector(
            "NUL bytes as lines and in a field name", b"\x00" * 64 + b"\n\ndata\x00: x\n\n" + ok
        ),
        Vector("NUL in the id", b"id: a\x00b\n" + ok),
        Vector("lone CR line ends", (ok + _oa("cr") + b": c\n\n").replace(b"\n", b"\r")),
        Vector("CRLF line ends", (ok + _oa("crlf")).replace(b"\n", b"\r\n")),
        Vector(
            "mixed CR, LF and CRLF",
            ok.replace(b"\n\n", b"\r\r\n") + _oa("m").replace(b"\n\n", b"\n\r"),
        ),
        Vector("CR then LF as separate line ends", b"data: a\r\r\ndata: b\n\r\n\r" + ok),
        Vector("BOM", BOM + ok),
        Vector("BOM twice", BOM + BOM + ok),
        Vector("half a BOM", BOM[:2] + ok),
        Vector("BOM alone", BOM),
        Vector("BOM mid-stream", ok + BOM + ok),
        Vector(
            "retry garbage",
            b"retry: 12ab\nretry: -1\nretry: " + big_number + b"\nretry:\nretry: \xd9\xa1\xd9\xa2\n"
            b"retry: 1e3\nretry:  5\n" + ok,
        ),
        Vector(
            "invalid UTF-8 in data",
            b'data: {"choices":[{"index":0,"delta":{"content":"\xff\xfe\xc3\x28"}}]}\n\n',
        ),
        Vector(
            "invalid UTF-8 in names and values",
            b"ev\xffent: \xfe\xff\n" + ok + b"\xc0\xaf: x\nid: \xff\n\n" + ok,
        ),
        Vector(
            "overlong UTF-8 and surrogates",
            b'data: {"choices":[{"index":0,"delta":{"content":'
            b'"\xc0\xae \xed\xa0\x80 \\ud800 \\udfff"}}]}\n\n',
        ),
        Vector("comments only", b": keep-alive\n\n" * 200),
        Vector("blank lines only", b"\n" * 2000),
        Vector("whitespace-only lines", b" \n\t\n \r\n  \n" + ok),
        Vector("data without the blank line at EOF", ok + _oa("tail")[:-2]),
        Vector("data without any line end at EOF", ok + _oa("tail")[:-2].rstrip(b"\n")),
        Vector("JSON nested 100,000 deep", b"data: " + deep + b"\n\n", DEFAULT_MAX_EVENT_BYTES),
        Vector(
            "JSON nested 100,000 deep inside a chunk",
            b'data: {"choices":[{"index":0,"delta":{"content":"a"},"logprobs":'
            + deep_obj
            + b"}]}\n\n",
            DEFAULT_MAX_EVENT_BYTES,
        ),
        Vector(
            "numbers out of range",
            b'data: {"choices":[{"index":1e999,"delta":{"content":"a"}}]}\n\n'
            b'data: {"choices":[{"index":' + big_number + b',"delta":{}}]}\n\n'
            b'data: {"choices":[],"usage":{"prompt_tokens":1e999,"completion_tokens":-1e999}}\n\n'
            b'data: {"choices":[],"usage":{"prompt_tokens":' + big_number + b"}}\n\n",
        ),
        Vector(
            "negative and huge choice and tool indices",
            b'data: {"choices":[{"index":-1,"delta":{"content":"a"}}]}\n\n'
            b'data: {"choices":[{"index":4294967296,"delta":{"content":"a"}}]}\n\n'
            b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":100000000000000000000,'
            b'"id":"c","function":{"name":"f","arguments":"{}"}}]}}]}\n\n'
            b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":-5,"id":"c"}]}}]}\n\n',
        ),
        Vector(
            "provider-shaped numbers out of range",
            anthropic_delta % b"1e999"
            + anthropic_delta % big_number
            + anthropic_delta % b"-1"
            + gemini_part % b"1e999"
            + gemini_part % big_number
            + gemini_part % b"-1",
        ),
        Vector(
            "wrong types everywhere",
            b'data: {"choices":"x"}\n\ndata: {"choices":[{"delta":5}]}\n\n'
            b'data: {"choices":[{"index":"0","delta":{"content":7}}]}\n\n'
            b'data: {"type":5}\n\n'
            b'event: message_start\ndata: {"type":"message_start","message":3}\n\n'
            b'data: {"candidates":{"a":1}}\n\ndata: {"usage":"lots"}\n\n',
        ),
        Vector(
            "JSON that is not an object",
            b'data: 123\n\ndata: "x"\n\ndata: null\n\ndata: []\n\ndata: true\n\ndata: -\n\n',
        ),
        Vector("truncated JSON", b'data: {"choices":[{"index":0,"delta":{"content":"ab\n\n' + ok),
        Vector("two JSON documents in one event", b"data: {} {}\n\n" + ok),
        Vector(
            "one chunk over several data lines",
            b'data: {"choices":\ndata: [{"index":0,"delta":{"content":"joined"}}]}\n\n',
        ),
        Vector("field names without a colon", b"data\n\nevent\n\nid\n\nretry\n\n" + ok),
        Vector(
            "data: with no space, two spaces, a tab",
            b'data:{"choices":[]}\n\ndata:  {"choices":[]}\n\ndata:\t{"choices":[]}\n\n',
        ),
        Vector(
            "[DONE] look-alikes",
            b"data: [DONE] \n\ndata:[DONE]x\n\ndata: [done]\n\ndata: [DONE\n\n" + ok,
        ),
        Vector("an early [DONE], then more", b"data: [DONE]\n\n" + ok),
        Vector(
            "error events",
            b'event: error\ndata: {"error":{"message":"boom","type":"overloaded_error"}}\n\n'
            b'data: {"error":{"message":"x"}}\n\n',
        ),
        Vector(
            "provider events out of order",
            b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
            b'event: content_block_stop\ndata: {"type":"content_block_stop","index":7}\n\n'
            b'event: content_block_delta\ndata: {"type":"content_block_delta","index":3,'
            b'"delta":{"type":"input_json_delta","partial_json":"{"}}\n\n',
        ),
        Vector("a thousand tiny events", b'data: {"choices":[]}\n\n' * 1000),
        Vector("many fields in one event", b"event: x\nid: 1\n" * (s // 2) + ok),
        Vector(
            "an HTTP response inside the stream",
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + ok,
        ),
        Vector("random bytes", rng.randbytes(4096)),
        Vector("an AWS event stream", fixture(BEDROCK)),
    ]


# --- the event-stream (Bedrock) hand vectors -------------------------------------------


def _frame(
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
        Vector("total length shorter than its parts", _frame(delta, b"{}", total=15)),
        Vector("total length 4 GiB", _frame(delta, b"{}", total=0xFFFFFFFF)),
        Vector("total length just over the bound", _frame(delta, b"x" * s)),
        Vector("total length exactly the bound", _frame(b"", b"x" * (s - 16))),
        Vector("headers length over 128 KiB", _frame(delta, b"{}", headers=200_000)),
        Vector("headers length past the total", _frame(delta, b"{}", headers=len(delta) + 50)),
        Vector("unknown header type 10", _frame(_header(b"x", 10, b"abcd") + delta, b"{}")),
        Vector("unknown header type 255", _frame(delta + _header(b"y", 255, b""), b"{}")),
        Vector("header name runs past the headers", _frame(b"\xff:event-type", b"{}")),
        Vector("string header length runs past", _frame(_header(b"s", 7, b"\xff\xffab"), b"{}")),
        Vector("integer header cut short", _frame(_header(b"i", 4, b"\x01"), b"")),
        Vector(
            "duplicate header names", _frame(delta + _string(b":event-type", b"messageStop"), b"{}")
        ),
        Vector("invalid UTF-8 header name", _frame(_string(b"\xff\xfe", b"x") + delta, b"{}")),
        Vector(
            "invalid UTF-8 header value",
            _frame(_string(b":event-type", b"\xc3\x28") + MESSAGE_EVENT, b"{}"),
        ),
        Vector("a frame cut short at EOF", text[:-3]),
        Vector("only a prelude", text[:12]),
        Vector("an empty stream", b""),
        Vector("random bytes", rng.randbytes(4096)),
        Vector("valid frames, then garbage", text + rng.randbytes(64)),
        Vector("no :message-type", _frame(_string(b":event-type", b"contentBlockDelta"), b"{}")),
        Vector("unknown :message-type", _frame(_string(b":message-type", b"surprise"), b"{}")),
        Vector("an exception frame", bedrock.exception("throttlingException", "slow down")),
        Vector("an unknown exception frame", bedrock.exception("fooException", "x" * 100)),
        Vector(
            "an error frame",
            _frame(_string(b":message-type", b"error") + _string(b":error-code", b"E"), b""),
        ),
        Vector("a payload that is not JSON", _frame(delta, b"{not json")),
        Vector("a payload nested 100,000 deep", _frame(delta, deep), DEFAULT_MAX_EVENT_BYTES),
        Vector("tool arguments for a block never started", bedrock.tool_delta(7, '{"a":1}')),
        Vector(
            "usage numbers out of range",
            _frame(_event_head(b"metadata"), b'{"usage":{"inputTokens":1e999,"outputTokens":-1}}')
            + _frame(_event_head(b"metadata"), b'{"usage":{"inputTokens":' + b"9" * 400 + b"}}"),
        ),
        Vector("messageStop, then garbage", bedrock.message_stop() + rng.randbytes(40)),
        Vector("a thousand empty frames", _frame(b"", b"") * 1000),
        Vector(
            "every header value type",
            _frame(
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
            _frame(_header(b":event-type", 4, b"\0\0\0\1") + MESSAGE_EVENT, b"{}"),
        ),
        Vector(
            "wrong types in payloads",
            _frame(delta, b'{"contentBlockIndex":"x","delta":5}')
            + _frame(_event_head(b"messageStop"), b'{"stopReason":7}'),
        ),
        Vector("frames in reverse order", b"".join(reversed(frames(fixture(BEDROCK))))),
        Vector("an SSE stream", fixture("openai")),
    ]


def sse_cases(rng: random.Random) -> list[tuple[str, str, bytes, int]]:
    """(kind, vector name, stream, bound): every SSE vector for every SSE translator,
    alone and inside that provider's valid stream; every event-stream vector for the
    Bedrock translator, alone and inside its valid stream."""
    cases = []
    for v in sse_vectors(rng):
        for kind in SSE_KINDS:
            cases.append((kind, v.name, v.data, v.bound))
            cases.append((kind, f"{v.name} (in a valid stream)", embedded(kind, v.data), v.bound))
    after = b"data: " + b"x" * 600 + b"\ndata: " + b"y" * 600 + b"\n\n"
    for kind in SSE_KINDS:  # an oversized event in the same read as the stream's end
        cases.append(
            (kind, "an oversized event right after a complete stream", fixture(kind) + after, SMALL)
        )
    cases.append(
        (
            BEDROCK,
            "an oversized frame right after a complete stream",
            fixture(BEDROCK) + _frame(b"", b"x" * 2 * SMALL),
            SMALL,
        )
    )
    for v in eventstream_vectors(rng):
        cases.append((BEDROCK, v.name, v.data, v.bound))
        cases.append((BEDROCK, f"{v.name} (in a valid stream)", embedded(BEDROCK, v.data), v.bound))
    return cases


@dataclass
class CaseResult:
    kind: str
    name: str
    split_dependent: bool
    problems: list[str]
    max_buffered: int
    over_bound: int
    bound: int
    worst: tuple[int, int]


def check_case(
    kind: str,
    name: str,
    data: bytes,
    bound: int,
    *,
    rng: random.Random,
    random_splits: int,
    bytewise: bool,
) -> CaseResult:
    runs = [
        run(kind, bound, pieces) for pieces in splits(data, rng, random_splits, bytewise=bytewise)
    ]
    first = runs[0].transcript
    return CaseResult(
        kind,
        name,
        any(r.transcript != first for r in runs[1:]),
        sorted({p for r in runs for p in r.problems}),
        max(r.max_buffered for r in runs),
        max(r.over_bound for r in runs),
        bound,
        max((r.worst for r in runs), key=lambda w: w[0] / w[1]),
    )
