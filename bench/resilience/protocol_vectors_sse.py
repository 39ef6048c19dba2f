"""The SSE hand vectors of the "malformed SSE and event streams" rows: endless lines
and events, NULs, line ends, BOMs, invalid UTF-8, deep and out-of-range JSON, wrong
types, look-alikes of the protocol's own events."""

from __future__ import annotations

import json
import random

from bench.resilience.protocol_streams import BEDROCK, BOM, DEEP, SMALL, Vector, fixture
from sluice.wire.bounds import DEFAULT_MAX_EVENT_BYTES


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
