"""The transport as the gateway sees it: :class:`Transport` sends an
:class:`~sluice.core.upstream_request.UpstreamRequest` and hands back an
:class:`UpstreamResponse`. Routing, the guardrail webhook and the composition root know
only these protocols; :class:`~sluice.transport.http.HttpTransport` is the one
implementation, and tests use a double (``tests/support/fake_transport.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from sluice.core.connection import Timeouts
from sluice.core.upstream_request import UpstreamRequest


class UpstreamResponse(Protocol):
    status: int
    headers: Mapping[str, str]

    async def read_chunk(self) -> bytes:
        """The next bytes that arrived; ``b""`` at the end of the body."""
        ...

    async def read_body(self, limit: int) -> bytes:
        """The whole body, at most ``limit`` bytes of it."""
        ...

    def close(self) -> None:
        """Drop the upstream connection now (the provider sees the client go away)."""
        ...

    def watch(self, stall: float) -> None:
        """From now on, silence longer than ``stall`` seconds ends the body with
        ``request_timeout`` / ``stream_stalled``. (The connection's ``total`` deadline,
        ``deadline_exceeded``, runs from the moment the request was sent.)"""
        ...

    def release(self) -> None:
        """The body was read to its end; the connection may be reused."""
        ...


class Transport(Protocol):
    """One per gateway process, shared by every generation of the config."""

    async def start(self) -> None:
        """Open the connection pools; nothing is sent before."""
        ...

    async def close(self) -> None:
        """Close the pools; a send from now on is refused (``ShuttingDownError``)."""
        ...

    def signing_secrets(self) -> tuple[str, ...]:
        """The credentials this process signs requests with, to be scrubbed from errors."""
        ...

    async def send(
        self,
        req: UpstreamRequest,
        timeouts: Timeouts,
        *,
        guarded: bool = False,
        fresh: bool = False,
    ) -> UpstreamResponse:
        """The upstream's response, once its head arrived. ``guarded``: an account's own
        connection (SSRF checks, its own pool); ``fresh``: on a new connection (a
        resend). Raises :class:`~sluice.transport.failures.RequestNotSentError` when the
        request certainly did not reach the upstream: it may be sent again."""
        ...
