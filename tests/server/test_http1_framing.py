"""Request framing, byte by byte: every case fed whole, cut in two at every index and
one byte at a time. A refused head gets one JSON error (then the connection closes)
and never reaches the handler; the controls reach it, whatever the cuts."""

from __future__ import annotations

import json
from collections.abc import Iterable

import pytest

from tests.server.http1_harness import LIMITS, Wire, splits

POST = b"POST /v1/chat/completions HTTP/1.1\r\nHost: gateway.test\r\n"
GET = b"GET /v1/models HTTP/1.1\r\nHost: gateway.test\r\n"
CHUNKED = POST + b"Transfer-Encoding: chunked\r\n"
OVER = LIMITS.max_body_bytes + 1

REFUSED = (
    ("CL and TE", POST + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    ("TE and CL", CHUNKED + b"Content-Length: 5\r\n\r\n0\r\n\r\n", 400),
    ("TE and CL: 0", CHUNKED + b"Content-Length: 0\r\n\r\n0\r\n\r\n", 400),
    ("two CL, differing", POST + b"Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", 400),
    ("two CL, equal", POST + b"Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello", 400),
    ("CL: 5, 5", POST + b"Content-Length: 5, 5\r\n\r\nhello", 400),
    ("CL: +5", POST + b"Content-Length: +5\r\n\r\nhello", 400),
    ("CL: -1", POST + b"Content-Length: -1\r\n\r\nhello", 400),
    ("CL: 0x5", POST + b"Content-Length: 0x5\r\n\r\nhello", 400),
    ("CL: 2^64", POST + b"Content-Length: 18446744073709551616\r\n\r\nhello", 400),
    ("CL over the limit", POST + b"Content-Length: %d\r\n\r\n" % OVER + b"a" * OVER, 413),
    ("obs-fold", GET + b"X-Folded: a\r\n b\r\n\r\n", 400),
    (
        "obs-fold continuing TE",
        POST + b"Transfer-Encoding: identity\r\n chunked\r\n\r\n0\r\n\r\n",
        400,
    ),
    ("bare LF throughout", b"GET / HTTP/1.1\nHost: gateway.test\n\n", 400),
    ("bare LF in the head", GET + b"X-A: a\nX-B: b\r\n\r\n", 400),
    ("bare LF ending the head", GET + b"\n", 400),
    ("space before the colon", b"GET / HTTP/1.1\r\nHost : gateway.test\r\n\r\n", 400),
    ("space before the colon: CL", POST + b"Content-Length : 5\r\n\r\nhello", 400),
    ("space in a header name", GET + b"X A: b\r\n\r\n", 400),
    ("a header line without a colon", GET + b"Junk\r\n\r\n", 400),
    ("whitespace before the first header", b"GET / HTTP/1.1\r\n X-A: b\r\nHost: a\r\n\r\n", 400),
    ("NUL in a value", GET + b"X-A: a\x00b\r\n\r\n", 400),
    ("NUL in a name", GET + b"X\x00A: b\r\n\r\n", 400),
    ("CR in a value", GET + b"X-A: a\rb\r\n\r\n", 400),
    (
        "CR hiding TE",
        POST + b"X-A: a\rTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\nab",
        400,
    ),
    (
        "TE: chunked, identity",
        CHUNKED.replace(b"chunked", b"chunked, identity") + b"\r\n0\r\n\r\n",
        400,
    ),
    ("TE: identity", POST + b"Transfer-Encoding: identity\r\n\r\nhello", 400),
    (
        "TE: identity and CL",
        POST + b"Transfer-Encoding: identity\r\nContent-Length: 5\r\n\r\nhello",
        400,
    ),
    ("TE: chunked, twice", CHUNKED + b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    ("TE empty", POST + b"Transfer-Encoding:\r\n\r\nhello", 400),
    ("TE: gzip, chunked", POST + b"Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501),
    ("chunk size overflow", CHUNKED + b"\r\nffffffffffffffffff\r\nab\r\n0\r\n\r\n", 400),
    ("chunk size over the limit", CHUNKED + b"\r\n%x\r\n" % OVER + b"a" * OVER, 413),
    ("chunk size not hex", CHUNKED + b"\r\nzz\r\nab\r\n0\r\n\r\n", 400),
    ("chunk size with 0x", CHUNKED + b"\r\n0x2\r\nab\r\n0\r\n\r\n", 400),
    ("chunk size then a space", CHUNKED + b"\r\n2 \r\nab\r\n0\r\n\r\n", 400),
    ("chunk data longer than its size", CHUNKED + b"\r\n2\r\nabc\r\n0\r\n\r\n", 400),
    ("bare LF after a chunk size", CHUNKED + b"\r\n2\nab\r\n0\r\n\r\n", 400),
    ("HTTP/2 preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 400),
    ("HTTP/2.0 request line", b"GET / HTTP/2.0\r\nHost: gateway.test\r\n\r\n", 505),
    ("HTTP/1.2", b"GET / HTTP/1.2\r\nHost: gateway.test\r\n\r\n", 400),
    ("HTTP/0.9 request line", b"GET /\r\n\r\n", 505),
    ("no Host", b"GET / HTTP/1.1\r\n\r\n", 400),
    ("two Hosts", GET + b"Host: gateway.test\r\n\r\n", 400),
    ("Host with a path", b"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", 400),
    ("method with a (", b"G(T / HTTP/1.1\r\nHost: gateway.test\r\n\r\n", 400),
    ("method with a NUL", b"GE\x00T / HTTP/1.1\r\nHost: gateway.test\r\n\r\n", 400),
    ("CONNECT", b"CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n", 400),
    ("Upgrade", GET + b"Connection: upgrade\r\nUpgrade: websocket\r\n\r\n", 400),
    ("a header too large", GET + b"X-Big: " + b"a" * LIMITS.max_header_bytes + b"\r\n\r\n", 431),
    ("too many headers", GET + b"X: a\r\n" * 100 + b"\r\n", 431),
    ("Expect, refused", POST + b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % OVER, 413),
    ("Expect, malformed", POST + b"Expect: 100-continue\r\nContent-Length: +5\r\n\r\n", 400),
)

ACCEPTED = (
    ("GET", GET + b"\r\n", "GET", b""),
    ("HTTP/1.0 GET without Host", b"GET /v1/models HTTP/1.0\r\n\r\n", "GET", b""),
    ("POST with CL", POST + b"Content-Length: 5\r\n\r\nhello", "POST", b"hello"),
    ("POST with CL 0", POST + b"Content-Length: 0\r\n\r\n", "POST", b""),
    ("CL with a leading zero", POST + b"Content-Length: 05\r\n\r\nhello", "POST", b"hello"),
    ("POST at the limit", POST + b"Content-Length: 64\r\n\r\n" + b"a" * 64, "POST", b"a" * 64),
    (
        "chunked POST with an extension and trailers",
        CHUNKED + b"\r\n5;ext=1\r\nhello\r\n1\r\n!\r\n0\r\nX-Trailer: t\r\n\r\n",
        "POST",
        b"hello!",
    ),
    (
        "TE: Chunked, a tab",
        POST + b"Transfer-Encoding:\tChunked\r\n\r\n2\r\nab\r\n0\r\n\r\n",
        "POST",
        b"ab",
    ),
    ("an empty line first", b"\r\n" + GET + b"\r\n", "GET", b""),
)


def _ids(rows: Iterable[tuple[object, ...]]) -> list[str]:
    return [str(row[0]) for row in rows]


@pytest.mark.parametrize(("name", "raw", "status"), REFUSED, ids=_ids(REFUSED))
async def test_a_refused_head_gets_one_json_error_at_every_split(
    name: str, raw: bytes, status: int
) -> None:
    for pieces in splits(raw):
        cut = f"{name}: cut {[len(p) for p in pieces]}"
        wire = Wire()
        wire.send(*pieces)
        await wire.settle()
        replies = wire.replies
        assert [r.status for r in replies] == [status], cut
        (reply,) = replies
        assert reply.headers["connection"] == "close", cut
        assert reply.headers["content-type"] == "application/json", cut
        error = json.loads(reply.body)["error"]
        assert set(error) == {"message", "type", "code", "param"} and error["message"], cut
        assert wire.seen == [], cut
        assert wire.transport.eof and wire.transport.writes_after_close == 0, cut
        wire.close()
        assert (wire.intake.bodies, wire.intake.bytes) == (0, 0), cut


@pytest.mark.parametrize(("name", "raw", "method", "body"), ACCEPTED, ids=_ids(ACCEPTED))
async def test_the_controls_reach_the_handler_at_every_split(
    name: str, raw: bytes, method: str, body: bytes
) -> None:
    for pieces in splits(raw):
        cut = f"{name}: cut {[len(p) for p in pieces]}"
        wire = Wire()
        wire.send(*pieces)
        await wire.settle()
        assert [(r.method, bytes(r.body)) for r in wire.seen] == [(method, body)], cut
        assert [r.status for r in wire.replies] == [200], cut
        assert not wire.transport.closed or wire.seen[0].version == "1.0", cut
        wire.close()
        assert (wire.intake.bodies, wire.intake.bytes) == (0, 0), cut
