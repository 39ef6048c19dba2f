"""Keep-alives (the front door's ``keepalive`` bytes) while a stream sends the client
nothing: before the first upstream event, and mid-stream when the upstream pauses (a
reasoning model thinking, a guardrail holding text back).

Proxies with ~60-100 s idle limits would otherwise cut a long prefill or pause. A timer
ticks every interval and writes one when nothing went out since the last tick (the
writer counts its writes: no per-event work here), so a client waits at most two
intervals for a byte. The first one commits the 200 and the SSE head; failover stays
possible after it (docs/api.md#the-stream), and if every target then fails the client
gets the error event instead of an HTTP error.
"""

from __future__ import annotations

import asyncio

from sluice.exchange.ports import ClientGoneError, ClientStream, Headers


class KeepAlive:
    __slots__ = ("_comment", "_handle", "_headers", "_interval", "_loop", "_seen", "_writer")

    def __init__(
        self, writer: ClientStream, headers: Headers, interval: float, comment: bytes
    ) -> None:
        self._writer = writer
        self._comment = comment
        self._headers = headers
        self._interval = interval
        self._loop = asyncio.get_running_loop()
        self._handle: asyncio.TimerHandle | None = None
        self._seen = writer.writes
        if interval > 0:
            self._handle = self._loop.call_later(interval, self._tick)

    def _tick(self) -> None:
        self._handle = None
        if self._writer.finished:  # (an end still draining to the client)
            return
        if self._writer.writes == self._seen:
            try:
                self._writer.start(200, self._headers)
                self._writer.write_now(self._comment)
            except ClientGoneError:
                return
        self._seen = self._writer.writes
        self._handle = self._loop.call_later(self._interval, self._tick)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
