"""OpenAI chat-completion chunks in, normalized chunks out.

The upstream stream is parsed and re-emitted through the translator's chunk emitter,
never forwarded as bytes. Handled here: a tool call without ``index`` (one call per
distinct ``id``), a final delta that carries content and ``finish_reason`` together, an
``error`` object in place of a chunk.
"""

from __future__ import annotations

import msgspec
from msgspec import UNSET

from sluice.errors import UpstreamError
from sluice.ids import IdFactory
from sluice.providers.base import DEFAULT_SHAPE, StreamShape
from sluice.providers.openai_upstream import (
    STREAM_CHUNK,
    ErrorDetail,
    StreamDelta,
    StreamToolCall,
    openai_token_usage,
    raw_unless_null,
)
from sluice.providers.sse_stream import SSEStreamTranslator
from sluice.providers.stream_base import malformed_event
from sluice.wire.chunks import Delta, FunctionDelta, ToolCallDelta
from sluice.wire.sse import ServerSentEvent


def _error_text(detail: ErrorDetail | str) -> tuple[str, str | None]:
    if isinstance(detail, str):
        return detail, None
    code = None if detail.code is None else str(detail.code)
    return detail.message or "The provider reported an error.", code


class OpenAIStreamTranslator(SSEStreamTranslator):
    """OpenAI chat-completion chunks in, normalized chunks out."""

    def __init__(self, new_id: IdFactory, shape: StreamShape = DEFAULT_SHAPE) -> None:
        super().__init__(new_id, shape)
        self._ids: dict[int, list[str]] = {}

    def _event(self, event: ServerSentEvent) -> None:
        if event.is_done:
            self.done = True
            return
        try:
            chunk = STREAM_CHUNK.decode(event.data)
        except msgspec.DecodeError:
            self.failure = malformed_event()
            return
        if chunk.error is not None or event.event == "error":
            message, code = _error_text(chunk.error or "The provider reported an error.")
            self.failure = UpstreamError(message, code=code or "upstream_stream_error")
            return
        for choice in chunk.choices or ():
            up = choice.delta
            delta = self._delta(choice.index, up) if up is not None else Delta()
            self._emit.delta(
                choice.index,
                delta,
                choice.finish_reason,
                raw_unless_null(choice.logprobs),
            )
        if chunk.usage is not None:
            self.usage = openai_token_usage(chunk.usage)

    def _delta(self, index: int, up: StreamDelta) -> Delta:
        delta = Delta()
        if up.content is not None:
            delta.content = up.content
        reasoning = up.reasoning_content if up.reasoning_content is not None else up.reasoning
        if reasoning is not None:
            delta.reasoning_content = reasoning
        if up.refusal is not None:
            delta.refusal = up.refusal
        if up.tool_calls:
            delta.tool_calls = [self._tool_call(index, call) for call in up.tool_calls]
        return delta

    def _tool_call(self, index: int, call: StreamToolCall) -> ToolCallDelta:
        position = call.index
        if position is None:  # servers that omit the index: one call per distinct id
            ids = self._ids.setdefault(index, [])
            if call.id is not None and call.id not in ids:
                ids.append(call.id)
            elif not ids:
                ids.append("")
            position = ids.index(call.id) if call.id is not None else len(ids) - 1
        fn = call.function
        return ToolCallDelta(
            position,
            id=call.id if call.id else UNSET,
            function=FunctionDelta(
                name=fn.name if fn is not None and fn.name is not None else UNSET,
                arguments=fn.arguments if fn is not None and fn.arguments else UNSET,
            ),
        )
