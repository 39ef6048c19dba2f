"""The hostile requests of the protocol rows: framings, Host headers, bodies, paths and
SQL injection payloads, and a raw exchange that survives whatever the gateway does.

Every framing vector carries the valid development key and a valid chat body tagged
with a marker of its own (the fake upstream records bodies, so whatever reaches it is
attributed to the vector that sent it): only the framing can stop it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from tests.support.raw_http import RawClient, RawResponse

MIB = 1024 * 1024
MAX_BODY = 16 * MIB
"""The gateway's default ``max_body_bytes``."""
DEEP = 100_000


# --- a raw exchange --------------------------------------------------------------------


@dataclass
class Answer:
    status: int | None
    """``None``: no answer (the connection closed or timed out first)."""
    headers: dict[str, str]
    body: bytes
    seconds: float
    error: str | None = None
    statuses: list[int] = field(default_factory=list)
    """Every status read, when more than one response was read (pipelining)."""

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError:
            return None


async def send(
    host: str,
    port: int,
    head: bytes,
    body: bytes = b"",
    *,
    stream: Callable[[], bytes | None] | None = None,
    wait: float = 10.0,
    head_only: bool = False,
    responses: int = 1,
) -> Answer:
    """Send ``head + body`` (then, if ``stream``, its pieces until it returns ``None`` or
    an answer arrives) and read one response (``head_only``: its head, for HEAD), or
    ``responses`` of them (the answer is the last; ``statuses`` has them all)."""
    started = time.monotonic()
    try:
        client = await asyncio.wait_for(RawClient.connect(host, port), wait)
    except (OSError, TimeoutError) as exc:
        return Answer(None, {}, b"", 0.0, f"connect: {exc!r}")
    reading: asyncio.Task[RawResponse] = asyncio.ensure_future(
        _head(client) if head_only else client.read_response()
    )
    try:
        with contextlib.suppress(ConnectionError):
            await client.send(head + body)
            while stream is not None and not reading.done():
                piece = stream()
                if piece is None:
                    break
                await client.send(piece)
        resp = await asyncio.wait_for(reading, wait)
        statuses = [resp.status]
        for _ in range(responses - 1):
            resp = await asyncio.wait_for(client.read_response(), wait)
            statuses.append(resp.status)
        return Answer(
            resp.status, resp.headers, resp.body, time.monotonic() - started, None, statuses
        )
    except (TimeoutError, asyncio.IncompleteReadError, ConnectionError, ValueError) as exc:
        reading.cancel()
        return Answer(None, {}, b"", time.monotonic() - started, type(exc).__name__)
    finally:
        if not reading.done():
            reading.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await reading
        await client.close()


async def _head(client: RawClient) -> RawResponse:
    status, headers = await client.read_head()
    return RawResponse(status, headers, b"")


def envelope_ok(answer: Answer) -> bool:
    """The JSON error envelope: ``{"error": {"message", "type", "code", "param"}}``."""
    doc = answer.json()
    if not isinstance(doc, dict) or set(doc) != {"error"} or not isinstance(doc["error"], dict):
        return False
    error = doc["error"]
    return (
        set(error) == {"message", "type", "code", "param"}
        and isinstance(error["message"], str)
        and isinstance(error["type"], str)
        and (error["code"] is None or isinstance(error["code"], str))
        and (error["param"] is None or isinstance(error["param"], str))
    )


# --- framings ---------------------------------------------------------------------------


def chat_body(marker: str) -> bytes:
    doc = {"model": "test/gpt-fake", "messages": [{"role": "user", "content": marker}]}
    return json.dumps(doc).encode()


@dataclass
class Framing:
    name: str
    marker: str
    head: bytes
    body: bytes = b""
    kind: Literal["vector", "control", "host"] = "vector"
    expect_upstream: int = 1
    """Controls: how many requests must reach the upstream (two for a pipelined pair)."""
    stream: Callable[[], bytes | None] | None = None


def _chunked(body: bytes) -> bytes:
    return b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)


def feeder(parts: Iterable[bytes]) -> Callable[[], bytes | None]:
    """The pieces of a streamed body, one per call; ``None`` after the last."""
    it = iter(parts)
    return lambda: next(it, None)


def framings(key: str) -> list[Framing]:
    out: list[Framing] = []
    auth = f"Authorization: Bearer {key}\r\nContent-Type: application/json\r\n"

    def add(
        name: str,
        headers: str,
        body: Callable[[bytes], bytes] | None = None,
        *,
        line: str = "POST /v1/chat/completions HTTP/1.1",
        host: str | None = "Host: gateway.test\r\n",
        kind: Literal["vector", "control", "host"] = "vector",
        expect_upstream: int = 1,
        raw: Callable[[bytes, str], bytes] | None = None,
        stream: Callable[[], bytes | None] | None = None,
    ) -> None:
        marker = f"framing-{len(out):03d}"
        payload = chat_body(marker)
        smuggled = (
            f"POST /v1/chat/completions HTTP/1.1\r\nHost: gateway.test\r\n{auth}"
            f"Content-Length: {len(payload)}\r\n\r\n"
        ).encode() + payload
        text = headers.format(n=len(payload))
        head = f"{line}\r\n{host or ''}{auth}{text}\r\n".encode()
        if raw is not None:
            head = raw(payload, marker)
        content = body(payload) if body is not None else payload
        content = content.replace(b"<SLEN>", b"%x" % len(smuggled)).replace(b"<SMUGGLED>", smuggled)
        out.append(Framing(name, marker, head, content, kind, expect_upstream, stream))

    # -- controls: accepted, and each reaches the upstream once ---------------------------
    add("control: Content-Length", "Content-Length: {n}\r\n", kind="control")
    add("control: chunked", "Transfer-Encoding: chunked\r\n", _chunked, kind="control")
    add(
        "control: chunk extension name=value",
        "Transfer-Encoding: chunked\r\n",
        lambda b: b"%x;name=value\r\n%s\r\n0\r\n\r\n" % (len(b), b),
        kind="control",
    )
    add(
        "control: Transfer-Encoding: CHUNKED",
        "Transfer-Encoding: CHUNKED\r\n",
        _chunked,
        kind="control",
    )
    add("control: a tab as OWS", "Transfer-Encoding:\tchunked\r\n", _chunked, kind="control")
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

    # -- ambiguous or malformed framing: refused, nothing reaches the upstream ------------
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
        _chunked,
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
        _chunked,
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
    add("vertical tab before chunked", "Transfer-Encoding:\x0bchunked\r\n", _chunked)
    add("form feed after chunked", "Transfer-Encoding: chunked\x0c\r\n", _chunked)
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
    add(
        "Transfer-Encoding: chunked, identity", "Transfer-Encoding: chunked, identity\r\n", _chunked
    )
    add(
        "Transfer-Encoding: identity, chunked (RFC 9112 §6.1: SHOULD 501)",
        "Transfer-Encoding: identity, chunked\r\n",
        _chunked,
    )
    add(
        "Transfer-Encoding: gzip, chunked, the body not gzip (SHOULD 501)",
        "Transfer-Encoding: gzip, chunked\r\n",
        _chunked,
    )
    add("Transfer-Encoding: xchunked", "Transfer-Encoding: xchunked\r\n", _chunked)
    add('Transfer-Encoding: "chunked"', 'Transfer-Encoding: "chunked"\r\n', _chunked)
    add("Transfer-Encoding: chunked;q=1", "Transfer-Encoding: chunked;q=1\r\n", _chunked)
    add(
        "Transfer-Encoding twice: chunked, chunked",
        "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
        _chunked,
    )
    add(
        "Transfer-Encoding twice: chunked, then identity",
        "Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n",
        _chunked,
    )
    add(
        "Transfer-Encoding: identity alone",
        "Transfer-Encoding: identity\r\nContent-Length: {n}\r\n",
    )
    add("Transfer-Encoding empty", "Transfer-Encoding:\r\nContent-Length: {n}\r\n")
    add(
        "chunk size of 20 hex digits (overflow)",
        "Transfer-Encoding: chunked\r\n",
        lambda b: b"1" + b"0" * 19 + _chunked(b),
    )
    add(
        "chunk size with a 0x prefix",
        "Transfer-Encoding: chunked\r\n",
        lambda b: b"0x" + _chunked(b),
    )
    add("negative chunk size", "Transfer-Encoding: chunked\r\n", lambda b: b"-" + _chunked(b))
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
    big = out[-1]
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
        lambda b: _chunked(b)[:-2] + b"Content-Length: 5\r\n\r\n",
    )
    add(
        "a malformed trailer line",
        "Transfer-Encoding: chunked\r\n",
        lambda b: _chunked(b)[:-2] + b"bad trailer\r\n\r\n",
    )
    add("the HTTP/2 preface", "", raw=lambda p, m: b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
    add(
        "an h2c upgrade",
        "Content-Length: {n}\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
        "HTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n",
    )
    add(
        "CONNECT (authority form)",
        "Content-Length: {n}\r\n",
        line="CONNECT gateway.test:443 HTTP/1.1",
    )
    add(
        "request line with tabs",
        "Content-Length: {n}\r\n",
        line="POST\t/v1/chat/completions\tHTTP/1.1",
    )
    add("a lower-case method", "Content-Length: {n}\r\n", line="post /v1/chat/completions HTTP/1.1")
    add(
        "request line with an extra token",
        "Content-Length: {n}\r\n",
        line="POST /v1/chat/completions HTTP/1.1 x",
    )
    add(
        "request line with a trailing space",
        "Content-Length: {n}\r\n",
        line="POST /v1/chat/completions HTTP/1.1 ",
    )
    add(
        "a space inside the target",
        "Content-Length: {n}\r\n",
        line="POST /v1/chat /completions HTTP/1.1",
    )
    add(
        "a NUL inside the target",
        "Content-Length: {n}\r\n",
        line="POST /v1/chat/completions\x00 HTTP/1.1",
    )
    add(
        "a target without its leading slash",
        "Content-Length: {n}\r\n",
        line="POST v1/chat/completions HTTP/1.1",
    )
    add(
        "absolute-form with a broken scheme (http:/)",
        "Content-Length: {n}\r\n",
        line="POST http:/v1/chat/completions HTTP/1.1",
    )
    add(
        "a request line without a version, then headers",
        "Content-Length: {n}\r\n",
        line="POST /v1/chat/completions",
    )
    add(
        "HTTP/0.9 as the version, then headers",
        "Content-Length: {n}\r\n",
        line="POST /v1/chat/completions HTTP/0.9",
    )
    add(
        "HTTP/2.0 on an HTTP/1 request line",
        "Content-Length: {n}\r\n",
        line="POST /v1/chat/completions HTTP/2.0",
    )
    add("HTTP/1.10", "Content-Length: {n}\r\n", line="POST /v1/chat/completions HTTP/1.10")
    add(
        "a lower-case http/1.1",
        "Content-Length: {n}\r\n",
        line="POST /v1/chat/completions http/1.1",
    )
    add(
        "HTTP/1.0 with Transfer-Encoding and Content-Length",
        "Transfer-Encoding: chunked\r\nContent-Length: {n}\r\n",
        _chunked,
        line="POST /v1/chat/completions HTTP/1.0",
    )

    # -- Host (RFC 9112 §3.2: a server MUST answer 400) -----------------------------------
    add("HTTP/1.1 without Host", "Content-Length: {n}\r\n", host=None, kind="host")
    add(
        "two Host headers, the same",
        "Content-Length: {n}\r\n",
        host="Host: gateway.test\r\nHost: gateway.test\r\n",
        kind="host",
    )
    add(
        "two Host headers, different",
        "Content-Length: {n}\r\n",
        host="Host: gateway.test\r\nHost: evil.example\r\n",
        kind="host",
    )
    add(
        "Host: a, b (a list)",
        "Content-Length: {n}\r\n",
        host="Host: gateway.test, evil.example\r\n",
        kind="host",
    )
    add(
        "Host with a space in it",
        "Content-Length: {n}\r\n",
        host="Host: gateway test\r\n",
        kind="host",
    )
    add(
        "Host with a path", "Content-Length: {n}\r\n", host="Host: gateway.test/v1\r\n", kind="host"
    )
    add(
        "Host with userinfo",
        "Content-Length: {n}\r\n",
        host="Host: user@evil.example\r\n",
        kind="host",
    )
    add(
        "Host with a port that is not a number",
        "Content-Length: {n}\r\n",
        host="Host: gateway.test:port\r\n",
        kind="host",
    )
    add(
        "Host with an unclosed IPv6 literal",
        "Content-Length: {n}\r\n",
        host="Host: [::1\r\n",
        kind="host",
    )
    return out


# --- hostile bodies ---------------------------------------------------------------------


@dataclass
class Body:
    name: str
    method: str
    path: str
    body: bytes
    refuse: bool = True
    """False: accepted by design (then ``forwarded`` judges what reached the upstream)."""
    status: int | None = None
    param: str | None = None
    forwarded: Callable[[bytes], bool] | None = None
    chunked: bool = False
    oversize: int = 0
    """Send a head declaring this many body bytes (or stream that many, chunked)."""
    marker: str = ""


def _pairs(body: bytes) -> list[tuple[str, Any]]:
    return json.loads(body, object_pairs_hook=lambda pairs: pairs)  # type: ignore[no-any-return]


def _no_duplicate_keys(body: bytes) -> bool:
    def walk(value: Any) -> bool:
        if isinstance(value, list) and value and all(isinstance(p, tuple) for p in value):
            names = [p[0] for p in value]
            return len(names) == len(set(names)) and all(walk(p[1]) for p in value)
        if isinstance(value, list):
            return all(walk(v) for v in value)
        return True

    return walk(_pairs(body))


def chat_bodies() -> list[Body]:
    base = b'{"model":"test/gpt-fake","messages":[{"role":"user","content":"hi"}]'
    deep_arr = b"[" * DEEP + b"]" * DEEP
    deep_obj = b'{"a":' * DEEP + b"1" + b"}" * DEEP
    big = b"1" + b"0" * 400
    path = "/v1/chat/completions"

    def with_(extra: bytes) -> bytes:
        return base + b"," + extra + b"}"

    def msgs(n: int, last: dict[str, Any] | None = None) -> bytes:
        items: list[dict[str, Any]] = [{"role": "user", "content": "x"}] * n
        if last is not None:
            items[-1] = last
        return json.dumps({"model": "test/gpt-fake", "messages": items}).encode()

    def part(kind: str, value: bytes) -> bytes:
        return (
            b'{"model":"test/gpt-fake","messages":[{"role":"user","content":' + value + b"}]}"
            if kind == "content"
            else value
        )

    out = [
        Body("arrays nested 100,000 deep", "POST", path, deep_arr),
        Body("objects nested 100,000 deep", "POST", path, deep_obj),
        Body("100,000 deep in metadata", "POST", path, with_(b'"metadata":' + deep_obj)),
        Body("100,000 deep in tools", "POST", path, with_(b'"tools":[' + deep_arr + b"]")),
        Body(
            "100,000 deep in a tool's parameters",
            "POST",
            path,
            with_(
                b'"tools":[{"type":"function","function":{"name":"f","parameters":'
                + deep_obj
                + b"}}]"
            ),
        ),
        Body("100,000 deep in message content", "POST", path, part("content", deep_arr)),
        Body(
            "content parts nested deep",
            "POST",
            path,
            part("content", b'[{"type":"text","text":' + b"[" * 200 + b'"x"' + b"]" * 200 + b"}]"),
        ),
        Body(
            "65 levels: one past max_json_depth",
            "POST",
            path,
            with_(b'"metadata":' + b"[" * 64 + b"]" * 64),
        ),
        Body(
            "16 MiB + 1 byte (Content-Length)", "POST", path, b"", status=413, oversize=MAX_BODY + 1
        ),
        Body(
            "16 MiB + 1 byte (chunked)",
            "POST",
            path,
            b"",
            status=413,
            oversize=MAX_BODY + 1,
            chunked=True,
        ),
        Body("invalid UTF-8 in a string", "POST", path, part("content", b'"\xff\xfe\xc3\x28"')),
        # an unknown field is dropped unread (SPEC: unknown fields are ignored), bytes and all
        Body(
            "invalid UTF-8 in a key",
            "POST",
            path,
            with_(b'"\xff":1'),
            refuse=False,
            forwarded=lambda sent: b"\xff" not in sent,
        ),
        Body(
            "invalid UTF-8 in an unknown field's value",
            "POST",
            path,
            with_(b'"zzz":"\xff\xfe"'),
            refuse=False,
            forwarded=lambda sent: b"\xff" not in sent,
        ),
        Body("a raw NUL in a string", "POST", path, part("content", b'"a\x00b"')),
        Body("a lone surrogate escape", "POST", path, part("content", b'"\\ud800"')),
        Body(
            "temperature: 1e999", "POST", path, with_(b'"temperature":1e999'), param="temperature"
        ),
        Body(
            "max_tokens: 10**400", "POST", path, with_(b'"max_tokens":' + big), param="max_tokens"
        ),
        Body(
            "max_tokens: -10**400", "POST", path, with_(b'"max_tokens":-' + big), param="max_tokens"
        ),
        Body("seed: 10**400", "POST", path, with_(b'"seed":' + big), param="seed"),
        Body("n: 1e999", "POST", path, with_(b'"n":1e999'), param="n"),
        Body(
            "NaN and Infinity literals", "POST", path, with_(b'"temperature":NaN,"top_p":Infinity')
        ),
        Body("an empty body", "POST", path, b""),
        Body("null", "POST", path, b"null"),
        Body("an array", "POST", path, b"[]"),
        Body("a string", "POST", path, b'"x"'),
        Body("a number", "POST", path, b"1"),
        Body("true", "POST", path, b"true"),
        Body(
            "messages: null",
            "POST",
            path,
            b'{"model":"test/gpt-fake","messages":null}',
            param="messages",
        ),
        Body(
            "messages: a string",
            "POST",
            path,
            b'{"model":"test/gpt-fake","messages":"hi"}',
            param="messages",
        ),
        Body(
            "messages: []",
            "POST",
            path,
            b'{"model":"test/gpt-fake","messages":[]}',
            param="messages",
        ),
        Body(
            "no model",
            "POST",
            path,
            b'{"messages":[{"role":"user","content":"hi"}]}',
            param="model",
        ),
        Body(
            "model: a number",
            "POST",
            path,
            b'{"model":1,"messages":[{"role":"user","content":"hi"}]}',
            param="model",
        ),
        Body(
            "model: an object",
            "POST",
            path,
            b'{"model":{"$ne":1},"messages":[{"role":"user","content":"hi"}]}',
            param="model",
        ),
        Body(
            "role: root",
            "POST",
            path,
            b'{"model":"test/gpt-fake","messages":[{"role":"root","content":"hi"}]}',
        ),
        Body("content: a number", "POST", path, part("content", b"5")),
        Body('stream: "yes"', "POST", path, with_(b'"stream":"yes"'), param="stream"),
        Body("tools: an object", "POST", path, with_(b'"tools":{}'), param="tools"),
        Body(
            "stop: 17 strings (over 16)",
            "POST",
            path,
            with_(b'"stop":' + json.dumps(["s"] * 17).encode()),
            param="stop",
        ),
        Body("n: 0", "POST", path, with_(b'"n":0'), param="n"),
        Body("10,000 messages, the last one broken", "POST", path, msgs(10_000, {"role": "user"})),
        Body(
            "a 1 MiB key of an unknown field, nested 65 deep",
            "POST",
            path,
            with_(b'"' + b"k" * MIB + b'":' + b"[" * 65 + b"]" * 65),
        ),
        Body("trailing garbage", "POST", path, base + b"}xx"),
        Body("two documents", "POST", path, base + b"}" + base + b"}"),
        Body("a UTF-8 BOM in front", "POST", path, b"\xef\xbb\xbf" + base + b"}"),
        Body("UTF-16", "POST", path, (base + b"}").decode().encode("utf-16")),
    ]
    for name in (
        "api_key", "api_base", "base_url", "api_version", "custom_llm_provider",
        "aws_access_key_id", "aws_secret_access_key", "aws_session_token", "aws_region_name",
        "vertex_credentials", "vertex_project", "vertex_location", "azure_endpoint",
        "azure_ad_token", "extra_headers",
    ):  # fmt: skip
        value = (
            b'{"authorization":"Bearer x"}' if name == "extra_headers" else b'"http://evil.example"'
        )
        out.append(
            Body(
                f"override {name}",
                "POST",
                path,
                with_(b'"' + name.encode() + b'":' + value),
                param=name,
            )
        )

    # -- accepted by design: what reaches the upstream is re-encoded from what was checked --
    def forwards(check: Callable[[dict[str, Any]], bool]) -> Callable[[bytes], bool]:
        return lambda raw: _no_duplicate_keys(raw) and check(json.loads(raw))

    out += [
        Body(
            "unknown fields (ignored, not forwarded)",
            "POST",
            path,
            with_(b'"zzz":1,"__proto__":{"admin":true},"constructor":{"prototype":1}'),
            refuse=False,
            forwarded=forwards(lambda d: not {"zzz", "__proto__", "constructor"} & set(d)),
        ),
        Body(
            "duplicate keys (the last wins, forwarded once)",
            "POST",
            path,
            b'{"model":"nope","model":"test/gpt-fake","messages":[{"role":"user","content":"a"}],'
            b'"messages":[{"role":"user","content":"hi"}]}',
            refuse=False,
            forwarded=forwards(lambda d: d["messages"][0]["content"] == "hi"),
        ),
        Body(
            "an escaped NUL in content",
            "POST",
            path,
            part("content", b'"a\\u0000b"'),
            refuse=False,
            forwarded=forwards(lambda d: d["messages"][0]["content"] == "a\x00b"),
        ),
        Body(
            "10,000 messages",
            "POST",
            path,
            msgs(10_000),
            refuse=False,
            forwarded=forwards(lambda d: len(d["messages"]) == 10_000),
        ),
        Body(
            "10,000 content parts",
            "POST",
            path,
            part("content", json.dumps([{"type": "text", "text": "x"}] * 10_000).encode()),
            refuse=False,
            forwarded=forwards(lambda d: len(d["messages"][0]["content"]) == 10_000),
        ),
    ]
    return out


def admin_bodies() -> list[Body]:
    deep_arr = b"[" * DEEP + b"]" * DEEP
    deep_obj = b'{"a":' * DEEP + b"1" + b"}" * DEEP
    big = b"1" + b"0" * 400
    accounts = "/admin/accounts"
    credits = "/admin/accounts/victim/credits"
    connection = "/admin/accounts/victim/connections/conn_hostile"
    revoke = "/admin/keys/revoke"
    price = "/admin/accounts/victim/prices/test/gpt-fake"
    out = []
    for path, method in (
        (accounts, "POST"),
        (credits, "POST"),
        (connection, "PUT"),
        (revoke, "POST"),
        (price, "PUT"),
    ):
        where = path.split("/victim")[-1] if "victim" in path else path
        out += [
            Body(f"{method} {where}: arrays 100,000 deep", method, path, deep_arr),
            Body(f"{method} {where}: objects 100,000 deep", method, path, deep_obj),
            Body(
                f"{method} {where}: 16 MiB + 1 byte",
                method,
                path,
                b"",
                status=413,
                oversize=MAX_BODY + 1,
            ),
            Body(f"{method} {where}: invalid UTF-8", method, path, b'{"name":"\xff\xfe"}'),
            Body(f"{method} {where}: a raw NUL", method, path, b'{"name":"a\x00"}'),
            Body(f"{method} {where}: null", method, path, b"null"),
            Body(f"{method} {where}: an array", method, path, b"[]"),
            Body(f"{method} {where}: an unknown field", method, path, b'{"zzz":1}'),
            Body(f"{method} {where}: trailing garbage", method, path, b"{}}"),
        ]
    out += [
        Body("POST /admin/accounts: no name", "POST", accounts, b"{}", param="name"),
        Body("POST /admin/accounts: name a number", "POST", accounts, b'{"name":5}', param="name"),
        Body(
            "POST /admin/accounts: a 1 MiB name",
            "POST",
            accounts,
            b'{"name":"' + b"n" * MIB + b'"}',
            param="name",
        ),
        Body(
            "POST /admin/accounts: name with a NUL",
            "POST",
            accounts,
            b'{"name":"a\\u0000"}',
            param="name",
        ),
        Body(
            "POST /admin/accounts: credits 1e999",
            "POST",
            accounts,
            b'{"name":"h1","credits":1e999}',
            param="credits",
        ),
        Body(
            "POST /admin/accounts: credits 10**400",
            "POST",
            accounts,
            b'{"name":"h2","credits":' + big + b"}",
            param="credits",
        ),
        Body(
            "POST /admin/accounts: credits 1e10 (past int64 nano-dollars)",
            "POST",
            accounts,
            b'{"name":"h3","credits":1e10}',
            param="credits",
        ),
        Body(
            'POST /admin/accounts: credits "1e30"',
            "POST",
            accounts,
            b'{"name":"h4","credits":"1e30"}',
            param="credits",
        ),
        Body(
            'POST /admin/accounts: credits "NaN"',
            "POST",
            accounts,
            b'{"name":"h5","credits":"NaN"}',
            param="credits",
        ),
        Body(
            "POST /admin/accounts: credits an object",
            "POST",
            accounts,
            b'{"name":"h6","credits":{}}',
            param="credits",
        ),
        Body(
            "POST /admin/accounts: metered a string",
            "POST",
            accounts,
            b'{"name":"h7","metered":"yes"}',
            param="metered",
        ),
        Body("POST credits: no amount", "POST", credits, b"{}", param="amount"),
        Body("POST credits: an empty body", "POST", credits, b"", param="amount"),
        Body(
            "POST credits: amount 10**400",
            "POST",
            credits,
            b'{"amount":' + big + b"}",
            param="amount",
        ),
        Body(
            'POST credits: amount "9300000000" (past int64 nano-dollars)',
            "POST",
            credits,
            b'{"amount":"9300000000"}',
            param="amount",
        ),
        Body("POST credits: amount 1e999", "POST", credits, b'{"amount":1e999}', param="amount"),
        Body('POST credits: amount "x"', "POST", credits, b'{"amount":"x"}', param="amount"),
        Body(
            "PUT connection: models a list",
            "PUT",
            connection,
            b'{"provider":"openai","models":[]}',
            param="models",
        ),
        Body(
            "PUT connection: provider a number",
            "PUT",
            connection,
            b'{"provider":5,"models":{}}',
            param="provider",
        ),
        Body(
            "PUT connection: an unknown provider",
            "PUT",
            connection,
            b'{"provider":"nope","models":{}}',
            param="provider",
        ),
        Body(
            "PUT connection: timeouts negative",
            "PUT",
            connection,
            b'{"provider":"openai","models":{},"timeouts":{"total":-1}}',
        ),
        Body("POST revoke: prefix a number", "POST", revoke, b'{"prefix":5}', param="prefix"),
        Body("POST revoke: an empty body", "POST", revoke, b"", param="prefix"),
        Body("POST revoke: prefix too short", "POST", revoke, b'{"prefix":"sk-"}', param="prefix"),
        Body('PUT price: input "x"', "PUT", price, b'{"input":"x","output":1}', param="input"),
        Body("PUT price: input 1e999", "PUT", price, b'{"input":1e999,"output":1}', param="input"),
        Body("PUT price: no output", "PUT", price, b'{"input":1}', param="output"),
    ]
    return out


# --- the Host/path matrix ----------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    method: str
    target: str
    host: str | None
    auth: str
    auth_name: str


def _case_variants(path: str) -> list[str]:
    return [path.upper(), path.title(), path[:2] + path[2:].swapcase()]


def path_variants(path: str) -> list[str]:
    """Ways to spell ``path`` (or reach it) that a lax router might map onto it."""
    first, rest = path[1], path[2:]
    segments = path.strip("/").split("/")
    enc = "".join(f"%{ord(c):02x}" for c in path[1:])
    out = [
        path,
        f"/%{ord(first):02x}{rest}",  # /%61dmin, /%761/models
        f"/%{ord(first):02X}{rest}",
        "/" + enc,
        path.replace("/", "%2F").replace("%2F", "/", 1),
        path.replace("/", "%2f"),
        path.replace(".", "%2e") if "." in path else path + "%2e",
        "/" + "/".join(segments[:-1]) + "/%2e/" + segments[-1],
        "/" + "/".join(segments[:-1]) + "/%2e%2e/" + "/".join(segments[-2:]),
        "/%2e%2e" + path,
        "/%252e%252e" + path,
        "/%c0%ae%c0%ae" + path,
        "/" + path,
        path.replace("/", "//"),
        path + "/",
        path + "//",
        path + ".",
        path + "./",
        path + "/.",
        path + "/..",
        path + "%20",
        path + "%00",
        path + "%0a",
        path + ";",
        path + ";x=y",
        path + ";/",
        path + "..;/",
        path + "?",
        path + "?x=1",
        path + "#",
        path + "#x",
        path + "?#",
        path + "\\",
        path.replace("/", "\\"),
        "/." + path,
        "/./" + path[1:],
        "/" + "/./".join(segments),
        "/x/.." + path,
        "/health/.." + path,
        "/health/%2e%2e" + path,
        "/v1/requests/.." + path,
        "/v1/requests/%2e%2e" + path.replace("/", "%2f"),
        "/admin/.." + path,
        path + "/../" + segments[-1],
        "/" + ";/".join(segments),
        "/" + segments[0] + ";x/" + "/".join(segments[1:]),
        f"http://evil.example{path}",
        f"http://localhost{path}",
        f"https://127.0.0.1:1{path}",
        f"http://evil.example/%2e%2e{path}",
        f"//evil.example{path}",
        *_case_variants(path),
    ]
    return list(dict.fromkeys(out))


HOSTS = (
    None,
    "",
    "localhost",
    "127.0.0.1",
    "127.0.0.1:8787",
    "evil.example",
    "evil.example:80",
    "[::1]",
    "[::1]:8787",
    "admin.internal",
)


def path_matrix(protected: list[str], dev_key: str, admin_key: str, wrong_key: str) -> list[Target]:
    """Every variant of every protected path, every method, every way of not holding the
    right key; Hosts taken in turn (each Host meets each path)."""
    auths = [
        ("no key", ""),
        ("a wrong key", f"Authorization: Bearer {wrong_key}\r\n"),
        ("garbage", "Authorization: Bearer x\r\n"),
        ("Basic with the dev key", f"Authorization: Basic {dev_key}\r\n"),
        ("the dev key in the query", "?"),
        ("the dev key in X-Api-Key", f"X-Api-Key: {dev_key}\r\n"),
    ]
    out = []
    n = 0
    for base in protected:
        admin = base.startswith("/admin/")
        # on admin paths the dev key is a valid key, and not the admin key; on /v1 paths
        # the admin key is not an API key
        wrong_right = ("the dev key", f"Authorization: Bearer {dev_key}\r\n")
        other = ("the admin key", f"Authorization: Bearer {admin_key}\r\n")
        for variant in path_variants(base):
            for method in ("GET", "HEAD", "POST", "OPTIONS", "TRACE"):
                for auth_name, auth in [*auths, wrong_right if admin else other]:
                    host = HOSTS[n % len(HOSTS)]
                    n += 1
                    if auth == "?":
                        query = ("&" if "?" in variant else "?") + f"api_key={dev_key}"
                        out.append(Target(method, variant + query, host, "", auth_name))
                    else:
                        out.append(Target(method, variant, host, auth, auth_name))
    return out


# --- SQL injection -----------------------------------------------------------------------

SQL_PAYLOADS = (
    "' OR '1'='1",
    "' OR 1=1 --",
    '"; DROP TABLE accounts; --',
    "'; DROP TABLE api_keys; --",
    "1; DELETE FROM ledger",
    "' UNION SELECT key_digest, prefix FROM api_keys --",
    "victim' --",
    "victim'/*",
    "%' OR prefix LIKE '%",
    "sk-sluice-%",
    "sk-sluice-____",
    "' OR ''='",
    "\\' OR 1=1 #",
    "'; SELECT pg_sleep(3); --",
    "' AND 1=(SELECT 1 FROM pg_sleep(3)) --",
    "' AND randomblob(500000000) --",
    "$1",
    "?",
    "%s",
    "' OR 1=1\x00",
    "\x00",
    "\u02bc OR \u02bc1\u02bc=\u02bc1",  # modifier letter apostrophe
    "\uff07 OR \uff071\uff07=\uff071",  # fullwidth apostrophe
    "\u2018 OR 1=1 --",
    "\u2019; DROP TABLE accounts; --",
    "'" * 10_000,
    "A" * 100_000,
)


@dataclass
class Probe:
    """One SQL-injection request: who it is, what answers are fine."""

    name: str
    head: bytes
    body: bytes = b""
    protected: bool = False
    """Sent with an injected key: any 2xx is an authentication bypass."""
    payload: str = ""
    request_logged: bool = False
    """A chat request that reaches routing: it leaves a request-log row."""
    creates_key: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
