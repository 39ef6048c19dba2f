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
    """``[cache]``: the bounds of the answer store (least recently used answers are
    evicted first): the process's, or with ``[limits] redis_url`` the one every process
    shares in Redis."""

    max_bytes: Annotated[int, msgspec.Meta(ge=0)] = 64 * 1024 * 1024
    """The answers kept, in bytes: by one process, or with ``redis_url`` by all of them
    in Redis (0: none are kept)."""
    max_entry_bytes: Annotated[int, msgspec.Meta(ge=1024)] = 1024 * 1024
    """The largest answer kept; a longer one is served but not stored."""
    max_vector_bytes: Annotated[int, msgspec.Meta(ge=0)] = 16 * 1024 * 1024
    """The semantic cache's vectors one process keeps, at 8 bytes a dimension (least
    recently asked first out)."""
