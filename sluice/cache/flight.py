"""Identical requests in flight (docs/cache.md#identical-requests-in-flight): while a
cacheable miss streams from its upstream, a request with the same key (and the same
output guardrails) joins it instead of making a second upstream call. The miss (the
*leader*) records every batch its translator gives, before any guardrail, into its
:class:`Flight`; a joiner reads them from the first and then waits for the tail. The
same record is what the cache keeps when the answer qualifies.

One process's flights are in :class:`Flights`, by key. A flight stops taking joiners
once its record outgrows the cache's largest entry; a flight nobody reads any more stops
recording past that bound.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from sluice.cache.store import CachedAnswer
from sluice.core.batch import ChunkBatch
from sluice.errors import ApiError, UpstreamError
from sluice.routing.plan import Attempt
from sluice.wire.chunks import FunctionDelta

CUT = frozenset({"length", "content_filter"})
"""A choice that ended so is not a whole answer."""


class Flight:
    """One leader's stream as it runs. ``readers``: joiners reading it now."""

    __slots__ = (
        "_changed",
        "_chars",
        "_clock",
        "_most",
        "_started",
        "account_id",
        "answer",
        "attempt",
        "batches",
        "error",
        "keepable",
        "leader",
        "left",
        "offsets",
        "output_rules",
        "readers",
    )

    def __init__(
        self,
        leader: str,
        account_id: str,
        output_rules: object,
        *,
        clock: Callable[[], float],
        most: int,
    ) -> None:
        self.leader = leader
        """The leading request's id (a joiner's ``cache_filled_by``)."""
        self.account_id = account_id
        self.output_rules = output_rules
        """The output guardrails the leader's stream passes: a joiner's must be these."""
        self._clock = clock
        self._most = most
        self._chars = 0
        self._started: float | None = None
        self._changed = asyncio.Event()
        self.batches: list[ChunkBatch] = []
        self.offsets: list[float] = []
        """Seconds after the first batch at which each batch came."""
        self.keepable = True
        """Whole so far and within ``most`` characters: the cache may keep it."""
        self.attempt: Attempt | None = None
        """The attempt that answers, once the leader's upstream opened."""
        self.answer: CachedAnswer | None = None
        """The complete answer, once it ended so."""
        self.error: ApiError | None = None
        """How it failed, once it did."""
        self.readers = 0
        self.left = False
        """The leader stopped reading with nobody else reading."""

    @property
    def ended(self) -> bool:
        return self.answer is not None or self.error is not None

    @property
    def joinable(self) -> bool:
        """A request arriving now may join: it has not ended badly and its record is whole."""
        return self.error is None and self.keepable

    @property
    def deserted(self) -> bool:
        """No joiner reads it (a leader whose client left need not read on)."""
        return self.readers == 0

    def opened(self, attempt: Attempt) -> None:
        self.attempt = attempt
        self._tell()

    def record(self, batch: ChunkBatch) -> None:
        """The leader's next batch, as its translator gave it."""
        if not self.keepable and self.deserted:
            return
        now = self._clock()
        if self._started is None:
            self._started = now
        self._chars += chars_in(batch)
        if self._chars > self._most or any(c.finish_reason in CUT for cs in batch for c in cs):
            self.keepable = False
            if self.deserted:
                self.batches, self.offsets = [], []
                return
        self.batches.append(batch)
        self.offsets.append(now - self._started)
        self._tell()

    def replayed(self, attempt: Attempt, answer: CachedAnswer) -> None:
        """The leader was answered from the cache (a semantic hit): so are its joiners."""
        self.batches, self.offsets = answer.batches, answer.offsets
        self.keepable = False
        self.answer = answer
        self.opened(attempt)

    def finished(self, answer: CachedAnswer) -> None:
        """Read to its end (``answer.tokens`` estimated when the upstream reported none)."""
        self.answer = answer
        self._tell()

    def failed(self, error: ApiError) -> None:
        if not self.ended:
            self.error = error
            self._tell()

    def abandoned(self) -> None:
        """The leader stopped reading, with nobody else reading: a stream cut short for
        whoever joins in the meantime."""
        if not self.ended:
            self.left = True
            self.failed(
                UpstreamError(
                    "The response stream ended before it completed.", code="stream_incomplete"
                )
            )

    async def changed(self) -> None:
        """Until the flight opens, grows or ends."""
        await self._changed.wait()

    def _tell(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()


class Flights:
    """One process's flights by cache key; ``clock`` in seconds times their batches."""

    __slots__ = ("_by_key", "clock")

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self._by_key: dict[str, Flight] = {}

    def __len__(self) -> int:
        return len(self._by_key)

    @property
    def joiners(self) -> int:
        """Requests reading another's flight now."""
        return sum(f.readers for f in self._by_key.values())

    def joinable(self, key: str, output_rules: object) -> Flight | None:
        flight = self._by_key.get(key)
        if flight is None or not flight.joinable or flight.output_rules != output_rules:
            return None
        return flight

    def lead(self, key: str, flight: Flight) -> None:
        """``flight`` is the one for ``key``, unless another still takes joiners."""
        running = self._by_key.get(key)
        if running is None or not running.joinable:
            self._by_key[key] = flight

    def landed(self, key: str, flight: Flight) -> None:
        """The leader settled: later requests are served by the store, or go upstream."""
        if self._by_key.get(key) is flight:
            del self._by_key[key]


def chars_in(batch: ChunkBatch) -> int:
    """Characters of content, reasoning and tool arguments in ``batch``."""
    count = 0
    for choices in batch:
        for choice in choices:
            delta = choice.delta
            count += len(delta.content or "") + len(delta.reasoning_content or "")
            for call in delta.tool_calls or ():
                function = call.function
                if isinstance(function, FunctionDelta):
                    count += len(function.arguments or "")
    return count
