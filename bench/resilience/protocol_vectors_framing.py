"""The framing vectors of the "request smuggling framings" rows: valid controls, then
ambiguous or malformed message framing (Content-Length and Transfer-Encoding, the
header block, chunked bodies), then the request line and Host
(``protocol_vectors_request_line``), numbered in that order."""

from __future__ import annotations

from bench.resilience.protocol_exchange import chat_body, feeder
from bench.resilience.protocol_framing import Framing, FramingTable, chunked
from bench.resilience.protocol_vectors_request_line import hosts, request_lines


def framings(key: str) -> list[Framing]:
    table = FramingTable(key)
    for section in (controls, message_length, chunked_bodies, request_lines, hosts):
        section(table)
    return table.vectors


def controls(t: FramingTable) -> None:
    """Accepted, and each reaches the upstream once (a pipelined pair: twice)."""
    add, auth = t.add, t.auth
    add("control: Content-Length", "Content-Length: {n}\r\n", kind="control")
    add("control: chunked", "Transfer-Encoding: chunked\r\n", chunked, kind="control")
    add(
        "control: chunk extension name=value",
        "Transfer-Encoding: chunked\r\n",
        lambda b: b"%x;name=value\r\n%s\r\n0\r\n\r\n" % (len(b), b),
        kind="control",
    )
    add(
        "control: Transfer-Encoding: CHUNKED",
        "Transfer-Encoding: CHUNKED\r\n",
        chunked,
        kind="control",
    )
    add("control: a tab as OWS", "Transfer-Encoding:\tchunked\r\n", chunked, kind="control")
    add("control: Content-Length with a leading zero", "Content-Length: 0{n}\r\n", kind="control")
    add("control: OWS after Content-Length", "Content-Length: {n} \r\n", kind="control")
    add(
        "control: an empty line before the request line (RFC 9112 §2.2)",
        "Content-Length: {n}\r\n",
        raw=lambda p, m: (
            f"\r\nPOST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n{auth}"
            f"Content-Length: {len(p)}\r\n\r\n".encode()
        ),
        kind="control",
    )
    add(
        "control: absolute-form target (RFC 9112 §3.2.2: MUST accept)",
        "Content-Length: {n}\r\n",
        line="POST http://gateway.test/v1/chat/completions HTTP/1.1",
        kind="control",
    )
    add(
        "control: HTTP/1.0",
        "Content-Length: {n}\r\n",
        line="POST /v1/chat/completions HTTP/1.0",
        host=None,
        kind="control",
    )
    add(
        "control: two pipelined requests",
        "Content-Length: {n}\r\n",
        lambda b: b + b"<SMUGGLED>",
        kind="control",
        expect_upstream=2,
    )


def message_length(t: FramingTable) -> None:
    """Ambiguous or malformed framing in the head: refused, nothing reaches the upstream."""
    add, auth, key = t.add, t.auth, t.key
    add(
        "CL.TE: Content-Length and Transfer-Encoding",
        "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
        lambda b: b"0\r\n\r\n<SMUGGLED>",
    )
    add(
        "TE.CL: Transfer-Encoding and Content-Length",
        "Transfer-Encoding: chunked\r\nContent-Length: 4\r\n",
        lambda b: b"<SLEN>\r\n<SMUGGLED>\r\n0\r\n\r\n",
    )
    add(
        "Transfer-Encoding and Content-Length: 0",
        "Transfer-Encoding: chunked\r\nContent-Length: 0\r\n",
        chunked,
    )
    add("two Content-Lengths, equal", "Content-Length: {n}\r\nContent-Length: {n}\r\n")
    add(
        "two Content-Lengths, different",
        "Content-Length: {n}\r\nContent-Length: 5\r\n",
        lambda b: b + b"<SMUGGLED>",
    )
    add("Content-Length: N, N", "Content-Length: {n}, {n}\r\n")
    add("Content-Length: +N", "Content-Length: +{n}\r\n")
    add("Content-Length: -1", "Content-Length: -1\r\n")
    add("Content-Length: 2^64 (overflows 64 bits)", "Content-Length: 18446744073709551616\r\n")
    add(
        "Content-Length: 99999999999999999999999 (huge)",
        "Content-Length: 99999999999999999999999\r\n",
    )
    add("Content-Length: 0x10 (hex)", "Content-Length: 0x{n:x}\r\n")
    add("Content-Length: 1e2", "Content-Length: 1e2\r\n")
    add("Content-Length with a space inside", "Content-Length: 1 {n}\r\n")
    add("Content-Length empty", "Content-Length:\r\n")
    add("space before the colon: Content-Length :", "Content-Length : {n}\r\n")
    add(
        "space before the colon: Transfer-Encoding :",
        "Transfer-Encoding : chunked\r\nContent-Length: {n}\r\n",
    )
    add("obs-fold continuation line", "X-Folded: a\r\n b\r\nContent-Length: {n}\r\n")
    add(
        "obs-fold continuing Transfer-Encoding",
        "Transfer-Encoding: identity\r\n chunked\r\n",
        chunked,
    )
    add(
        "bare LF line ends throughout",
        "",
        raw=lambda p, m: (
            f"POST /v1/chat/completions HTTP/1.1\nHost: x\nAuthorization: Bearer {key}\n"
            f"Content-Length: {len(p)}\n\n".encode()
        ),
    )
    add("a bare LF inside the head", "X-A: a\nContent-Length: {n}\r\n")
    add(
        "a bare LF hiding Transfer-Encoding",
        "X-A: a\nTransfer-Encoding: chunked\r\nContent-Length: {n}\r\n",
    )
    add(
        "a bare CR inside a header value",
        "X-A: a\rTransfer-Encoding: chunked\r\nContent-Length: {n}\r\n",
    )
    add("NUL in a header value", "X-A: a\x00b\r\nContent-Length: {n}\r\n")
    add("NUL in a header name", "Content-Length\x00: {n}\r\n")
    add("vertical tab before chunked", "Transfer-Encoding:\x0bchunked\r\n", chunked)
    add("form feed after chunked", "Transfer-Encoding: chunked\x0c\r\n", chunked)
    add("a header name with a space", "Content Length: {n}\r\nContent-Length: {n}\r\n")
    add("a header line without a colon", "Junk\r\nContent-Length: {n}\r\n")
    add(
        "whitespace before the first header",
        "Content-Length: {n}\r\n",
        raw=lambda p, m: (
            f"POST /v1/chat/completions HTTP/1.1\r\n X-A: b\r\nHost: x\r\n{auth}"
            f"Content-Length: {len(p)}\r\n\r\n".encode()
        ),
    )
    add("Transfer-Encoding: chunked, identity", "Transfer-Encoding: chunked, identity\r\n", chunked)
    add(
        "Transfer-Encoding: identity, chunked (RFC 9112 §6.1: SHOULD 501)",
        "Transfer-Encoding: identity, chunked\r\n",
        chunked,
    )
    add(
        "Transfer-Encoding: gzip, chunked, the body not gzip (SHOULD 501)",
        "Transfer-Encoding: gzip, chunked\r\n",
        chunked,
    )
    add("Transfer-Encoding: xchunked", "Transfer-Encoding: xchunked\r\n", chunked)
    add('Transfer-Encoding: "chunked"', 'Transfer-Encoding: "chunked"\r\n', chunked)
    add("Transfer-Encoding: chunked;q=1", "Transfer-Encoding: chunked;q=1\r\n", chunked)
    add(
        "Transfer-Encoding twice: chunked, chunked",
        "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
        chunked,
    )
    add(
        "Transfer-Encoding twice: chunked, then identity",
        "Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n",
        chunked,
    )
    add(
        "Transfer-Encoding: identity alone",
        "Transfer-Encoding: identity\r\nContent-Length: {n}\r\n",
    )
    add("Transfer-Encoding empty", "Transfer-Encoding:\r\nContent-Length: {n}\r\n")


def chunked_bodies(t: FramingTable) -> None:
    """Malformed chunked bodies: refused, nothing reaches the upstream."""
    add = t.add
    add(
        "chunk size of 20 hex digits (overflow)",
        "Transfer-Encoding: chunked\r\n",
        lambda b: b"1" + b"0" * 19 + chunked(b),
    )
    add(
        "chunk size with a 0x prefix",
        "Transfer-Encoding: chunked\r\n",
        lambda b: b"0x" + chunked(b),
    )
    add("negative chunk size", "Transfer-Encoding: chunked\r\n", lambda b: b"-" + chunked(b))
    add(
        "chunk size then a space",
        "Transfer-Encoding: chunked\r\n",
        lambda b: b"%x \r\n%s\r\n0\r\n\r\n" % (len(b), b),
    )
    add(
        "chunk extension with a NUL",
        "Transfer-Encoding: chunked\r\n",
        lambda b: b"%x;\x00garbage\r\n%s\r\n0\r\n\r\n" % (len(b), b),
    )
    add(
        "chunk extension with a quoted CRLF",
        "Transfer-Encoding: chunked\r\n",
        lambda b: b'%x;a="b\r\n"\r\n%s\r\n0\r\n\r\n' % (len(b), b),
    )
    add(
        "chunk extension ended by a bare LF",
        "Transfer-Encoding: chunked\r\n",
        lambda b: b"%x;a\n%s\r\n0\r\n\r\n" % (len(b), b),
    )
    add(
        "chunk extension after whitespace",
        "Transfer-Encoding: chunked\r\n",
        lambda b: b"%x ; a=b\r\n%s\r\n0\r\n\r\n" % (len(b), b),
    )
    add(
        "chunk extension of garbage bytes",
        "Transfer-Encoding: chunked\r\n",
        lambda b: b"%x;\x01\x02\xff\r\n%s\r\n0\r\n\r\n" % (len(b), b),
    )
    add(
        "a 17 MiB chunk extension (more than max_body_bytes)",
        "Transfer-Encoding: chunked\r\n",
        lambda b: b"%x;" % len(b),
    )
    big = t.vectors[-1]
    tail = b"\r\n" + chat_body(big.marker) + b"\r\n0\r\n\r\n"
    big.stream = feeder([*[b"a" * (64 * 1024)] * (17 * 16), tail])
    add(
        "chunk data longer than its size",
        "Transfer-Encoding: chunked\r\n",
        lambda b: b"%x\r\n%s\r\n0\r\n\r\n" % (len(b) - 5, b),
    )
    add(
        "chunk data without its CRLF",
        "Transfer-Encoding: chunked\r\n",
        lambda b: b"%x\r\n%sXX0\r\n\r\n" % (len(b) - 2, b),
    )
    add(
        "a bare LF after the chunk size",
        "Transfer-Encoding: chunked\r\n",
        lambda b: b"%x\n%s\n0\n\n" % (len(b), b),
    )
    add(
        "a bare CR after the chunk size",
        "Transfer-Encoding: chunked\r\n",
        lambda b: b"%x\r%s\r\n0\r\n\r\n" % (len(b), b),
    )
    add(
        "Content-Length in the chunked trailer",
        "Transfer-Encoding: chunked\r\n",
        lambda b: chunked(b)[:-2] + b"Content-Length: 5\r\n\r\n",
    )
    add(
        "a malformed trailer line",
        "Transfer-Encoding: chunked\r\n",
        lambda b: chunked(b)[:-2] + b"bad trailer\r\n\r\n",
    )
