"""The requests a connection has read while it serves another (a pipelining client):
held in order, and reading paused while too many wait."""

from __future__ import annotations

import asyncio
from collections import deque

from sluice.server.intake import Intake
from sluice.server.message import Request

PAUSE_AT = 8
"""Requests held at which reading pauses; it resumes once the last of them is served."""
LIMIT = 8 * PAUSE_AT
"""The most one read may add: the next request is refused after those held."""


class Pipeline:
    def __init__(self, intake: Intake) -> None:
        self._intake = intake
        self._held: deque[Request] = deque()
        self.paused = False
        """Reading is paused (for the requests held, or by :meth:`pause`)."""

    def __bool__(self) -> bool:
        return bool(self._held)

    @property
    def full(self) -> bool:
        return len(self._held) >= LIMIT

    def hold(self, request: Request, transport: asyncio.Transport | None) -> None:
        self._held.append(request)
        if len(self._held) >= PAUSE_AT:
            self.pause(transport)

    def pause(self, transport: asyncio.Transport | None) -> None:
        if not self.paused and transport is not None:
            self.paused = True
            transport.pause_reading()

    def next(self, transport: asyncio.Transport | None, resume: bool = True) -> Request:
        """The next request to serve; reading resumes (``resume``) when none is left."""
        request = self._held.popleft()
        if self.paused and resume and not self._held and transport is not None:
            self.paused = False
            transport.resume_reading()
        return request

    def drop(self) -> None:
        """Requests that will not be served: their bytes are given back."""
        for request in self._held:
            self._intake.release(request.received)
        self._held.clear()
