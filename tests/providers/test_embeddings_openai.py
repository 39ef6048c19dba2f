"""OpenAI-format embeddings: the request each batch sends, the split, and the answers
read (recorded fixtures, and malformed ones refused precisely)."""

from __future__ import annotations

import base64
import json
import struct
from typing import Any

import pytest

from sluice.core.connection import ConnectionSettings, Secret, Target, Timeouts
from sluice.core.embedding import EmbedCall
from sluice.errors import InvalidRequestError, UpstreamError
from sluice.frontdoors.chat import decode_chat_request
from sluice.providers.base import EmbedBatch, EmbedsText
from sluice.providers.openai import OpenAIAdapter
from sluice.providers.registry import AdapterRegistry
from tests.support.gateway import counting_ids
from tests.support.transcript import FIXTURES


def recorded(name: str) -> dict[str, Any]:
    """A recorded answer: ``status``, ``headers`` and the JSON ``body``."""
    doc: dict[str, Any] = json.loads((FIXTURES / "embeddings" / f"{name}.json").read_text())
    return doc


def body_of(name: str) -> bytes:
    return json.dumps(recorded(name)["body"]).encode()


def target(key: str | None = "sk-test", base_url: str = "https://api.example.test/v1/") -> Target:
    conn = ConnectionSettings(
        "conn_o", "openai", base_url, Secret(key) if key else None, timeouts=Timeouts()
    )
    return Target("openai/text-embedding-3-small", "text-embedding-3-small", conn)


def adapter() -> OpenAIAdapter:
    return OpenAIAdapter("openai", counting_ids())


def batch(count: int, start: int = 0) -> EmbedBatch:
    (only,) = adapter().embed_batches(EmbedCall(texts=("x",) * count), target())
    return EmbedBatch(only.request, start, count)


def answer(*items: tuple[int, list[float]], usage: Any = None) -> bytes:
    doc: dict[str, Any] = {
        "object": "list",
        "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in items],
        "model": "text-embedding-3-small",
    }
    if usage is not None:
        doc["usage"] = usage
    return json.dumps(doc).encode()


@pytest.mark.parametrize("kind", ["openai", "openai-compatible", "deepseek"])
def test_every_openai_format_kind_embeds(kind: str) -> None:
    abilities = AdapterRegistry(counting_ids()).abilities(kind)
    assert isinstance(abilities.adapter, EmbedsText)
    assert abilities.embeds_text is not None and abilities.embeds_text.embed_concurrency == 4


def test_anthropic_does_not_embed() -> None:
    assert AdapterRegistry(counting_ids()).abilities("anthropic").embeds_text is None


def test_the_request_carries_texts_as_floats_with_the_chat_headers() -> None:
    call = EmbedCall(texts=("a", "b"), dimensions=256, user="u-1")
    (only,) = adapter().embed_batches(call, target())
    up = only.request
    assert (only.start, only.count) == (0, 2)
    assert (up.method, up.url, up.stream, up.local, up.aws_sigv4) == (
        "POST",
        "https://api.example.test/v1/embeddings",
        False,
        None,
        None,
    )
    assert up.headers == {"content-type": "application/json", "authorization": "Bearer sk-test"}
    assert json.loads(up.body) == {
        "model": "text-embedding-3-small",
        "input": ["a", "b"],
        "encoding_format": "float",
        "dimensions": 256,
        "user": "u-1",
    }


def test_token_arrays_are_sent_as_arrays_and_absent_options_are_left_out() -> None:
    call = EmbedCall(tokens=((1, 2, 3), (4,)))
    (only,) = adapter().embed_batches(call, target(key=None))
    assert "authorization" not in only.request.headers
    assert json.loads(only.request.body) == {
        "model": "text-embedding-3-small",
        "input": [[1, 2, 3], [4]],
        "encoding_format": "float",
    }


def test_the_chat_request_still_uses_the_shared_url_and_headers() -> None:
    req = decode_chat_request(b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}')
    up = adapter().build_request(req, target())
    assert up.url == "https://api.example.test/v1/chat/completions"
    assert up.headers == {"content-type": "application/json", "authorization": "Bearer sk-test"}


def test_more_than_2048_inputs_are_split_in_order() -> None:
    texts = tuple(f"t{i}" for i in range(5000))
    batches = adapter().embed_batches(EmbedCall(texts=texts), target())
    assert [(b.start, b.count) for b in batches] == [(0, 2048), (2048, 2048), (4096, 904)]
    sent = [json.loads(b.request.body)["input"] for b in batches]
    assert [t for inputs in sent for t in inputs] == list(texts)


def test_the_recorded_answer_is_read_in_order_with_its_count() -> None:
    doc = recorded("openai")
    got = adapter().parse_embeddings(doc["headers"], body_of("openai"), batch(3))
    assert got.vectors == [item["embedding"] for item in doc["body"]["data"]]
    assert got.prompt_tokens == 11


def test_a_base64_answer_is_read_as_little_endian_float32() -> None:
    doc = recorded("openai_base64")
    got = adapter().parse_embeddings(doc["headers"], body_of("openai_base64"), batch(2))
    first = base64.b64decode(doc["body"]["data"][0]["embedding"])
    assert got.vectors[0] == list(struct.unpack("<8f", first))
    assert len(got.vectors) == 2 and got.prompt_tokens == 6


def test_data_out_of_order_is_put_in_index_order() -> None:
    body = answer((2, [0.3]), (0, [0.1]), (1, [0.2]), usage={"prompt_tokens": 3})
    assert adapter().parse_embeddings({}, body, batch(3)).vectors == [[0.1], [0.2], [0.3]]


def test_an_answer_without_usage_leaves_the_count_to_the_gateway() -> None:
    assert adapter().parse_embeddings({}, answer((0, [1.0])), batch(1)).prompt_tokens is None


@pytest.mark.parametrize(
    ("reported", "kept"),
    [(10**15, 100_000_000), (-5, 0), (7, 7)],
    ids=["huge", "negative", "plain"],
)
def test_reported_counts_are_clamped(reported: int, kept: int) -> None:
    body = answer((0, [1.0]), usage={"prompt_tokens": reported, "total_tokens": reported})
    assert adapter().parse_embeddings({}, body, batch(1)).prompt_tokens == kept


@pytest.mark.parametrize(
    "body",
    [
        answer((0, [0.1]), (1, [0.2])),
        answer((0, [0.1]), (1, [0.2]), (2, [0.3]), (3, [0.4])),
        answer((0, [0.1]), (0, [0.2]), (2, [0.3])),
        answer((0, [0.1]), (1, [0.2]), (3, [0.3])),
        answer((0, [0.1]), (1, [0.2]), (-1, [0.3])),
        answer((0, [0.1]), (1, [0.2, 0.5]), (2, [0.3])),
        answer((0, []), (1, []), (2, [])),
        b'{"object": "list", "data": [{"index": 0}, {"index": 1}, {"index": 2}]}',
        b'{"object": "list", "data": [{"index": 0, "embedding": "not base64!"}]}',
        b'{"object": "list", "data": [{"index": "0", "embedding": [1.0]}]}',
        b'{"error": {"message": "overloaded"}}',
        b"<html>502 Bad Gateway</html>",
        b"",
    ],
    ids=[
        "too-few",
        "too-many",
        "duplicate-index",
        "index-out-of-range",
        "negative-index",
        "ragged-vectors",
        "empty-vectors",
        "no-embedding",
        "bad-base64",
        "string-index",
        "error-with-200",
        "not-json",
        "empty-body",
    ],
)
def test_a_malformed_answer_is_refused(body: bytes) -> None:
    with pytest.raises(UpstreamError) as caught:
        adapter().parse_embeddings({}, body, batch(3))
    assert caught.value.code == "upstream_malformed_response"


def test_the_recorded_error_goes_through_parse_error() -> None:
    doc = recorded("openai_error")
    err = adapter().parse_error(doc["status"], doc["headers"], body_of("openai_error"))
    assert isinstance(err, InvalidRequestError)
    assert err.message == "This model does not support specifying dimensions."
