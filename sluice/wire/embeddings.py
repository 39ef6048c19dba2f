"""``POST /v1/embeddings``: the OpenAI embeddings wire (docs/embeddings.md).

``input`` is one string, a list of strings, one token array or a list of token arrays
(checked whole by the door, :mod:`sluice.frontdoors.embeddings`). The answer's vectors
are floats or, with ``encoding_format: "base64"``, little-endian float32 bytes in
base64, as OpenAI sends them.
"""

from __future__ import annotations

import base64
import struct
from typing import Annotated, Literal

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from sluice.wire.chat import ModelName

Opt = UnsetType
TokenId = Annotated[int, Meta(ge=0, le=2**31 - 1)]


class EmbeddingRequest(Struct, kw_only=True, omit_defaults=True):
    model: ModelName
    input: str | list[str | TokenId | list[TokenId]]
    encoding_format: Literal["float", "base64"] | Opt | None = UNSET
    dimensions: Annotated[int, Meta(ge=1, le=65_536)] | Opt | None = UNSET
    user: str | Opt | None = UNSET
    # Sluice extension: fallback models, tried after ``model`` (as on chat).
    models: Annotated[list[ModelName], Meta(max_length=16)] | Opt | None = UNSET

    @property
    def as_base64(self) -> bool:
        return self.encoding_format == "base64"


class EmbeddingUsage(Struct, kw_only=True):
    prompt_tokens: int
    total_tokens: int
    cost: float | None = None
    price_source: str | None = None


class Embedding(Struct, kw_only=True):
    object: Literal["embedding"] = "embedding"
    index: int
    embedding: list[float] | str


class EmbeddingList(Struct, kw_only=True):
    object: Literal["list"] = "list"
    data: list[Embedding]
    model: str
    usage: EmbeddingUsage
    credits_used: float | UnsetType = UNSET


def vector_base64(vector: list[float]) -> str:
    """A vector as OpenAI's base64: little-endian float32s."""
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")


_ENCODER = msgspec.json.Encoder()


def embedding_body(
    vectors: list[list[float]],
    model: str,
    usage: EmbeddingUsage,
    *,
    as_base64: bool,
    credits_used: float | None,
) -> bytes:
    data = [
        Embedding(index=i, embedding=vector_base64(v) if as_base64 else v)
        for i, v in enumerate(vectors)
    ]
    answer = EmbeddingList(data=data, model=model, usage=usage)
    if credits_used is not None:
        answer.credits_used = credits_used
    return _ENCODER.encode(answer)
