"""A cache hit's stream (docs/cache.md): an :class:`~sluice.routing.upstream.UpstreamStream`
whose transport and translator give a kept answer's batches, at once or at their first
pace, or follow an identical request's flight as it runs, the batches already recorded
first, then each as it comes. What follows a flight ends as the flight did: its end,
or its error event for every joiner.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from types import MappingProxyType

from sluice.cache.flight import Flight, chars_in
from sluice.cache.store import CachedAnswer
from sluice.core.batch import ChunkBatch
from sluice.core.usage import TokenUsage
from sluice.errors import ApiError
from sluice.exchange.cached import CacheNote
from sluice.providers.base import Repair
from sluice.providers.normalize import EmittedCall
from sluice.routing.upstream import UpstreamStream


async def replay(note: CacheNote, clock: Callable[[], float]) -> UpstreamStream | None:
    """A hit's stream, opened (its first event read). None when the flight it joined was
    left before its first event (the request then goes upstream itself); the flight's
    error when it failed before."""
    if note.flight is not None:
        upstream = await _following(note.flight)
        if upstream is None:
            return None
    else:
        assert note.answer is not None and note.served_as is not None
        answer = note.answer
        paced = note.config.replay == "paced"
        source = _Replaying(answer.offsets, paced, clock)
        upstream = UpstreamStream(note.served_as, source, _Replay(answer.batches, answer), _same)
    await upstream.open(0)
    return upstream


async def _following(flight: Flight) -> UpstreamStream | None:
    while flight.attempt is None:
        if flight.error is not None:
            if flight.left:
                return None
            raise flight.error
        await flight.changed()
    return UpstreamStream(
        flight.attempt, _Following(flight), _Replay(flight.batches, flight), _same
    )


def _same(err: ApiError) -> ApiError:
    return err


class _Replayed:
    """What a replay's transport answers besides its reads: no status to check, no
    body, no stalls, nothing to give back."""

    status = 200
    headers: Mapping[str, str] = MappingProxyType({})

    async def read_body(self, limit: int) -> bytes:
        return b""

    def watch(self, stall: float) -> None:
        """A replay never stalls."""

    def release(self) -> None:
        """Nothing to give back."""


class _Replaying(_Replayed):
    """A kept answer's transport: one read per stored batch, then the end."""

    def __init__(self, offsets: list[float], paced: bool, clock: Callable[[], float]) -> None:
        self._offsets = offsets
        self._paced = paced
        self._clock = clock
        self._started: float | None = None
        self._next = 0

    async def read_chunk(self) -> bytes:
        if self._next >= len(self._offsets):
            return b""
        now = self._clock()
        if self._started is None:
            self._started = now
        elif self._paced:
            wait = self._started + self._offsets[self._next] - now
            await asyncio.sleep(max(wait, 0))
        else:
            await asyncio.sleep(0)  # the other streams' turn between batches
        self._next += 1
        return b"."

    def close(self) -> None:
        self._next = len(self._offsets)


class _Following(_Replayed):
    """A flight's transport: one read per recorded batch, waiting for the next while
    the flight runs; the end once it ended and every batch was read."""

    def __init__(self, flight: Flight) -> None:
        self._flight = flight
        self._next = 0
        self._closed = False

    async def read_chunk(self) -> bytes:
        flight = self._flight
        while self._next >= len(flight.batches):
            if flight.ended or self._closed:
                return b""
            await flight.changed()
        self._next += 1
        return b"."

    def close(self) -> None:
        self._closed = True


class _Replay:
    """The translator's side: each read is the next batch; at the end the usage of
    ``ending`` (a kept answer, or the flight's answer) or the flight's error. A client
    that leaves before is charged for what it was sent."""

    failure: ApiError | None = None

    def __init__(self, batches: list[ChunkBatch], ending: CachedAnswer | Flight) -> None:
        self.usage: TokenUsage | None = None
        self._batches = batches
        self._ending = ending
        self._next = 0
        self._chars = 0

    @property
    def _answer(self) -> CachedAnswer | None:
        ending = self._ending
        return ending.answer if isinstance(ending, Flight) else ending

    @property
    def output_chars(self) -> int:
        return self._chars

    @property
    def emitter(self) -> _Replay:
        return self

    @property
    def finish_reason(self) -> str | None:
        answer = self._answer
        return None if answer is None else answer.finish_reason

    @property
    def repairs(self) -> list[Repair]:
        return []

    def tool_calls(self) -> list[EmittedCall]:
        answer = self._answer
        return [] if answer is None else answer.tool_calls

    def feed(self, data: bytes) -> ChunkBatch:
        batch = self._batches[self._next]
        self._next += 1
        self._chars += chars_in(batch)
        return batch

    def finish(self) -> ChunkBatch:
        answer = self._answer
        if answer is None:
            ending = self._ending
            assert isinstance(ending, Flight)
            self.failure = ending.error
        else:
            self.usage = answer.tokens
        return []
