"""The feed/finish loop every stream translator shares, whatever framing the upstream uses.

A subclass supplies the decoder hooks: ``_decode`` turns bytes into events (it may be
a generator, pulled one event at a time, so a framing error can depend on what came
before it), ``_flush`` yields what is left at end of input, and ``_event`` handles one
event. It emits through ``self._emit``, sets ``self.failure`` for an in-stream error
(nothing more is produced after it) and ``self.done`` at the upstream's explicit end
(nothing more is read), and keeps ``self.usage`` current.

Bytes are untrusted: an event past the decoder's bound ends the stream with
``upstream_event_too_large``, and JSON nested beyond what a decoder can recurse into
is a malformed event, never an exception out of ``feed``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Generic, TypeVar, cast

from sluice.core.batch import ChunkBatch
from sluice.core.usage import TokenUsage
from sluice.errors import ApiError, UpstreamError
from sluice.ids import IdFactory
from sluice.providers.base import DEFAULT_SHAPE, StreamShape
from sluice.providers.normalize import ChunkEmitter
from sluice.wire.bounds import EventTooLargeError

EventT = TypeVar("EventT")


def malformed_event() -> UpstreamError:
    return UpstreamError(
        "The provider sent a malformed stream event.", code="upstream_malformed_event"
    )


def event_too_large(limit: int) -> UpstreamError:
    return UpstreamError(
        f"The provider sent a stream event larger than {limit} bytes.",
        code="upstream_event_too_large",
    )


class StreamTranslatorBase(Generic[EventT]):
    __slots__ = ("_emit", "done", "failure", "usage")

    def __init__(self, new_id: IdFactory, shape: StreamShape = DEFAULT_SHAPE) -> None:
        self._emit = ChunkEmitter(new_id, shape.choices)
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
            self._pull(self._decode, data)
        return self._emit.take()

    def finish(self) -> ChunkBatch:
        if self.failure is None and not self.done:
            self._pull(self._flush_all, b"")
        if self.failure is not None:
            raise self.failure
        self._emit.check_complete()
        return self._emit.take()

    def _pull(self, decode: Callable[[bytes], Iterable[EventT]], data: bytes) -> None:
        """Handle what ``decode(data)`` yields; a decoder's bound or a nesting too deep
        for a JSON decoder becomes :attr:`failure`, never an exception."""
        try:
            try:
                self._run(decode(data))
            except EventTooLargeError as exc:
                self._run(cast(list[EventT], exc.decoded))  # completed before the bound
                if not self.done:  # (an answer already whole is not spoilt by what follows)
                    self.failure = self.failure or event_too_large(exc.limit)
        except RecursionError:
            self.failure = malformed_event()

    def _flush_all(self, _: bytes) -> Iterable[EventT]:
        return self._flush()

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
