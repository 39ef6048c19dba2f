"""The framing vectors about the request line and Host (RFC 9112 §3): refused, nothing
reaches the upstream; see ``protocol_framing`` for how they are built."""

from __future__ import annotations

from bench.resilience.protocol_framing import FramingTable, chunked


def request_lines(t: FramingTable) -> None:
    """Request lines that are not HTTP/1.1's, and other protocols on its port."""
    add = t.add
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
        chunked,
        line="POST /v1/chat/completions HTTP/1.0",
    )


def hosts(t: FramingTable) -> None:
    """A missing, repeated or invalid Host (RFC 9112 §3.2: a server MUST answer 400)."""
    add = t.add
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
