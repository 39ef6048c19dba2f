"""The listening socket and its connections, with a graceful stop."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from typing import Any

from sluice.server.http1 import HttpConnection
from sluice.server.intake import ErrorResponse, HeadGate, Intake, Limits
from sluice.server.message import Handler

_LAST_WORDS_SECONDS = 1.0
"""How long interrupted responses get to write their last event and flush it."""


class Listener:
    def __init__(self, server: asyncio.Server, intake: Intake) -> None:
        self.server = server
        self._intake = intake
        self._live = intake.live

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.server.sockets[0].getsockname()[:2]
        return host, port

    async def stop(self, grace: float) -> None:
        """Stop accepting, close idle connections, give busy ones ``grace`` seconds to
        finish their response, then interrupt them: each ends its response with
        ``server_shutting_down`` and settles. Connections still open a moment later
        (a client not reading its last bytes) are cut."""
        self.server.close()
        for conn in list(self._live):
            conn.close_when_idle()
        busy = [c.task for c in self._live if c.task is not None]
        if busy:
            await asyncio.wait(busy, timeout=grace)
        cut = [c.task for c in self._live if c.task is not None]
        for conn in list(self._live):
            conn.interrupt()
        if cut:  # their handlers write their last event and settle
            await asyncio.wait(cut, timeout=_LAST_WORDS_SECONDS)
        with contextlib.suppress(TimeoutError):  # their last bytes flush, then they close
            async with asyncio.timeout(_LAST_WORDS_SECONDS):
                await self._intake.all_closed()
        for conn in list(self._live):
            conn.abort()
        await asyncio.sleep(0)  # let the remaining connection_lost callbacks run


async def listen(
    handler: Handler,
    limits: Limits,
    error_response: ErrorResponse,
    host: str,
    port: int,
    *,
    tls: ssl.SSLContext | None = None,
    gate: HeadGate | None = None,
    **kwargs: Any,
) -> Listener:
    """With ``tls`` every connection is HTTPS; a client gets ``header_timeout`` seconds
    for its TLS handshake too. A client that does not speak TLS is dropped quietly."""
    intake = Intake(limits)
    loop = asyncio.get_running_loop()
    if tls is not None:
        kwargs |= {"ssl": tls, "ssl_handshake_timeout": limits.header_timeout}
    server = await loop.create_server(
        lambda: HttpConnection(handler, limits, error_response, intake, gate),
        host,
        port,
        backlog=4096,
        reuse_address=True,
        **kwargs,
    )
    return Listener(server, intake)
