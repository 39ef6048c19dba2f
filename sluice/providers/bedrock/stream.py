"""ConverseStream: event-stream frames in, normalized chunks out.

Frames carry ``:message-type`` ``event`` (the Converse event named by ``:event-type``,
its members as JSON), ``exception`` (named by ``:exception-type``) or ``error``
(``:error-code``). Only tool blocks open with ``contentBlockStart``; text and
reasoning deltas arrive without one. A tool call's index is the order of its block
among the tool blocks; ``server_tool_use`` blocks (tools Bedrock runs itself) are not
the client's to call and are skipped. A reasoning delta's ``signature`` and
``redactedContent`` become ``reasoning_signature`` and ``redacted_reasoning``, which a
later turn sends back as ``thinking_blocks``.

The answer is complete at ``messageStop``; ``metadata`` (usage) normally follows and
is read if it comes. After ``messageStop`` nothing else can fail the stream.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import MappingProxyType

import msgspec
from msgspec import Struct

from sluice.errors import ApiError, UpstreamError
from sluice.ids import IdFactory
from sluice.providers.base import DEFAULT_SHAPE, StreamShape
from sluice.providers.bedrock.mapping import (
    ERROR_STATUS,
    Usage,
    bedrock_error,
    error_type_name,
    finish_reason,
    token_usage,
)
from sluice.providers.stream_base import StreamTranslatorBase, malformed_event
from sluice.wire.eventstream import EventStreamDecoder, EventStreamError, EventStreamMessage

SERVER_TOOL = "server_tool_use"

# --- the upstream's events (decode only) ------------------------------------------------


class _ToolUseStart(Struct, rename="camel"):
    tool_use_id: str
    name: str
    type: str | None = None


class _BlockStart(Struct, rename="camel"):
    tool_use: _ToolUseStart | None = None


class _BlockStartEvent(Struct, rename="camel"):
    content_block_index: int = 0
    start: _BlockStart | None = None


class _ToolUseDelta(Struct):
    input: str = ""


class _ReasoningDelta(Struct, rename="camel"):
    text: str | None = None
    signature: str | None = None
    redacted_content: str | None = None


class _BlockDelta(Struct, rename="camel"):
    text: str | None = None
    tool_use: _ToolUseDelta | None = None
    reasoning_content: _ReasoningDelta | None = None


class _BlockDeltaEvent(Struct, rename="camel"):
    content_block_index: int = 0
    delta: _BlockDelta | None = None


class _MessageStopEvent(Struct, rename="camel"):
    stop_reason: str | None = None


class _MetadataEvent(Struct):
    usage: Usage | None = None


class _ExceptionBody(Struct):
    message: str | None = None


_BLOCK_START = msgspec.json.Decoder(_BlockStartEvent)
_BLOCK_DELTA = msgspec.json.Decoder(_BlockDeltaEvent)
_MESSAGE_STOP = msgspec.json.Decoder(_MessageStopEvent)
_METADATA = msgspec.json.Decoder(_MetadataEvent)
_EXCEPTION = msgspec.json.Decoder(_ExceptionBody)


def _header(message: EventStreamMessage, name: str) -> str | None:
    value = message.headers.get(name)
    return value if isinstance(value, str) else None


def _stream_exception(raw_type: str | None, payload: bytes) -> ApiError:
    """An ``exception`` frame as our error."""
    try:
        message = _EXCEPTION.decode(payload).message
    except msgspec.DecodeError:
        message = None
    error_type = error_type_name(raw_type)
    if error_type not in ERROR_STATUS:
        return UpstreamError(
            message or f"The provider reported {raw_type or 'an error'} mid-stream.",
            code="upstream_stream_error",
        )
    return bedrock_error(error_type, 500, message)


# --- streaming -------------------------------------------------------------------------


class BedrockStreamTranslator(StreamTranslatorBase[EventStreamMessage]):
    """ConverseStream frames in, normalized chunks out."""

    __slots__ = ("_calls", "_decoder", "_skipped", "_stopped")

    def __init__(self, new_id: IdFactory, shape: StreamShape = DEFAULT_SHAPE) -> None:
        super().__init__(new_id, shape)
        self._decoder = EventStreamDecoder(shape.max_event_bytes)
        self._calls: dict[int, int] = {}  # content block index -> tool-call index
        self._skipped: set[int] = set()  # blocks of server-side tools
        self._stopped = False

    def _decode(self, data: bytes) -> Iterator[EventStreamMessage]:
        """Frames pulled one at a time: a bad frame's verdict depends on the ones before."""
        self._decoder.feed(data)
        try:
            while (message := self._decoder.next_message()) is not None:
                yield message
        except EventStreamError:
            if self._stopped:
                self.done = True  # the answer is whole; only the usage is lost
            else:
                self.failure = malformed_event()

    def _flush(self) -> tuple[()]:
        return ()  # a partial frame at the end is dropped; ``check_complete`` judges

    def _event(self, message: EventStreamMessage) -> None:
        kind = _header(message, ":message-type")
        if kind == "event":
            event_type = _header(message, ":event-type") or ""
            handler = _HANDLERS.get(event_type)
            if handler is None or (self._stopped and event_type != "metadata"):
                return  # contentBlockStop, events we have no use for, future ones
            try:
                handler(self, message.payload)
            except msgspec.DecodeError:
                self.failure = malformed_event()
        elif self._stopped:
            return
        elif kind == "exception":
            self.failure = _stream_exception(_header(message, ":exception-type"), message.payload)
        elif kind == "error":
            code = _header(message, ":error-code") or "error"
            detail = _header(message, ":error-message") or "no message"
            self.failure = UpstreamError(
                f"The provider's stream failed ({code}): {detail}", code="upstream_stream_error"
            )
        else:
            self.failure = malformed_event()

    def _message_start(self, payload: bytes) -> None:
        self._emit.start(0)

    def _block_start(self, payload: bytes) -> None:
        event = _BLOCK_START.decode(payload)
        tool = event.start.tool_use if event.start is not None else None
        if tool is None:
            return
        if tool.type == SERVER_TOOL:
            self._skipped.add(event.content_block_index)
            return
        index = self._calls[event.content_block_index] = len(self._calls)
        self._emit.tool_call(0, index, id=tool.tool_use_id, name=tool.name)

    def _block_delta(self, payload: bytes) -> None:
        event = _BLOCK_DELTA.decode(payload)
        delta = event.delta
        if delta is None:
            return
        if delta.text is not None:
            self._emit.text(0, delta.text)
        thought = delta.reasoning_content
        if thought is not None:
            if thought.text is not None:
                self._emit.reasoning(0, thought.text)
            if thought.signature:
                self._emit.signature(0, thought.signature)
            if thought.redacted_content:
                self._emit.redacted(0, thought.redacted_content)
        if delta.tool_use is not None:
            block = event.content_block_index
            index = self._calls.get(block)
            if index is not None:
                self._emit.tool_call(0, index, arguments=delta.tool_use.input)
            elif block not in self._skipped:
                self.failure = malformed_event()  # arguments for a call that never started

    def _message_stop(self, payload: bytes) -> None:
        event = _MESSAGE_STOP.decode(payload)
        self._emit.finish(0, finish_reason(event.stop_reason))
        self._stopped = True

    def _metadata(self, payload: bytes) -> None:
        event = _METADATA.decode(payload)
        if event.usage is not None:
            self.usage = token_usage(event.usage)
        if self._stopped:
            self.done = True


_HANDLERS: MappingProxyType[str, Callable[[BedrockStreamTranslator, bytes], None]] = (
    MappingProxyType(
        {
            "messageStart": BedrockStreamTranslator._message_start,
            "contentBlockStart": BedrockStreamTranslator._block_start,
            "contentBlockDelta": BedrockStreamTranslator._block_delta,
            "messageStop": BedrockStreamTranslator._message_stop,
            "metadata": BedrockStreamTranslator._metadata,
        }
    )
)
