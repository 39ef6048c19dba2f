"""The base of every translator whose upstream speaks server-sent events.

Subclasses implement ``_event`` for one decoded event, as :mod:`.stream_base` says.
"""

from __future__ import annotations

from sluice.ids import IdFactory
from sluice.providers.base import DEFAULT_SHAPE, StreamShape
from sluice.providers.stream_base import StreamTranslatorBase
from sluice.wire.sse import ServerSentEvent, SSEDecoder


class SSEStreamTranslator(StreamTranslatorBase[ServerSentEvent]):
    __slots__ = ("_sse",)

    def __init__(self, new_id: IdFactory, shape: StreamShape = DEFAULT_SHAPE) -> None:
        super().__init__(new_id, shape)
        self._sse = SSEDecoder(shape.max_event_bytes)

    def _decode(self, data: bytes) -> list[ServerSentEvent]:
        return self._sse.feed(data)

    def _flush(self) -> list[ServerSentEvent]:
        return self._sse.flush()
