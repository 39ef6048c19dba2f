"""The feed/finish loop every stream translator shares, whatever framing the upstream uses.

A subclass supplies the decoder hooks: ``_decode`` turns bytes into events (it may be
a generator, pulled one event at a time, so a framing error can depend on what came
before it), ``_flush`` yields what is left at end of input, and ``_event`` handles one
event. It emits through ``self._emit``, sets ``self.failure`` for an in-stream error
(nothing more is produced after it) and ``self.done`` at the upstream's explicit end
(nothing more is read), and keeps ``self.usage`` current.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Generic, TypeVar

from sluice.errors import ApiError, UpstreamError
from sluice.ids import IdFactory
from sluice.metering.tokens import TokenUsage
from sluice.providers.base import ChunkBatch
from sluice.providers.normalize import ChunkEmitter

EventT = TypeVar("EventT")


def malformed_event() -> UpstreamError:
    return UpstreamError(
        "The provider sent a malformed stream event.", code="upstream_malformed_event"
    )


class StreamTranslatorBase(Generic[EventT]):
    __slots__ = ("_emit", "done", "failure", "usage")

    def __init__(self, new_id: IdFactory) -> None:
        self._emit = ChunkEmitter(new_id)
        self.usage: TokenUsage | None = None
        self.failure: ApiError | None = None
        self.done = False

    @property
    def output_chars(self) -> int:
        return self._emit.output_chars

    @property
    def emitter(self) -> ChunkEmitter:
        return self._emit

    def feed(self, data: bytes) -> ChunkBatch:
        if self.failure is None and not self.done:
            self._run(self._decode(data))
        return self._emit.take()

    def finish(self) -> ChunkBatch:
        if self.failure is None and not self.done:
            self._run(self._flush())
        if self.failure is not None:
            raise self.failure
        self._emit.check_complete()
        return self._emit.take()

    def _run(self, events: Iterable[EventT]) -> None:
        for event in events:
            self._event(event)
            if self.failure is not None or self.done:
                return

    def _decode(self, data: bytes) -> Iterable[EventT]:
        raise NotImplementedError

    def _flush(self) -> Iterable[EventT]:
        raise NotImplementedError

    def _event(self, event: EventT) -> None:
        raise NotImplementedError
