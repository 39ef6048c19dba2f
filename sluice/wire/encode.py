"""Encoding our stream: every chunk carries the stream's identity (the table of
docs/api.md#the-stream).

The identity fields are the same on every chunk of a stream, so they are encoded once
into a prefix; per chunk only the choices are encoded. The bytes are identical to
encoding a whole :class:`ChatCompletionChunk` (a test pins that).
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from sluice.wire.chunks import ChatCompletionChunk, Choice, Usage

_ENCODER = msgspec.json.Encoder()
_EMPTY_CHOICES_TAIL = b"[]}"


class StreamIdentity(msgspec.Struct, frozen=True):
    id: str
    created: int
    model: str
    provider: str
    connection: str
    route: str
    route_name: str | None


class ChunkEncoder:
    """Encodes choice lists of one stream as ready-to-write SSE events."""

    __slots__ = ("_prefix", "identity")

    def __init__(self, identity: StreamIdentity) -> None:
        self.identity = identity
        empty = _ENCODER.encode(self.chunk([]))
        if not empty.endswith(_EMPTY_CHOICES_TAIL):  # pragma: no cover - struct layout guard
            raise AssertionError("choices must be the last always-present chunk field")
        self._prefix = b"data: " + empty[: -len(_EMPTY_CHOICES_TAIL)]

    def chunk(
        self, choices: list[Choice], usage: Usage | None = None, credits_used: float | None = None
    ) -> ChatCompletionChunk:
        out = ChatCompletionChunk(**msgspec.structs.asdict(self.identity), choices=choices)
        if usage is not None:
            out.usage = usage
        if credits_used is not None:
            out.credits_used = credits_used
        return out

    def events(self, batch: Sequence[list[Choice]]) -> bytes:
        """SSE bytes for a batch of chunks (each a list of choices)."""
        prefix = self._prefix
        encode = _ENCODER.encode
        if len(batch) == 1:
            return prefix + encode(batch[0]) + b"}\n\n"
        return b"".join([prefix + encode(choices) + b"}\n\n" for choices in batch])

    def usage_event(self, usage: Usage, credits_used: float | None = None) -> bytes:
        return b"data: " + _ENCODER.encode(self.chunk([], usage, credits_used)) + b"\n\n"
