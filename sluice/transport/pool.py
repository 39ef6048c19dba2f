"""A connection pool that can tell whether a request went out on a reused connection.

An upstream may close an idle keep-alive connection just as the pool hands it out; the
request then fails without an answer, and is safe to send once more (RFC 9112 §9.3.1).
A fresh connection that fails the same way may have had the request acted on, so the
difference matters. aiohttp's trace hooks can tell too, but cost every request ~3 %.
"""

from __future__ import annotations

import weakref
from contextvars import ContextVar
from typing import Any

import aiohttp
from aiohttp.client_proto import ResponseHandler
from aiohttp.connector import Connection
from aiohttp.tracing import Trace


class PoolConnector(aiohttp.TCPConnector):
    """:attr:`reused`, read in the task that sent the request: whether the connection
    it got last had carried a request before."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._seen: weakref.WeakSet[ResponseHandler] = weakref.WeakSet()
        self.reused: ContextVar[bool] = ContextVar(f"sluice_pool_reused_{id(self)}")

    async def connect(
        self,
        req: aiohttp.ClientRequest,
        traces: list[Trace],
        timeout: aiohttp.ClientTimeout,  # noqa: ASYNC109 (aiohttp's signature)
    ) -> Connection:
        conn = await super().connect(req, traces, timeout)
        protocol = conn.protocol
        if protocol is not None:
            self.reused.set(protocol in self._seen)
            self._seen.add(protocol)
        return conn
