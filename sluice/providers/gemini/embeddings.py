"""Gemini embeddings: ``POST {base}/v1beta/{model}:batchEmbedContents``.

Up to 100 requests per call, one text each, each naming the model and, when asked,
its ``outputDimensionality``; the answer's ``embeddings`` come in request order. The
Gemini API gives no token count for them (a ``usageMetadata.promptTokenCount``, where
an answer has one, is read), so the gateway estimates. Token arrays are refused: the
API takes text.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec
from msgspec import UNSET, Struct, UnsetType

from sluice.core.connection import Target
from sluice.core.embedding import EmbedCall, Embedded
from sluice.core.usage import reported_count
from sluice.providers.base import EmbedBatch, EmbedsText
from sluice.providers.embedding_parts import (
    checked_vectors,
    posted_batches,
    token_input_refused,
)
from sluice.providers.errors import malformed_response
from sluice.providers.gemini.endpoint import api_headers, method_url, resource_name

MAX_REQUESTS = 100
"""Requests per ``batchEmbedContents`` call the API takes."""


class _Wire(Struct, rename="camel", omit_defaults=True):
    """Base: camelCase names, absent fields not written."""


class TextPart(_Wire):
    text: str


class TextContent(_Wire):
    parts: list[TextPart]


class EmbedContentRequest(_Wire):
    model: str
    content: TextContent
    output_dimensionality: int | UnsetType = UNSET


class BatchEmbedContentsRequest(_Wire):
    requests: list[EmbedContentRequest]


class _Values(Struct):
    values: list[float]


class _UsageMetadata(Struct, rename="camel"):
    prompt_token_count: int | None = None


class _BatchAnswer(Struct, rename="camel"):
    embeddings: list[_Values]
    usage_metadata: _UsageMetadata | None = None


_ENCODER = msgspec.json.Encoder()
_ANSWER = msgspec.json.Decoder(_BatchAnswer)


def batch_body(texts: tuple[str, ...], native_model: str, dimensions: int | None) -> bytes:
    name = resource_name(native_model)
    size: int | UnsetType = UNSET if dimensions is None else dimensions
    return _ENCODER.encode(
        BatchEmbedContentsRequest(
            [EmbedContentRequest(name, TextContent([TextPart(text)]), size) for text in texts]
        )
    )


def parse_batch_embeddings(body: bytes, count: int) -> Embedded:
    try:
        answer = _ANSWER.decode(body)
    except msgspec.DecodeError:
        raise malformed_response() from None
    vectors = checked_vectors([item.values for item in answer.embeddings], count)
    meta = answer.usage_metadata
    tokens = None
    if meta is not None and meta.prompt_token_count is not None:
        tokens = reported_count(meta.prompt_token_count)
    return Embedded(vectors, tokens)


class GeminiEmbeddings(EmbedsText):
    """The embeddings ability of the Gemini adapter (mixed into it)."""

    embed_concurrency = 4

    def embed_batches(self, call: EmbedCall, target: Target) -> list[EmbedBatch]:
        if call.tokens:
            raise token_input_refused("Gemini")
        conn, model = target.connection, target.native_model

        def body(start: int, n: int) -> bytes:
            return batch_body(call.texts[start : start + n], model, call.dimensions)

        url = method_url(conn, model, "batchEmbedContents")
        return posted_batches(url, api_headers(conn), call.count, MAX_REQUESTS, body)

    def parse_embeddings(
        self, headers: Mapping[str, str], body: bytes, batch: EmbedBatch
    ) -> Embedded:
        return parse_batch_embeddings(body, batch.count)
