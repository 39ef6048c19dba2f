"""Anthropic's SSE stream → our chunks (one choice, index 0).

Events are dispatched on their JSON ``type`` (Anthropic also names them with
``event:``): ``message_start`` opens the choice and reports input usage; text and
thinking deltas become ``content`` and ``reasoning_content``; each ``tool_use`` block
becomes a tool call numbered by the order of tool_use blocks (0, 1, …), not by its
content-block index, with its ``input_json_delta`` pieces as ``arguments``; a call
that streamed no arguments gets its start ``input`` (``{}``) so every call's
arguments parse. ``message_delta`` carries the stop reason and cumulative usage; the
finish chunk is sent on ``message_stop``, so a stream cut before it never shows one and
``finish`` raises. A thinking block's ``signature_delta`` becomes
``reasoning_signature`` and a ``redacted_thinking`` block ``redacted_reasoning``, so a
later turn can send them back; the stop sequence that ended the answer rides on the
finish chunk. Citations, server-tool blocks and ``ping`` show nothing. An ``error``
event sets ``failure``; nothing more is produced.
"""

from __future__ import annotations

import msgspec

from sluice.ids import IdFactory
from sluice.providers.anthropic.upstream import (
    STREAM_EVENT,
    ContentBlock,
    Delta,
    StreamEvent,
    UsageCounter,
    anthropic_stop_to_finish_reason,
    anthropic_stream_error,
    error_detail,
    tool_input_json,
)
from sluice.providers.base import DEFAULT_SHAPE, StreamShape
from sluice.providers.sse_stream import SSEStreamTranslator
from sluice.providers.stream_base import malformed_event
from sluice.wire.sse import ServerSentEvent


class _ToolBlock:
    """An open ``tool_use`` block: its call index and whether arguments were sent."""

    __slots__ = ("block", "call", "sent")

    def __init__(self, call: int, block: ContentBlock) -> None:
        self.call = call
        self.block = block
        self.sent = False


class AnthropicStreamTranslator(SSEStreamTranslator):
    """Anthropic Messages stream events in, normalized chunks out."""

    def __init__(self, new_id: IdFactory, shape: StreamShape = DEFAULT_SHAPE) -> None:
        super().__init__(new_id, shape)
        self._tools: dict[int, _ToolBlock] = {}  # content-block index -> its tool call
        self._calls = 0
        self._counter = UsageCounter()
        self._stop_reason: str | None = None
        self._stop_sequence: str | None = None

    def _event(self, sse: ServerSentEvent) -> None:
        if sse.event == "error":
            self.failure = anthropic_stream_error(error_detail(sse.data))
            return
        try:
            event = STREAM_EVENT.decode(sse.data)
        except msgspec.DecodeError:
            self.failure = malformed_event()
            return
        if event.type == "error":
            self.failure = anthropic_stream_error(event.error)
            return
        self._dispatch(event)

    def _dispatch(self, event: StreamEvent) -> None:
        match event.type:
            case "content_block_delta" if event.delta is not None:
                self._delta(event.index, event.delta)
            case "content_block_start" if event.content_block is not None:
                self._block_start(event.index, event.content_block)
            case "content_block_stop":
                self._block_stop(event.index)
            case "message_start":
                self._emit.start(0)
                if event.message is not None and event.message.usage is not None:
                    self.usage = self._counter.update(event.message.usage)
            case "message_delta":
                if event.delta is not None and event.delta.stop_reason is not None:
                    self._stop_reason = event.delta.stop_reason
                    self._stop_sequence = event.delta.stop_sequence
                if event.usage is not None:
                    self.usage = self._counter.update(event.usage)
            case "message_stop":
                reason = anthropic_stop_to_finish_reason(self._stop_reason)
                self._emit.finish(0, reason, self._stop_sequence)
                self.done = True

    def _block_start(self, index: int, block: ContentBlock) -> None:
        if block.type == "text":
            self._emit.text(0, block.text or "")
        elif block.type == "thinking":
            self._emit.reasoning(0, block.thinking or "")
            if block.signature:
                self._emit.signature(0, block.signature)
        elif block.type == "redacted_thinking" and block.data:
            self._emit.redacted(0, block.data)
        elif block.type == "tool_use":
            tool = self._tools[index] = _ToolBlock(self._calls, block)
            self._calls += 1
            self._emit.tool_call(0, tool.call, id=block.id, name=block.name or "")

    def _delta(self, index: int, delta: Delta) -> None:
        if delta.type == "text_delta":
            self._emit.text(0, delta.text or "")
        elif delta.type == "thinking_delta":
            self._emit.reasoning(0, delta.thinking or "")
        elif delta.type == "signature_delta" and delta.signature:
            self._emit.signature(0, delta.signature)
        elif delta.type == "input_json_delta" and delta.partial_json:
            tool = self._tools.get(index)
            if tool is not None:
                tool.sent = True
                self._emit.tool_call(0, tool.call, arguments=delta.partial_json)

    def _block_stop(self, index: int) -> None:
        tool = self._tools.pop(index, None)
        if tool is not None and not tool.sent:
            self._emit.tool_call(0, tool.call, arguments=tool_input_json(tool.block))
