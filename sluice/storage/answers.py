"""The port through which the response cache keeps its answers (docs/cache.md#the-store),
encoded (the cache encodes and decodes them; a backend keeps bytes by key), and its
in-memory implementation: :class:`MemoryAnswers`, one process's. The composition root
chooses :class:`~.redis_answers.RedisAnswers`, shared by every worker and replica, when
``[limits] redis_url`` is set, else :class:`~.sqlite.answers.SqliteAnswers`, shared by
the workers of one machine, when ``[cache] store`` resolves to ``sqlite``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol

import msgspec


class KeptAnswers(Protocol):
    """Encoded answers by key, within ``max_bytes`` (least recently used out first),
    each for its time to live. A lookup the backend cannot make is a miss; a put never
    waits (nor raises) on the response path."""

    @property
    def max_bytes(self) -> int: ...

    @property
    def kind(self) -> str:
        """Where the answers are: ``memory`` (this process's), ``sqlite`` (one machine's
        workers') or ``redis`` (every worker's and replica's)."""
        ...

    @property
    def reachable(self) -> bool:
        """A lookup's None now means the answer is not kept (not that the backend could
        not be asked)."""
        ...

    async def get(self, key: str) -> bytes | None: ...

    def put(self, key: str, encoded: bytes, ttl: float) -> None:
        """Keep ``encoded`` for ``ttl`` seconds (replacing what ``key`` held), now or
        off the response path."""
        ...

    @property
    def entries(self) -> int:
        """Answers kept (as last seen, for a shared backend)."""
        ...

    @property
    def kept_bytes(self) -> int:
        """Their bytes, counted against ``max_bytes`` (as last seen)."""
        ...

    @property
    def evictions(self) -> int:
        """Answers this process dropped to make room (not those that expired)."""
        ...


class _Kept(msgspec.Struct):
    encoded: bytes
    expires: float


class MemoryAnswers:
    """One process's answers, in memory; ``clock`` in seconds."""

    __slots__ = ("_by_key", "_clock", "evictions", "kept_bytes", "max_bytes")

    def __init__(self, max_bytes: int, clock: Callable[[], float]) -> None:
        self.max_bytes = max_bytes
        self._clock = clock
        self._by_key: OrderedDict[str, _Kept] = OrderedDict()
        self.kept_bytes = 0
        self.evictions = 0

    @property
    def kind(self) -> str:
        return "memory"

    @property
    def reachable(self) -> bool:
        return True

    @property
    def entries(self) -> int:
        return len(self._by_key)

    async def get(self, key: str) -> bytes | None:
        kept = self._by_key.get(key)
        if kept is None:
            return None
        if kept.expires <= self._clock():
            self._drop(key)
            return None
        self._by_key.move_to_end(key)
        return kept.encoded

    def put(self, key: str, encoded: bytes, ttl: float) -> None:
        """Kept at once (an answer larger than the store is not)."""
        size = len(encoded)
        if size > self.max_bytes:
            return
        if key in self._by_key:
            self._drop(key)
        while self.kept_bytes + size > self.max_bytes:
            self._drop(next(iter(self._by_key)))
            self.evictions += 1
        self._by_key[key] = _Kept(encoded, self._clock() + ttl)
        self.kept_bytes += size

    def _drop(self, key: str) -> None:
        self.kept_bytes -= len(self._by_key.pop(key).encoded)
