"""The response cache's configuration (docs/cache.md): a model's ``cache`` table, and
``[cache]`` for the store's bounds."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec


class SemanticConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A cache's ``semantic`` table: a request whose last user turn is close enough to a
    kept one's is served its answer (docs/cache.md#semantic-cache)."""

    embedding_model: str
    """The catalog id of the model that embeds the last user turns (it must declare
    ``embeddings = true`` and be served by one of the operator's connections)."""
    threshold: Annotated[float, msgspec.Meta(gt=0, le=1)] = 0.95
    """The least cosine similarity of two last user turns that is a hit."""
    tools: bool = False
    """Serve requests that offer tools too (their answers may call them)."""


class CacheConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A model's ``cache``: its complete streamed answers are kept and served again to
    the same request (docs/cache.md#what-is-the-same-request)."""

    ttl: Annotated[int, msgspec.Meta(ge=1, le=30 * 86400)] = 600
    """Seconds an answer is served from the cache after it was stored."""
    scope: Literal["account", "global"] = "account"
    """``account``: each account hits only its own answers; ``global``: every account
    shares them (for traffic that is not personal)."""
    replay: Literal["instant", "paced"] = "instant"
    """A hit streams at once, or at the pace the answer first came."""
    price_share: Annotated[float, msgspec.Meta(ge=0, le=1)] = 0.0
    """The share of the model's price a hit is charged (0: free)."""
    semantic: SemanticConfig | None = None
    """Hits by meaning as well: ``{ embedding_model = "...", threshold = 0.95 }``;
    None: only the same request hits."""


class CacheStoreConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``[cache]``: where the answers are kept and their bounds (least recently used
    answers are evicted first), read at start (docs/cache.md#the-store). With
    ``[limits] redis_url`` they are in Redis, which every process shares, whatever
    ``store`` says."""

    store: Literal["auto", "memory", "sqlite"] = "auto"
    """Without Redis: ``memory``, each process's own; ``sqlite``, a file the workers of
    this machine share; ``auto``, ``sqlite`` when ``[server] workers`` (or ``--workers``)
    is more than 1 and the storage is SQLite, else ``memory``."""
    path: str | None = None
    """The ``sqlite`` store's file; None: beside the SQLite database (``sluice.db``:
    ``sluice-cache.db``), or in the home with other storage."""
    max_bytes: Annotated[int, msgspec.Meta(ge=0)] = 64 * 1024 * 1024
    """The answers kept, in bytes: by one process in memory, or by all of them in the
    ``sqlite`` file or in Redis (0: none are kept)."""
    max_entry_bytes: Annotated[int, msgspec.Meta(ge=1024)] = 1024 * 1024
    """The largest answer kept; a longer one is served but not stored."""
    max_vector_bytes: Annotated[int, msgspec.Meta(ge=0)] = 16 * 1024 * 1024
    """The semantic cache's vectors one process keeps, at 8 bytes a dimension (least
    recently asked first out)."""
