"""What is kept of an answer, and the store of them: least recently used answers go
first once ``max_bytes`` is reached, each after its time to live. Answers are kept
encoded (JSON), by a :class:`~sluice.storage.answers.KeptAnswers` backend, so
``max_bytes`` bounds the memory they take (in one process's memory, the heap is about
1.5x it for 2 KB answers: bench/README.md, "Issue 26, first part"); a hit decodes its
answer."""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from sluice.core.batch import ChunkBatch
from sluice.core.usage import TokenUsage
from sluice.providers.normalize import EmittedCall
from sluice.storage.answers import KeptAnswers, MemoryAnswers


class CachedAnswer(msgspec.Struct, frozen=True, kw_only=True):
    """A complete streamed answer, as its translator produced it."""

    filled_by: str
    """The request whose answer it is."""
    account_id: str
    """That request's account (only it is shown ``filled_by``)."""
    served_as: list[str]
    """The connection and model it came from as then configured: id, provider, base
    URL, model id, the model's name there."""
    tokens: TokenUsage
    finish_reason: str | None
    tool_calls: list[EmittedCall]
    batches: list[ChunkBatch]
    offsets: list[float]
    """Seconds after the first batch at which each batch came (paced replay)."""


_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder(CachedAnswer)


class AnswerStore:
    """The cache's answers by key, encoded, in ``kept`` (one process's memory, or a
    store every process shares); none larger than ``max_entry_bytes``."""

    __slots__ = ("kept", "max_entry_bytes")

    def __init__(self, kept: KeptAnswers, max_entry_bytes: int) -> None:
        self.kept = kept
        self.max_entry_bytes = max_entry_bytes

    @classmethod
    def in_memory(
        cls, max_bytes: int, max_entry_bytes: int, clock: Callable[[], float]
    ) -> AnswerStore:
        """The embedded default: one process's answers."""
        return cls(MemoryAnswers(max_bytes, clock), max_entry_bytes)

    @property
    def max_bytes(self) -> int:
        return self.kept.max_bytes

    @property
    def kind(self) -> str:
        """``memory``, ``sqlite`` or ``redis``: the backend that keeps the answers."""
        return self.kept.kind

    @property
    def reachable(self) -> bool:
        """A lookup's None now means the answer is gone (the backend answered)."""
        return self.kept.reachable

    async def get(self, key: str) -> CachedAnswer | None:
        """The answer under ``key``; None when there is none (or what is kept is not
        one: written by another version)."""
        encoded = await self.kept.get(key)
        if encoded is None:
            return None
        try:
            return _DECODER.decode(encoded)
        except msgspec.DecodeError:
            return None

    def put(self, key: str, answer: CachedAnswer, ttl: float) -> bool:
        """Keep ``answer`` for ``ttl`` seconds (replacing one under ``key``), off the
        response path for a shared store; False when it is larger than an entry or the
        store may be."""
        encoded = _ENCODER.encode(answer)
        if len(encoded) > min(self.max_entry_bytes, self.max_bytes):
            return False
        self.kept.put(key, encoded, ttl)
        return True
