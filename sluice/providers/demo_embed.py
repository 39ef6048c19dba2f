"""The demo provider's embeddings (native model ``demo-embed``): no network, no key.

An in-process upstream answers in OpenAI's embeddings format, so the OpenAI parser
reads it. Each vector is a hashing trick over the input: its words and their
character trigrams (token ids and their pairs, for token arrays) land in signed
buckets, and the sum is L2-normalized. The same text always gives the same vector,
and texts sharing words or spellings point the same way. 256 dimensions unless the
request asks for 1 to 3072. ``prompt_tokens`` is the gateway's estimate (one token
per four characters) or the token arrays' lengths.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterator
from itertools import pairwise

import msgspec

from sluice.core.connection import Target
from sluice.core.embedding import EmbedCall
from sluice.core.tokens import tokens_for_chars
from sluice.core.upstream_request import UpstreamRequest
from sluice.errors import InvalidRequestError
from sluice.providers.base import EmbedBatch
from sluice.providers.embedding_parts import dimensions_refused, spans
from sluice.providers.openai_embeddings import MAX_INPUTS

EMBED_MODEL = "demo-embed"
DEFAULT_DIMENSIONS = 256
MAX_DIMENSIONS = 3072
_WORD = re.compile(r"\w+")
_TRIGRAM_WEIGHT = 0.5
_ENCODER = msgspec.json.Encoder()

Features = list[tuple[str, float]]


class _Embedding(msgspec.Struct):
    index: int
    embedding: list[float]
    object: str = "embedding"


class _Usage(msgspec.Struct):
    prompt_tokens: int
    total_tokens: int


class _Answer(msgspec.Struct):
    data: list[_Embedding]
    usage: _Usage
    object: str = "list"
    model: str = EMBED_MODEL


def text_features(text: str) -> Features:
    """Each word (lower-cased), and each character trigram of it padded with spaces."""
    features: Features = []
    for word in _WORD.findall(text.lower()):
        features.append(("w:" + word, 1.0))
        padded = f" {word} "
        features += [("c:" + padded[i : i + 3], _TRIGRAM_WEIGHT) for i in range(len(padded) - 2)]
    return features


def token_features(tokens: tuple[int, ...]) -> Features:
    """Each token id, and each pair of neighbours."""
    features: Features = [(f"t:{token}", 1.0) for token in tokens]
    features += [(f"p:{a}:{b}", _TRIGRAM_WEIGHT) for a, b in pairwise(tokens)]
    return features


def demo_vector(features: Features, dimensions: int) -> list[float]:
    """The features hashed into ``dimensions`` signed buckets, L2-normalized (an input
    with no features gets the first unit vector)."""
    sums = [0.0] * dimensions
    for feature, weight in features:
        digest = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "big")
        sums[digest % dimensions] += -weight if digest >> 63 else weight
    norm = math.sqrt(sum(x * x for x in sums))
    if norm == 0.0:
        return [1.0] + [0.0] * (dimensions - 1)
    return [round(x / norm, 8) for x in sums]


class DemoEmbedUpstream:
    """The scripted upstream for one batch: after ``pause`` seconds, the whole answer."""

    def __init__(self, call: EmbedCall, start: int, count: int, pause: float) -> None:
        self._call = call
        self._start = start
        self._count = count
        self._pause = pause

    def script(self) -> Iterator[tuple[float, bytes]]:
        yield self._pause, self.answer()

    def answer(self) -> bytes:
        call, end = self._call, self._start + self._count
        dimensions = call.dimensions or DEFAULT_DIMENSIONS
        if call.tokens:
            inputs = [token_features(t) for t in call.tokens[self._start : end]]
            tokens = sum(len(t) for t in call.tokens[self._start : end])
        else:
            inputs = [text_features(t) for t in call.texts[self._start : end]]
            tokens = sum(tokens_for_chars(len(t)) for t in call.texts[self._start : end])
        data = [_Embedding(i, demo_vector(f, dimensions)) for i, f in enumerate(inputs)]
        return _ENCODER.encode(_Answer(data, _Usage(tokens, tokens)))


def demo_embed_batches(call: EmbedCall, target: Target, pause: float) -> list[EmbedBatch]:
    """In-process batches of at most 2048 inputs, each answered after ``pause`` seconds."""
    if target.native_model != EMBED_MODEL:
        raise InvalidRequestError(
            f"The demo model {target.native_model!r} does not embed; use {EMBED_MODEL!r}.",
            code="embedding_model_unsupported",
            param="model",
        )
    if call.dimensions is not None and not 1 <= call.dimensions <= MAX_DIMENSIONS:
        raise dimensions_refused(EMBED_MODEL, f"1 to {MAX_DIMENSIONS}")
    conn = target.connection
    return [
        EmbedBatch(
            UpstreamRequest(
                method="POST",
                url=conn.base_url,
                headers={},
                body=b"",
                stream=False,
                local=DemoEmbedUpstream(call, start, n, pause),
            ),
            start,
            n,
        )
        for start, n in spans(call.count, MAX_INPUTS)
    ]
