"""What is kept of an answer, and the process's bounded store of them: least recently
used answers go first once ``max_bytes`` is reached, each after its time to live.
Answers are kept encoded (JSON), so ``max_bytes`` bounds the memory they take (the heap
is about 1.5x it for 2 KB answers: bench/README.md, "Issue 26, first part"); a hit
decodes its answer."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

import msgspec

from sluice.core.batch import ChunkBatch
from sluice.core.usage import TokenUsage
from sluice.providers.normalize import EmittedCall


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


class _Kept(msgspec.Struct):
    encoded: bytes
    expires: float


_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder(CachedAnswer)


class AnswerStore:
    """One process's answers by key, within ``max_bytes``; ``clock`` in seconds."""

    __slots__ = ("_by_key", "_clock", "bytes", "evictions", "max_bytes", "max_entry_bytes")

    def __init__(self, max_bytes: int, max_entry_bytes: int, clock: Callable[[], float]) -> None:
        self.max_bytes = max_bytes
        self.max_entry_bytes = max_entry_bytes
        self._clock = clock
        self._by_key: OrderedDict[str, _Kept] = OrderedDict()
        self.bytes = 0
        self.evictions = 0
        """Answers dropped to make room (not those that expired)."""

    def __len__(self) -> int:
        return len(self._by_key)

    def get(self, key: str) -> CachedAnswer | None:
        kept = self._by_key.get(key)
        if kept is None:
            return None
        if kept.expires <= self._clock():
            self._drop(key)
            return None
        self._by_key.move_to_end(key)
        return _DECODER.decode(kept.encoded)

    def put(self, key: str, answer: CachedAnswer, ttl: float) -> bool:
        """Keep ``answer`` for ``ttl`` seconds (replacing one under ``key``); False when
        it is larger than an entry or the store may be."""
        encoded = _ENCODER.encode(answer)
        size = len(encoded)
        if size > min(self.max_entry_bytes, self.max_bytes):
            return False
        if key in self._by_key:
            self._drop(key)
        while self.bytes + size > self.max_bytes:
            self._drop(next(iter(self._by_key)))
            self.evictions += 1
        self._by_key[key] = _Kept(encoded, self._clock() + ttl)
        self.bytes += size
        return True

    def _drop(self, key: str) -> None:
        self.bytes -= len(self._by_key.pop(key).encoded)
