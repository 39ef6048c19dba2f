"""How a framing vector of the "request smuggling framings" rows is built.

Every framing vector carries the valid development key and a valid chat body tagged
with a marker of its own (the fake upstream records bodies, so whatever reaches it is
attributed to the vector that sent it): only the framing can stop it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from bench.resilience.protocol_exchange import chat_body

Kind = Literal["vector", "control", "host"]


@dataclass
class Framing:
    name: str
    marker: str
    head: bytes
    body: bytes = b""
    kind: Kind = "vector"
    expect_upstream: int = 1
    """Controls: how many requests must reach the upstream (two for a pipelined pair)."""
    stream: Callable[[], bytes | None] | None = None


def chunked(body: bytes) -> bytes:
    return b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)


@dataclass
class FramingTable:
    """The framing vectors for one key, numbered (their markers) in the order added."""

    key: str
    vectors: list[Framing] = field(default_factory=list)

    @property
    def auth(self) -> str:
        return f"Authorization: Bearer {self.key}\r\nContent-Type: application/json\r\n"

    def add(
        self,
        name: str,
        headers: str,
        body: Callable[[bytes], bytes] | None = None,
        *,
        line: str = "POST /v1/chat/completions HTTP/1.1",
        host: str | None = "Host: gateway.test\r\n",
        kind: Kind = "vector",
        expect_upstream: int = 1,
        raw: Callable[[bytes, str], bytes] | None = None,
        stream: Callable[[], bytes | None] | None = None,
    ) -> None:
        """A vector: ``line``, ``host``, the key and ``headers`` (``{n}``: the length of
        the chat body), then ``body`` of the chat body (``<SLEN>`` and ``<SMUGGLED>``:
        the size and the bytes of a whole second request); ``raw``: the head instead."""
        auth = self.auth
        marker = f"framing-{len(self.vectors):03d}"
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
        self.vectors.append(Framing(name, marker, head, content, kind, expect_upstream, stream))
