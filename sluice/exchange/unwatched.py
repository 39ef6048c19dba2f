"""The client stream of a response nobody is on the line for: a background response
(docs/responses.md#background-responses). The exchange runs it as any stream; its
events go to the stream's relay (stamped and kept for readers), never to a socket, so
no client leaving can stop it. An answer sent whole before the stream began (a request
refused at admission) is kept for the request that created it, to answer with.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from sluice.exchange.ports import Headers
from sluice.exchange.relay import Relay, Resumption


class Unwatched:
    """A :class:`~sluice.exchange.ports.ClientStream` writing into a relay. ``decided``
    is set once the request was admitted (its stream began) or refused (``refusal``)."""

    __slots__ = (
        "_opening",
        "_relay",
        "_stopping",
        "decided",
        "finished",
        "keep_alive",
        "refusal",
        "resume",
        "started",
        "writes",
    )

    def __init__(self, resume: Resumption, stopping: Callable[[], bool], opening: bytes) -> None:
        self.resume = resume
        self._opening = opening
        self._stopping = stopping
        self._relay: Relay | None = None
        self.decided = asyncio.Event()
        self.refusal: tuple[int, Headers, bytes] | None = None
        """The status, headers and body of a request refused before its stream began."""
        self.started = False
        self.finished = False
        self.keep_alive = False
        self.writes = 0
        resume.on_begin = self._began
        resume.unwatched = True

    def _began(self, relay: Relay) -> None:
        relay.opening = self._opening
        self._relay = relay
        self.started = True
        self.decided.set()

    @property
    def interrupted(self) -> bool:
        """Cut by the gateway's stop (then it ends ``failed``, not ``cancelled``)."""
        return self._stopping()

    async def send(self, status: int, headers: Headers, body: bytes) -> None:
        self.send_now(status, headers, body)

    def send_now(self, status: int, headers: Headers, body: bytes) -> None:
        self.refusal = (status, headers, body)
        self.finished = True
        self.decided.set()

    def start(self, status: int, headers: Headers) -> None:
        """The head is the readers' (each gets the stream's headers from its relay)."""

    def write_now(self, data: bytes) -> None:
        self.writes += 1
        if self._relay is not None:
            self._relay.stamp(data)

    async def write(self, data: bytes) -> None:
        self.write_now(data)

    def end_now(self, data: bytes) -> None:
        """The stream's last event, written by a stop that cut it."""
        self.write_now(data)
        self.finished = True
        self.resume.done("failed")

    async def end(self, data: bytes = b"", close: bool = False) -> None:
        self.write_now(data)
        self.finished = True
        self.resume.done("failed" if close else "complete")
