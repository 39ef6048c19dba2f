"""Gemini embeddings: ``batchEmbedContents`` requests, batches of 100, the answers."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sluice.core.connection import ConnectionSettings, Secret, Target, Timeouts
from sluice.core.embedding import EmbedCall
from sluice.errors import InvalidRequestError, RateLimitError, UpstreamError
from sluice.providers.base import EmbedBatch
from sluice.providers.gemini import GeminiAdapter
from sluice.providers.registry import AdapterRegistry
from tests.support.gateway import counting_ids
from tests.support.transcript import FIXTURES

KEY = "AIzaSyD-0123456789abcdefghijklmnopqrstu"
BASE = "https://generativelanguage.googleapis.com/"


def recorded(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((FIXTURES / "embeddings" / f"{name}.json").read_text())
    return doc


def target(native: str = "gemini-embedding-001", key: str | None = KEY) -> Target:
    conn = ConnectionSettings(
        "conn_g", "gemini", BASE, Secret(key) if key else None, timeouts=Timeouts()
    )
    return Target("google/gemini-embedding-001", native, conn)


def adapter() -> GeminiAdapter:
    return GeminiAdapter("gemini", counting_ids())


def batch(count: int) -> EmbedBatch:
    (only,) = adapter().embed_batches(EmbedCall(texts=("x",) * count), target())
    return only


def test_gemini_embeds_in_batches_of_a_hundred_four_at_once() -> None:
    found = AdapterRegistry(counting_ids()).abilities("gemini").embeds_text
    assert found is not None and found.embed_concurrency == 4


def test_the_request_is_a_batch_naming_the_model_in_each_entry() -> None:
    call = EmbedCall(texts=("hello", "world"), dimensions=768, user="ignored")
    (only,) = adapter().embed_batches(call, target())
    up = only.request
    assert (up.method, up.stream, up.aws_sigv4, only.start, only.count) == (
        "POST",
        False,
        None,
        0,
        2,
    )
    assert up.url == BASE + "v1beta/models/gemini-embedding-001:batchEmbedContents"
    assert up.headers == {"content-type": "application/json", "x-goog-api-key": KEY}
    assert json.loads(up.body) == {
        "requests": [
            {
                "model": "models/gemini-embedding-001",
                "content": {"parts": [{"text": "hello"}]},
                "outputDimensionality": 768,
            },
            {
                "model": "models/gemini-embedding-001",
                "content": {"parts": [{"text": "world"}]},
                "outputDimensionality": 768,
            },
        ]
    }


@pytest.mark.parametrize(
    ("native", "path", "name"),
    [
        ("models/text-embedding-004", "models/text-embedding-004", "models/text-embedding-004"),
        ("tunedModels/my emb", "tunedModels/my%20emb", "tunedModels/my emb"),
    ],
    ids=["models-prefix", "resource-name-quoted-in-url-only"],
)
def test_a_resource_name_is_used_as_is(native: str, path: str, name: str) -> None:
    (only,) = adapter().embed_batches(EmbedCall(texts=("a",)), target(native, key=None))
    assert only.request.url == f"{BASE}v1beta/{path}:batchEmbedContents"
    assert "x-goog-api-key" not in only.request.headers
    assert json.loads(only.request.body) == {
        "requests": [{"model": name, "content": {"parts": [{"text": "a"}]}}]
    }


def test_250_inputs_make_batches_of_100_100_50_in_order() -> None:
    texts = tuple(f"t{i}" for i in range(250))
    batches = adapter().embed_batches(EmbedCall(texts=texts), target())
    assert [(b.start, b.count) for b in batches] == [(0, 100), (100, 100), (200, 50)]
    sent = [
        r["content"]["parts"][0]["text"]
        for b in batches
        for r in json.loads(b.request.body)["requests"]
    ]
    assert sent == list(texts)


def test_token_arrays_are_refused() -> None:
    with pytest.raises(InvalidRequestError) as caught:
        adapter().embed_batches(EmbedCall(tokens=((1, 2),)), target())
    assert (caught.value.code, caught.value.param, caught.value.status) == (
        "token_input_unsupported",
        "input",
        400,
    )


def test_the_recorded_answer_is_read_without_a_token_count() -> None:
    doc = recorded("gemini")
    body = json.dumps(doc["body"]).encode()
    got = adapter().parse_embeddings(doc["headers"], body, batch(3))
    assert got.vectors == [e["values"] for e in doc["body"]["embeddings"]]
    assert got.prompt_tokens is None


@pytest.mark.parametrize(("reported", "kept"), [(12, 12), (-3, 0), (10**12, 100_000_000)])
def test_a_usage_count_where_given_is_read_clamped(reported: int, kept: int) -> None:
    body = json.dumps(
        {"embeddings": [{"values": [0.5]}], "usageMetadata": {"promptTokenCount": reported}}
    ).encode()
    assert adapter().parse_embeddings({}, body, batch(1)).prompt_tokens == kept


@pytest.mark.parametrize(
    "body",
    [
        {"embeddings": [{"values": [0.1]}, {"values": [0.2]}]},
        {"embeddings": [{"values": [0.1]}] * 4},
        {"embeddings": [{"values": [0.1]}, {"values": [0.2, 0.3]}, {"values": [0.4]}]},
        {"embeddings": [{"values": []}] * 3},
        {"embeddings": [{}, {}, {}]},
        {"embedding": {"values": [0.1]}},
        {"error": {"code": 500, "message": "Internal error", "status": "INTERNAL"}},
        "not an object",
    ],
    ids=[
        "too-few",
        "too-many",
        "ragged",
        "empty-vectors",
        "no-values",
        "single-embed-shape",
        "error-with-200",
        "string",
    ],
)
def test_a_malformed_answer_is_refused(body: Any) -> None:
    with pytest.raises(UpstreamError) as caught:
        adapter().parse_embeddings({}, json.dumps(body).encode(), batch(3))
    assert caught.value.code == "upstream_malformed_response"


def test_a_body_that_is_not_json_is_refused() -> None:
    with pytest.raises(UpstreamError, match="malformed"):
        adapter().parse_embeddings({}, b"<html>", batch(1))


def test_the_recorded_error_goes_through_parse_error() -> None:
    doc = recorded("gemini_error")
    err = adapter().parse_error(doc["status"], doc["headers"], json.dumps(doc["body"]).encode())
    assert isinstance(err, InvalidRequestError)
    assert err.code == "invalid_argument"
    assert "at most 100 requests" in err.message


def test_a_quota_error_is_a_rate_limit() -> None:
    body = {"error": {"code": 429, "message": "Quota exceeded", "status": "RESOURCE_EXHAUSTED"}}
    err = adapter().parse_error(429, {}, json.dumps(body).encode())
    assert isinstance(err, RateLimitError)
