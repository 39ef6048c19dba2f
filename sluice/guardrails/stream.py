"""Output guardrails over one response (pure): chunks in, checked chunks out.

Each text channel gets its own hold-back window (:class:`~sluice.guardrails.window.
Channel`): per choice its ``content``, ``reasoning_content`` and ``refusal``, and the
``arguments`` of each tool call. What carries no text (the role chunk, a tool call's
first fragment with its id and name) passes at once, in order. Before a choice's
finish chunk every channel of that choice is checked to its end and released, so the
finish chunk comes last. Within a channel the order is kept; a held tail may come out
after chunks of another channel of the same choice. ``logprobs`` are dropped, on a
stream and on a whole answer alike: their tokens would spell out the text a rule
holds back, redacts or blocks.

On a ``block`` the guard stops: :attr:`StreamGuard.failure` holds the
:class:`~sluice.errors.GuardrailBlockedError`, what it returned before stays released.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
from msgspec import UNSET

from sluice.core.batch import ChunkBatch
from sluice.errors import GuardrailBlockedError
from sluice.guardrails.rule import Note, Rule, SpanRule, WholeRule, note_match
from sluice.guardrails.window import Channel
from sluice.wire.chunks import (
    Choice,
    CompletionChoice,
    Delta,
    FunctionDelta,
    ResponseFunctionCall,
    ToolCallDelta,
    tool_calls_of,
)

CONTENT, REASONING, REFUSAL, ARGUMENTS = range(4)
ChannelKey = tuple[int, int, int]
"""(choice index, field, tool-call index)."""
TEXT_FIELDS = (("content", CONTENT), ("reasoning_content", REASONING), ("refusal", REFUSAL))
"""The plain text channels of a choice: (attribute of its delta or message, field)."""


def _delta(field: int, call: int, text: str) -> Delta:
    if field == CONTENT:
        return Delta(content=text)
    if field == REASONING:
        return Delta(reasoning_content=text)
    if field == REFUSAL:
        return Delta(refusal=text)
    return Delta(tool_calls=[ToolCallDelta(call, function=FunctionDelta(arguments=text))])


def channel_texts(choice: Choice) -> list[tuple[ChannelKey, str]]:
    """The pieces of text a chunk's choice carries, by channel."""
    delta, index = choice.delta, choice.index
    found = [
        ((index, field, 0), text)
        for name, field in TEXT_FIELDS
        if isinstance(text := getattr(delta, name), str) and text
    ]
    for call in tool_calls_of(delta):
        fn = call.function
        if isinstance(fn, FunctionDelta) and isinstance(fn.arguments, str) and fn.arguments:
            found.append(((index, ARGUMENTS, call.index), fn.arguments))
    return found


class StreamGuard:
    __slots__ = ("_channels", "_hits", "_spans", "_wholes", "failure", "notes")

    def __init__(
        self, spans: Sequence[SpanRule], wholes: Sequence[WholeRule], notes: list[Note]
    ) -> None:
        """``wholes`` judge each choice's whole content; ``notes`` collects what matched."""
        self._spans, self._wholes, self.notes = spans, wholes, notes
        self._channels: dict[ChannelKey, Channel] = {}
        self._hits: list[Rule] = []
        self.failure: GuardrailBlockedError | None = None

    def filter(self, batch: ChunkBatch) -> ChunkBatch:
        out: ChunkBatch = []
        if self.failure is None:
            for choices in batch:
                for choice in choices:
                    self._choice(choice, out)
                    if self.failure is not None:
                        return out
        return out

    def finish(self) -> ChunkBatch:
        """Check and release what every channel still holds (the stream ended)."""
        out: ChunkBatch = []
        for key in list(self._channels):
            if self.failure is None:
                self._end(key, out)
        return out

    def completion(self, choices: list[CompletionChoice]) -> list[CompletionChoice]:
        """A whole (non-streamed) answer: each text checked at once."""
        return [self._checked(choice) for choice in choices]

    # -- internals -------------------------------------------------------------------

    def _choice(self, choice: Choice, out: ChunkBatch) -> None:
        index, delta = choice.index, choice.delta
        if choice.logprobs is not UNSET:
            choice = msgspec.structs.replace(choice, logprobs=UNSET)
        if not channel_texts(choice):
            if choice.finish_reason is not None:
                for key in [k for k in self._channels if k[0] == index]:
                    self._end(key, out)
                    if self.failure is not None:
                        return
            out.append([choice])
            return
        if delta.role is not UNSET:
            out.append([Choice(index, Delta(role=delta.role, content=""), None)])
        for name, field in TEXT_FIELDS:
            text = getattr(delta, name)
            if isinstance(text, str) and text:
                self._feed((index, field, 0), text, out)
        for call in tool_calls_of(delta):
            fn = call.function if isinstance(call.function, FunctionDelta) else FunctionDelta()
            if call.id is not UNSET or call.type is not UNSET or fn.name is not UNSET:
                head = ToolCallDelta(call.index, call.id, call.type, FunctionDelta(fn.name, ""))
                out.append([Choice(index, Delta(tool_calls=[head]), None)])
            if isinstance(fn.arguments, str) and fn.arguments:
                self._feed((index, ARGUMENTS, call.index), fn.arguments, out)
        if choice.finish_reason is not None:
            self._choice(Choice(index, Delta(), choice.finish_reason), out)

    def _feed(self, key: ChannelKey, text: str, out: ChunkBatch) -> None:
        if self.failure is not None:
            return
        channel = self._channels.get(key)
        if channel is None:
            channel = self._channels[key] = self._channel(key)
        self._emit(key, channel.feed(text, False, self._hits), out)

    def _channel(self, key: ChannelKey) -> Channel:
        """A new window; the whole-text rules judge only the content."""
        return Channel(self._spans, self._wholes if key[1] == CONTENT else ())

    def _end(self, key: ChannelKey, out: ChunkBatch) -> None:
        self._emit(key, self._channels.pop(key).feed("", True, self._hits), out)

    def _emit(self, key: ChannelKey, released: str, out: ChunkBatch) -> None:
        if released:
            out.append([Choice(key[0], _delta(key[1], key[2], released), None)])
        if self._hits:
            self._take_hits()

    def _checked(self, choice: CompletionChoice) -> CompletionChoice:
        msg, i = choice.message, choice.index
        fields: dict[str, object] = {}
        for name, field in TEXT_FIELDS:
            text = getattr(msg, name)
            if isinstance(text, str):
                fields[name] = self._whole((i, field, 0), text)
        if isinstance(msg.tool_calls, list):
            fields["tool_calls"] = [
                msgspec.structs.replace(
                    call,
                    function=ResponseFunctionCall(
                        call.function.name,
                        self._whole((i, ARGUMENTS, n), call.function.arguments),
                    ),
                )
                for n, call in enumerate(msg.tool_calls)
            ]
        message = msgspec.structs.replace(msg, **fields)
        return msgspec.structs.replace(choice, message=message, logprobs=UNSET)

    def _whole(self, key: ChannelKey, text: str) -> str:
        if self.failure is not None:
            return text
        checked = self._channel(key).feed(text, True, self._hits)
        self._take_hits()
        return checked

    def _take_hits(self) -> None:
        for rule in self._hits:
            failure = note_match(self.notes, rule, "output")
            if failure is not None:
                self.failure = failure
        self._hits.clear()
