"""What the transport needs to know to resend a request safely (RFC 9112 §9.3.1).

An upstream may close an idle keep-alive connection just as the pool hands it out. A
request that fails that way may be sent again only when it was certainly not acted on:
here, when it went out on a reused connection and its bytes were not all handed to
the socket. Two small hooks tell:

* :class:`PoolConnector` marks (in :attr:`PoolConnector.reused`, read in the task that
  sent the request) whether the connection had carried a request before;
* :class:`TrackedRequest` marks, in the :class:`SendState` of the sending task, when
  the whole request (head and body) was written without error.

aiohttp's trace hooks could tell the first too, but cost every request ~3 %.
"""

from __future__ import annotations

import weakref
from contextvars import ContextVar
from typing import Any

import aiohttp
from aiohttp.abc import AbstractStreamWriter
from aiohttp.client_proto import ResponseHandler
from aiohttp.connector import Connection
from aiohttp.tracing import Trace


class SendState:
    """One request's progress: ``written`` once all of it reached the socket."""

    __slots__ = ("written",)

    def __init__(self) -> None:
        self.written = False


SENDING: ContextVar[SendState | None] = ContextVar("sluice_sending", default=None)
"""The :class:`SendState` of the request the current task is sending."""


class TrackedRequest(aiohttp.ClientRequest):
    """aiohttp's request, noting when its body was written out in full."""

    async def write_bytes(
        self, writer: AbstractStreamWriter, conn: Connection, content_length: int | None = None
    ) -> None:
        await super().write_bytes(writer, conn, content_length)
        state = SENDING.get()
        protocol = conn.protocol
        if state is not None and protocol is not None and protocol.exception() is None:
            state.written = True  # aiohttp records a failed write on the protocol


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
