"""OpenAI's embeddings API (``POST {base}/embeddings``), and every server that speaks it.

Up to 2048 inputs per call, texts or token arrays as sent. We always ask for
``encoding_format: "float"`` (a client's ``base64`` is the front door's to encode); an
answer in base64 anyway (a server that ignores the field) is read as little-endian
float32, as the official SDK reads it. The answer's ``data`` is put in order by
``index``: exactly one vector per input, each index once.
"""

from __future__ import annotations

import base64
import binascii
import struct
from collections.abc import Mapping

import msgspec
from msgspec import UNSET, Struct, UnsetType

from sluice.core.connection import Target
from sluice.core.embedding import EmbedCall, Embedded
from sluice.core.usage import reported_count
from sluice.providers.base import EmbedBatch, EmbedsText
from sluice.providers.embedding_parts import checked_vectors, posted_batches
from sluice.providers.errors import malformed_response
from sluice.providers.openai_request import openai_headers, openai_url

MAX_INPUTS = 2048
"""Inputs per call the embeddings API takes."""


class EmbeddingsBody(Struct):
    """The request body (encode only): absent options are left out."""

    model: str
    input: list[str] | list[list[int]]
    encoding_format: str = "float"
    dimensions: int | UnsetType = UNSET
    user: str | UnsetType = UNSET


class _Embedding(Struct):
    index: int
    embedding: list[float] | str


class _Usage(Struct):
    prompt_tokens: int | None = None


class _Answer(Struct):
    data: list[_Embedding]
    usage: _Usage | None = None


_ENCODER = msgspec.json.Encoder()
_ANSWER = msgspec.json.Decoder(_Answer)


def embeddings_body(call: EmbedCall, model: str, start: int, count: int) -> EmbeddingsBody:
    """The body for inputs ``start`` to ``start + count`` of ``call``."""
    inputs: list[str] | list[list[int]]
    if call.tokens:
        inputs = [list(tokens) for tokens in call.tokens[start : start + count]]
    else:
        inputs = list(call.texts[start : start + count])
    body = EmbeddingsBody(model=model, input=inputs)
    if call.dimensions is not None:
        body.dimensions = call.dimensions
    if call.user is not None:
        body.user = call.user
    return body


def parse_openai_embeddings(body: bytes, count: int) -> Embedded:
    """An embeddings answer holding ``count`` vectors, in input order."""
    try:
        answer = _ANSWER.decode(body)
    except msgspec.DecodeError:
        raise malformed_response() from None
    by_index: dict[int, list[float]] = {}
    for item in answer.data:
        if not 0 <= item.index < count or item.index in by_index:
            raise malformed_response()
        by_index[item.index] = _floats(item.embedding)
    vectors = checked_vectors([by_index[i] for i in sorted(by_index)], count)
    usage = answer.usage
    tokens = None
    if usage is not None and usage.prompt_tokens is not None:
        tokens = reported_count(usage.prompt_tokens)
    return Embedded(vectors, tokens)


def _floats(embedding: list[float] | str) -> list[float]:
    if isinstance(embedding, list):
        return embedding
    try:
        raw = base64.b64decode(embedding, validate=True)
    except (binascii.Error, ValueError):
        raise malformed_response() from None
    if len(raw) % 4:
        raise malformed_response()
    return list(struct.unpack(f"<{len(raw) // 4}f", raw))


class OpenAIEmbeddings(EmbedsText):
    """The embeddings ability of the OpenAI adapter (mixed into it)."""

    embed_concurrency = 4

    def embed_batches(self, call: EmbedCall, target: Target) -> list[EmbedBatch]:
        conn, model = target.connection, target.native_model

        def body(start: int, n: int) -> bytes:
            return _ENCODER.encode(embeddings_body(call, model, start, n))

        url = openai_url(conn, "/embeddings")
        return posted_batches(url, openai_headers(conn), call.count, MAX_INPUTS, body)

    def parse_embeddings(
        self, headers: Mapping[str, str], body: bytes, batch: EmbedBatch
    ) -> Embedded:
        return parse_openai_embeddings(body, batch.count)
