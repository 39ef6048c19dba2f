"""One HTTP call to an upstream, protocol-neutral: what an adapter builds and the
transport sends (docs/architecture.md)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import msgspec


class LocalUpstream(Protocol):
    """An upstream that lives in this process (the demo): a script of pauses and bytes.

    The transport sleeps for each pause, then hands the bytes to the translator
    exactly as if they had come from a socket.
    """

    def script(self) -> Iterator[tuple[float, bytes]]: ...


class AwsSigning(msgspec.Struct, frozen=True):
    """Ask the transport to sign the request with AWS SigV4 (it holds the credentials)."""

    service: str
    region: str


class UpstreamRequest(msgspec.Struct):
    method: str
    url: str
    headers: dict[str, str]
    body: bytes
    stream: bool
    local: LocalUpstream | None = None
    aws_sigv4: AwsSigning | None = None
