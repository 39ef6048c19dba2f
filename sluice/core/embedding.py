"""One embeddings request and its answer, provider-neutral (docs/embeddings.md).

The inputs are texts or token arrays, never both; an adapter that can embed
(:class:`~sluice.providers.base.EmbedsText`) splits them into its provider's batches,
and each batch's answer comes back as :class:`Embedded`, joined in input order.
"""

from __future__ import annotations

import msgspec


class EmbedCall(msgspec.Struct, frozen=True, kw_only=True):
    texts: tuple[str, ...] = ()
    """The inputs as text (empty when they are token arrays)."""
    tokens: tuple[tuple[int, ...], ...] = ()
    """The inputs as token arrays (empty when they are text)."""
    dimensions: int | None = None
    """The vector length asked for (models that can shorten their vectors)."""
    user: str | None = None

    @property
    def count(self) -> int:
        return len(self.texts) or len(self.tokens)


class Embedded(msgspec.Struct):
    """Vectors in input order; the provider's count of the input tokens, if it gave
    one (else the gateway estimates it)."""

    vectors: list[list[float]]
    prompt_tokens: int | None
