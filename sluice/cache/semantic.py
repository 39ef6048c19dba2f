"""The semantic cache's pure part (docs/cache.md#semantic-cache): which requests may be
served by meaning, what must be the same for that (:func:`semantic_key`), and the
process's bounded index of the vectors of kept answers' last user turns.

Two requests are alike when everything the exact key covers is the same but the last
user turn, and the cosine similarity of that turn's embeddings reaches the threshold.
The index only points at answers by their exact key: an answer the store no longer
has is skipped, and its vector dropped, when it is found.
"""

from __future__ import annotations

import math
import operator
from array import array
from collections import OrderedDict

import msgspec

from sluice.cache.key import cache_key
from sluice.config import SemanticConfig
from sluice.routing.plan import Plan
from sluice.wire.chat import ChatRequest
from sluice.wire.conversation import TextPart, UserMessage, message_text

PER_KEY = 64
"""Vectors kept for one semantic key (a lookup compares them all); older ones go first."""
_OVERHEAD = 64
"""Bytes counted for a vector beside its floats (its exact key, its norm)."""


class Probe(msgspec.Struct, frozen=True):
    """A request's part in the semantic cache: its semantic key, its last user turn's
    embedding and how long that took, and for a hit the similarity it was served at."""

    key: str
    vector: list[float]
    embedding_ms: float
    similarity: float | None = None


def last_turn(req: ChatRequest, semantic: SemanticConfig) -> str | None:
    """The text the semantic cache compares: the last message's, when it is a user
    turn of text alone; None when the request may not be served by meaning (it ends
    otherwise, carries an image, or offers tools the config does not allow)."""
    if not req.messages or (req.tool_list and not semantic.tools):
        return None
    last = req.messages[-1]
    if not isinstance(last, UserMessage):
        return None
    content = last.content
    if not isinstance(content, str) and not all(isinstance(p, TextPart) for p in content):
        return None
    text = message_text(last)
    return text if text.strip() else None


def semantic_key(req: ChatRequest, plan: Plan, scope: str, semantic: SemanticConfig) -> str:
    """The exact key of ``req`` without its last turn, within ``scope`` and the
    embedding model (another model's vectors are not comparable)."""
    earlier = msgspec.structs.replace(req, messages=req.messages[:-1])
    return cache_key(earlier, plan, f"semantic:{semantic.embedding_model}:{scope}")


def _cosine(a: array[float], b: array[float], norms: float) -> float:
    """The cosine of two vectors whose norms multiply to ``norms``."""
    return sum(map(operator.mul, a, b)) / norms if norms else 0.0


class _Vector(msgspec.Struct):
    answer: str
    """The exact key of the answer it stands for."""
    floats: array[float]
    norm: float


class VectorIndex:
    """The process's vectors by semantic key, within ``max_bytes`` (least recently used
    semantic keys lose their oldest vectors first) and :data:`PER_KEY` per key."""

    __slots__ = ("_by_key", "bytes", "max_bytes")

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._by_key: OrderedDict[str, list[_Vector]] = OrderedDict()

    def __len__(self) -> int:
        return sum(len(v) for v in self._by_key.values())

    def add(self, probe: Probe, answer: str) -> None:
        """``probe``'s vector as standing for the answer kept under ``answer``."""
        floats = array("d", probe.vector)
        size = _size(floats)
        if size > self.max_bytes:
            return
        self.forget(probe.key, answer)
        kept = self._by_key.setdefault(probe.key, [])
        self._by_key.move_to_end(probe.key)
        kept.append(_Vector(answer, floats, math.sqrt(sum(x * x for x in floats))))
        self.bytes += size
        if len(kept) > PER_KEY:
            self._drop(probe.key, 0)
        while self.bytes > self.max_bytes:
            self._drop(next(iter(self._by_key)), 0)

    def nearest(self, probe: Probe, threshold: float) -> list[tuple[float, str]]:
        """The answers whose vectors under ``probe``'s key reach ``threshold``, as
        (similarity, exact key), most similar first."""
        kept = self._by_key.get(probe.key)
        if not kept:
            return []
        self._by_key.move_to_end(probe.key)
        floats = array("d", probe.vector)
        norm = math.sqrt(sum(x * x for x in floats))
        found = [
            (_cosine(floats, v.floats, norm * v.norm), v.answer)
            for v in kept
            if len(v.floats) == len(floats)
        ]
        return sorted((f for f in found if f[0] >= threshold), reverse=True)

    def forget(self, key: str, answer: str) -> None:
        """The vector under ``key`` standing for ``answer`` (that answer is gone)."""
        kept = self._by_key.get(key, [])
        for i, vector in enumerate(kept):
            if vector.answer == answer:
                self._drop(key, i)
                return

    def _drop(self, key: str, index: int) -> None:
        kept = self._by_key[key]
        self.bytes -= _size(kept.pop(index).floats)
        if not kept:
            del self._by_key[key]


def _size(floats: array[float]) -> int:
    return floats.itemsize * len(floats) + _OVERHEAD
