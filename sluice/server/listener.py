"""The listening socket and its connections, with a graceful stop."""

from __future__ import annotations

import asyncio
from typing import Any

from sluice.server.exchange import Handler
from sluice.server.http1 import ErrorResponse, HttpConnection, Limits


class Listener:
    def __init__(self, server: asyncio.Server, live: set[HttpConnection]) -> None:
        self.server = server
        self._live = live

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.server.sockets[0].getsockname()[:2]
        return host, port

    async def stop(self, grace: float) -> None:
        """Stop accepting, close idle connections, give busy ones ``grace`` seconds to
        finish their response, then cut them (which cancels their requests)."""
        self.server.close()
        for conn in list(self._live):
            conn.close_when_idle()
        busy = [c.task for c in self._live if c.task is not None]
        if busy:
            await asyncio.wait(busy, timeout=grace)
        cut = [c.task for c in self._live if c.task is not None]
        for conn in list(self._live):
            conn.abort()  # its connection_lost cancels its request
        if cut:  # their handlers settle (or hand off) before the gateway closes
            await asyncio.wait(cut, timeout=grace)
        await asyncio.sleep(0)  # let the remaining connection_lost callbacks run


async def listen(
    handler: Handler,
    limits: Limits,
    error_response: ErrorResponse,
    host: str,
    port: int,
    **kwargs: Any,
) -> Listener:
    live: set[HttpConnection] = set()
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: HttpConnection(handler, limits, error_response, live),
        host,
        port,
        backlog=4096,
        reuse_address=True,
        **kwargs,
    )
    return Listener(server, live)
