"""Bedrock embeddings through InvokeModel: ``POST {base}/model/{model}/invoke``, the body
in the model family's own format (Bedrock has no common embeddings API).

- Amazon Titan Text Embeddings (``amazon.titan-embed-*``): one text per call,
  ``{"inputText", "dimensions"?, "normalize": true}`` for v2 (256, 512 or 1024
  dimensions), ``{"inputText"}`` for the others (no choice of length); the answer is
  ``{"embedding": [...], "inputTextTokenCount": n}``.
- Cohere Embed (``cohere.embed-*``): up to 96 texts per call, ``{"texts",
  "input_type": "search_document", "embedding_types": ["float"]}``, and for v4
  ``output_dimension`` (256, 512, 1024 or 1536; v3 has no choice); the answer's
  ``embeddings`` is a list of vectors or, by type, ``{"float": [...]}``.

The token count is the body's (Titan) or the ``X-Amzn-Bedrock-Input-Token-Count``
header InvokeModel answers with. Token arrays, and any other model, are refused.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec
from msgspec import UNSET, Struct, UnsetType

from sluice.core.connection import Target
from sluice.core.embedding import EmbedCall, Embedded
from sluice.core.usage import reported_count
from sluice.errors import InvalidRequestError
from sluice.providers.base import EmbedBatch, EmbedsText
from sluice.providers.bedrock.endpoint import model_request
from sluice.providers.embedding_parts import (
    checked_vectors,
    dimensions_refused,
    header_count,
    spans,
    token_input_refused,
)
from sluice.providers.errors import malformed_response

TOKEN_COUNT_HEADER = "x-amzn-bedrock-input-token-count"
COHERE_MAX_TEXTS = 96
TITAN_V2_DIMENSIONS = frozenset({256, 512, 1024})
COHERE_V4_DIMENSIONS = frozenset({256, 512, 1024, 1536})


class TitanBody(Struct, rename="camel"):
    input_text: str
    dimensions: int | UnsetType = UNSET
    normalize: bool | UnsetType = UNSET


class CohereBody(Struct):
    texts: list[str]
    input_type: str = "search_document"
    embedding_types: list[str] = msgspec.field(default_factory=lambda: ["float"])
    output_dimension: int | UnsetType = UNSET


class _ByType(Struct):
    floats: list[list[float]] | None = msgspec.field(default=None, name="float")


class _InvokeAnswer(Struct):
    embedding: list[float] | None = None
    input_text_token_count: int | None = msgspec.field(default=None, name="inputTextTokenCount")
    embeddings: list[list[float]] | _ByType | None = None


_ENCODER = msgspec.json.Encoder()
_ANSWER = msgspec.json.Decoder(_InvokeAnswer)


def _json_headers() -> dict[str, str]:
    return {"content-type": "application/json", "accept": "application/json"}


def _sizes(allowed: frozenset[int]) -> str:
    numbers = [str(n) for n in sorted(allowed)]
    return ", ".join(numbers[:-1]) + " or " + numbers[-1]


def titan_bodies(call: EmbedCall, native_model: str) -> list[bytes]:
    """One body per text."""
    if "amazon.titan-embed-text-v2" not in native_model.lower():
        if call.dimensions is not None:
            raise dimensions_refused(native_model, "no choice")
        return [_ENCODER.encode(TitanBody(text)) for text in call.texts]
    if call.dimensions is not None and call.dimensions not in TITAN_V2_DIMENSIONS:
        raise dimensions_refused(native_model, _sizes(TITAN_V2_DIMENSIONS))
    size: int | UnsetType = UNSET if call.dimensions is None else call.dimensions
    return [_ENCODER.encode(TitanBody(text, size, normalize=True)) for text in call.texts]


def cohere_bodies(call: EmbedCall, native_model: str) -> list[tuple[int, int, bytes]]:
    """``(start, count, body)`` per batch of at most 96 texts."""
    size: int | UnsetType = UNSET
    if call.dimensions is not None:
        if "cohere.embed-v4" not in native_model.lower():
            raise dimensions_refused(native_model, "no choice")
        if call.dimensions not in COHERE_V4_DIMENSIONS:
            raise dimensions_refused(native_model, _sizes(COHERE_V4_DIMENSIONS))
        size = call.dimensions
    return [
        (start, n, _cohere_body(call.texts[start : start + n], size))
        for start, n in spans(call.count, COHERE_MAX_TEXTS)
    ]


def _cohere_body(texts: tuple[str, ...], size: int | UnsetType) -> bytes:
    return _ENCODER.encode(CohereBody(list(texts), output_dimension=size))


def parse_invoke_embeddings(headers: Mapping[str, str], body: bytes, count: int) -> Embedded:
    """A Titan or Cohere answer holding ``count`` vectors."""
    try:
        answer = _ANSWER.decode(body)
    except msgspec.DecodeError:
        raise malformed_response() from None
    found = answer.embeddings
    if isinstance(found, _ByType):
        found = found.floats
    if found is None and answer.embedding is not None:
        found = [answer.embedding]
    if found is None:
        raise malformed_response()
    vectors = checked_vectors(found, count)
    tokens = header_count(headers, TOKEN_COUNT_HEADER)
    if answer.input_text_token_count is not None:
        tokens = reported_count(answer.input_text_token_count)
    return Embedded(vectors, tokens)


class BedrockEmbeddings(EmbedsText):
    """The embeddings ability of the Bedrock adapter (mixed into it). Titan's one
    text per call makes for many calls: eight at once."""

    embed_concurrency = 8

    def embed_batches(self, call: EmbedCall, target: Target) -> list[EmbedBatch]:
        if call.tokens:
            raise token_input_refused("Bedrock")
        native = target.native_model
        if "amazon.titan-embed" in native.lower():
            return [
                EmbedBatch(model_request(target, "invoke", _json_headers(), body), start, 1)
                for start, body in enumerate(titan_bodies(call, native))
            ]
        if "cohere.embed" in native.lower():
            return [
                EmbedBatch(model_request(target, "invoke", _json_headers(), body), start, n)
                for start, n, body in cohere_bodies(call, native)
            ]
        raise InvalidRequestError(
            f"The model {native!r} cannot embed through this gateway: Bedrock embeddings "
            "take Amazon Titan Text Embeddings or Cohere Embed models.",
            code="embedding_model_unsupported",
            param="model",
        )

    def parse_embeddings(
        self, headers: Mapping[str, str], body: bytes, batch: EmbedBatch
    ) -> Embedded:
        return parse_invoke_embeddings(headers, body, batch.count)
