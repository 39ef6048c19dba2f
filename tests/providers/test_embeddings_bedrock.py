"""Bedrock embeddings through InvokeModel: Titan one text per call, Cohere in batches
of 96, signing as for Converse, the answers and InvokeModel's errors."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sluice.core.connection import ConnectionSettings, Secret, Target, Timeouts
from sluice.core.embedding import EmbedCall
from sluice.core.upstream_request import AwsSigning
from sluice.errors import (
    InvalidRequestError,
    RateLimitError,
    RequestTimeoutError,
    UpstreamError,
)
from sluice.providers.base import EmbedBatch
from sluice.providers.bedrock import BedrockAdapter
from sluice.providers.registry import AdapterRegistry
from tests.support.gateway import counting_ids
from tests.support.transcript import FIXTURES

RUNTIME = "https://bedrock-runtime.us-east-1.amazonaws.com"
TITAN = "amazon.titan-embed-text-v2:0"
COHERE = "cohere.embed-english-v3"
COHERE_V4 = "cohere.embed-v4:0"
JSON_HEADERS = {"content-type": "application/json", "accept": "application/json"}


def recorded(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((FIXTURES / "embeddings" / f"{name}.json").read_text())
    return doc


def body_of(name: str) -> bytes:
    return json.dumps(recorded(name)["body"]).encode()


def target(native: str = TITAN, *, key: str | None = None, region: str | None = None) -> Target:
    conn = ConnectionSettings(
        "conn_b",
        "aws-bedrock",
        RUNTIME,
        Secret(key) if key else None,
        region=region,
        timeouts=Timeouts(),
    )
    return Target("aws/embed", native, conn)


def adapter() -> BedrockAdapter:
    return BedrockAdapter("aws-bedrock", counting_ids())


def batches(call: EmbedCall, native: str = TITAN, **kw: Any) -> list[EmbedBatch]:
    return adapter().embed_batches(call, target(native, **kw))


def refused(call: EmbedCall, native: str = TITAN) -> InvalidRequestError:
    with pytest.raises(InvalidRequestError) as caught:
        batches(call, native)
    assert caught.value.status == 400
    return caught.value


def test_bedrock_embeds_eight_calls_at_once() -> None:
    found = AdapterRegistry(counting_ids()).abilities("aws-bedrock").embeds_text
    assert found is not None and found.embed_concurrency == 8


def test_titan_v2_sends_one_text_per_signed_invoke() -> None:
    call = EmbedCall(texts=("a", "b", "c"), dimensions=512)
    found = batches(call)
    assert [(b.start, b.count) for b in found] == [(0, 1), (1, 1), (2, 1)]
    up = found[1].request
    assert up.url == RUNTIME + "/model/amazon.titan-embed-text-v2%3A0/invoke"
    assert (up.method, up.stream, up.headers) == ("POST", False, JSON_HEADERS)
    assert up.aws_sigv4 == AwsSigning(service="bedrock", region="us-east-1")
    assert json.loads(up.body) == {"inputText": "b", "dimensions": 512, "normalize": True}


def test_titan_without_dimensions_and_with_an_api_key() -> None:
    (only,) = batches(EmbedCall(texts=("hi",)), key="bedrock-api-key")
    assert only.request.aws_sigv4 is None
    assert only.request.headers == {**JSON_HEADERS, "authorization": "Bearer bedrock-api-key"}
    assert json.loads(only.request.body) == {"inputText": "hi", "normalize": True}


def test_the_connections_region_signs() -> None:
    (only,) = batches(EmbedCall(texts=("hi",)), region="eu-central-1")
    assert only.request.aws_sigv4 == AwsSigning(service="bedrock", region="eu-central-1")


def test_titan_v1_sends_the_text_alone() -> None:
    (only,) = batches(EmbedCall(texts=("hi",)), "amazon.titan-embed-text-v1")
    assert json.loads(only.request.body) == {"inputText": "hi"}


@pytest.mark.parametrize(
    ("native", "dimensions"),
    [(TITAN, 300), (TITAN, 1536), ("amazon.titan-embed-text-v1", 512), (COHERE, 1024)],
    ids=["titan-v2-odd", "titan-v2-too-big", "titan-v1-any", "cohere-v3-any"],
)
def test_a_length_the_model_cannot_give_is_refused(native: str, dimensions: int) -> None:
    err = refused(EmbedCall(texts=("a",), dimensions=dimensions), native)
    assert (err.code, err.param) == ("dimensions_unsupported", "dimensions")


def test_cohere_sends_batches_of_96_in_order() -> None:
    texts = tuple(f"t{i}" for i in range(200))
    found = batches(EmbedCall(texts=texts, user="u"), COHERE)
    assert [(b.start, b.count) for b in found] == [(0, 96), (96, 96), (192, 8)]
    assert found[0].request.url == RUNTIME + "/model/cohere.embed-english-v3/invoke"
    assert json.loads(found[2].request.body) == {
        "texts": [f"t{i}" for i in range(192, 200)],
        "input_type": "search_document",
        "embedding_types": ["float"],
    }
    sent = [t for b in found for t in json.loads(b.request.body)["texts"]]
    assert sent == list(texts)


def test_cohere_v4_takes_an_output_dimension() -> None:
    (only,) = batches(EmbedCall(texts=("a",), dimensions=256), "us." + COHERE_V4)
    assert json.loads(only.request.body)["output_dimension"] == 256
    err = refused(EmbedCall(texts=("a",), dimensions=300), COHERE_V4)
    assert err.code == "dimensions_unsupported"


def test_token_arrays_are_refused() -> None:
    err = refused(EmbedCall(tokens=((1, 2),)))
    assert (err.code, err.param) == ("token_input_unsupported", "input")


@pytest.mark.parametrize(
    "native", ["anthropic.claude-3-haiku-20240307-v1:0", "arn:aws:bedrock:us-east-1::x/abc"]
)
def test_a_model_that_cannot_embed_is_refused(native: str) -> None:
    err = refused(EmbedCall(texts=("a",)), native)
    assert (err.code, err.param) == ("embedding_model_unsupported", "model")


def test_the_recorded_titan_answer_counts_its_tokens() -> None:
    doc = recorded("bedrock_titan_v2")
    (one,) = batches(EmbedCall(texts=("a",)))
    got = adapter().parse_embeddings(doc["headers"], body_of("bedrock_titan_v2"), one)
    assert got.vectors == [doc["body"]["embedding"]]
    assert got.prompt_tokens == 7


@pytest.mark.parametrize("name", ["bedrock_cohere", "bedrock_cohere_floats"])
def test_the_recorded_cohere_answers_count_from_the_header(name: str) -> None:
    doc = recorded(name)
    (two,) = batches(EmbedCall(texts=("a", "b")), COHERE)
    got = adapter().parse_embeddings(doc["headers"], body_of(name), two)
    floats = doc["body"]["embeddings"]
    assert got.vectors == (floats["float"] if isinstance(floats, dict) else floats)
    assert got.prompt_tokens == 9


@pytest.mark.parametrize(
    ("headers", "kept"),
    [({}, None), ({"x-amzn-bedrock-input-token-count": "abc"}, None),
     ({"x-amzn-bedrock-input-token-count": "-4"}, 0),
     ({"x-amzn-bedrock-input-token-count": "99999999999"}, 100_000_000)],
    ids=["absent", "not-a-number", "negative", "huge"],
)  # fmt: skip
def test_the_header_count_is_clamped_or_absent(headers: dict[str, str], kept: int | None) -> None:
    (one,) = batches(EmbedCall(texts=("a",)), COHERE)
    body = b'{"embeddings": [[0.1, 0.2]], "response_type": "embeddings_floats"}'
    assert adapter().parse_embeddings(headers, body, one).prompt_tokens == kept


def test_a_huge_titan_body_count_is_clamped() -> None:
    (one,) = batches(EmbedCall(texts=("a",)))
    body = b'{"embedding": [0.1], "inputTextTokenCount": 1000000000000}'
    assert adapter().parse_embeddings({}, body, one).prompt_tokens == 100_000_000


@pytest.mark.parametrize(
    ("body", "count"),
    [
        ({"embedding": [0.1]}, 2),
        ({"embeddings": [[0.1]]}, 2),
        ({"embeddings": {"int8": [[1], [2]]}}, 2),
        ({"embeddings": [[0.1], [0.2, 0.3]]}, 2),
        ({"embedding": []}, 1),
        ({"inputTextTokenCount": 3}, 1),
        ({"message": "Too many requests"}, 1),
        ({"embeddings": "AAAA"}, 1),
    ],
    ids=[
        "titan-for-two",
        "cohere-too-few",
        "cohere-no-floats",
        "ragged",
        "empty-vector",
        "no-vector",
        "error-with-200",
        "string-embeddings",
    ],
)
def test_a_malformed_answer_is_refused(body: dict[str, Any], count: int) -> None:
    (found,) = batches(EmbedCall(texts=("a",) * count), COHERE)
    with pytest.raises(UpstreamError) as caught:
        adapter().parse_embeddings({}, json.dumps(body).encode(), found)
    assert caught.value.code == "upstream_malformed_response"


def test_an_invoke_model_error_is_read_like_a_converse_one() -> None:
    doc = recorded("bedrock_error")
    err = adapter().parse_error(doc["status"], doc["headers"], body_of("bedrock_error"))
    assert isinstance(err, InvalidRequestError)
    assert err.message == doc["body"]["message"]
    assert err.upstream_code is None


@pytest.mark.parametrize(
    ("status", "error_type", "cls"),
    [
        (429, "ThrottlingException", RateLimitError),
        (408, "ModelTimeoutException", RequestTimeoutError),
        (424, "ModelErrorException", UpstreamError),
    ],
)
def test_invoke_model_errors_keep_their_class(
    status: int, error_type: str, cls: type[Exception]
) -> None:
    headers = {"x-amzn-errortype": f"{error_type}:http://internal.amazon.com/coral/"}
    err = adapter().parse_error(status, headers, b'{"message": "no"}')
    assert type(err) is cls
