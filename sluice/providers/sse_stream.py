"""The loop shared by every translator whose upstream speaks server-sent events.

Subclasses implement ``_event`` for one decoded event; they emit through
``self._emit``, set ``self.failure`` for an in-stream error (nothing more is produced
after it) and ``self.done`` at the upstream's explicit end marker, and keep
``self.usage`` current.
"""

from __future__ import annotations

from sluice.errors import ApiError, UpstreamError
from sluice.ids import IdFactory
from sluice.metering.tokens import TokenUsage
from sluice.providers.base import ChunkBatch
from sluice.providers.normalize import ChunkEmitter
from sluice.wire.sse import ServerSentEvent, SSEDecoder


def malformed_event() -> UpstreamError:
    return UpstreamError(
        "The provider sent a malformed stream event.", code="upstream_malformed_event"
    )


class SSEStreamTranslator:
    def __init__(self, new_id: IdFactory) -> None:
        self._sse = SSEDecoder()
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
            self._run(self._sse.feed(data))
        return self._emit.take()

    def finish(self) -> ChunkBatch:
        if self.failure is None and not self.done:
            self._run(self._sse.flush())
        if self.failure is not None:
            raise self.failure
        self._emit.check_complete()
        return self._emit.take()

    def _run(self, events: list[ServerSentEvent]) -> None:
        for event in events:
            self._event(event)
            if self.failure is not None or self.done:
                return

    def _event(self, event: ServerSentEvent) -> None:
        raise NotImplementedError
