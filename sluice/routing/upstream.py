"""One opened attempt's stream: the upstream response, its translator, the feed loop.

The router opens it (:meth:`UpstreamStream.open` reads until the first event the client
must see, which is what failover decides on), the exchange pumps it into its front
door's encoder. The loop that reads, feeds the translator and hands batches on is
written once, in :meth:`UpstreamStream.next_batch`; an upstream failure is raised from
there, once, already scrubbed of the request's credentials. Closing the stream closes
the upstream connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Final

import msgspec

from sluice.core.batch import ChunkBatch
from sluice.errors import ApiError
from sluice.providers.base import StreamTranslator
from sluice.routing.plan import Attempt
from sluice.transport.port import UpstreamResponse
from sluice.wire.chunks import Choice

TURN_BYTES: Final = 32 * 1024
"""A read this big gives the event loop's other work its turn before it is translated: a
read returns at once while the upstream's bytes wait buffered, so a stream with a fast
upstream would otherwise translate read after read while every other stream (and
``/health``) waits. A stream of small events never reads this much at once."""
Scrub = Callable[[ApiError], ApiError]
Sink = Callable[[ChunkBatch], Awaitable[None]]


def _has_event(batch: ChunkBatch) -> bool:
    """A chunk the client must see: anything beyond the role chunk."""
    for choices in batch:
        choice: Choice = choices[0]
        if choice.finish_reason is not None or choice.delta.role is msgspec.UNSET:
            return True
    return False


class UpstreamStream:
    """``first``: what was read while opening (taken once by :meth:`take_first`);
    ``ended``: the upstream finished while opening, nothing more will come."""

    __slots__ = ("_first", "_held", "_resp", "_scrub", "attempt", "ended", "translator")

    def __init__(
        self,
        attempt: Attempt,
        response: UpstreamResponse,
        translator: StreamTranslator,
        scrub: Scrub,
    ) -> None:
        self.attempt = attempt
        self.translator = translator
        self._resp = response
        self._scrub = scrub
        self._first: ChunkBatch = []
        self._held = b""
        self.ended = False

    async def next_batch(self) -> ChunkBatch | None:
        """The chunks of the next upstream read (maybe none); None after the end. The
        translator's failure, or a cut stream, raises here (the batch before it was
        returned first)."""
        translator = self.translator
        if translator.failure is not None:
            raise translator.failure
        if self.ended:
            return None
        data, self._held = self._held, b""
        if not data:
            data = await self._resp.read_chunk()
        if len(data) >= TURN_BYTES:  # more is likely waiting: the other streams' turn first
            self._held = data  # a cancel in the turn loses nothing for a read that goes on
            await asyncio.sleep(0)
            self._held = b""
        if data:
            return translator.feed(data)
        self.ended = True
        return translator.finish()

    async def open(self, stall: float) -> None:
        """Read until the first event the client must see, or the end; then watch for
        stalls. Runs under the caller's first-event deadline."""
        while (batch := await self.next_batch()) is not None:
            self._first.extend(batch)
            if _has_event(batch):
                break
        if not self.ended:
            self._resp.watch(stall)

    def take_first(self) -> ChunkBatch:
        first, self._first = self._first, []
        return first

    async def pump(self, sink: Sink) -> None:
        """The rest of the stream into ``sink``, batch by batch; the hot path. An upstream
        failure closes the upstream and is raised scrubbed; the end returns the
        connection to its pool. On anything else (the client left, a cancel) the
        caller decides: :meth:`close`, or pump on unsent (a drain)."""
        next_batch = self.next_batch
        try:
            while (batch := await next_batch()) is not None:
                if batch:
                    await sink(batch)
        except ApiError as exc:
            self._resp.close()
            raise self._scrub(exc) from None
        self._resp.release()

    def close(self) -> None:
        """Close the upstream connection (the client left, or a guardrail blocked)."""
        self._resp.close()
