"""The demo provider's ``demo-embed``: deterministic, similar texts near each other,
answered in OpenAI's format through the transport's in-process path."""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

import pytest

from sluice.core.connection import ConnectionSettings, Target
from sluice.core.embedding import EmbedCall, Embedded
from sluice.errors import InvalidRequestError
from sluice.providers.demo import DemoAdapter
from sluice.providers.demo_embed import demo_vector, text_features
from sluice.providers.registry import AdapterRegistry
from sluice.transport.http import LocalResponse
from tests.support.gateway import counting_ids


def target(native: str = "demo-embed", options: dict[str, float] | None = None) -> Target:
    conn = ConnectionSettings("demo", "demo", "demo://local", options=options or {})
    return Target("sluice/demo-embed", native, conn)


def adapter() -> DemoAdapter:
    return DemoAdapter("demo", counting_ids())


def embed(call: EmbedCall) -> list[Embedded]:
    """Every batch's answer, read as the caller reads it (with no pause)."""
    found = []
    for batch in adapter().embed_batches(call, target(options={"first_token_ms": 0})):
        assert batch.request.local is not None and not batch.request.stream
        ((_, body),) = list(batch.request.local.script())
        found.append(adapter().parse_embeddings({}, body, batch))
    return found


def vectors(*texts: str, dimensions: int | None = None) -> list[list[float]]:
    (answer,) = embed(EmbedCall(texts=texts, dimensions=dimensions))
    return answer.vectors


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_the_demo_embeds() -> None:
    found = AdapterRegistry(counting_ids()).abilities("demo").embeds_text
    assert found is not None


def test_vectors_are_deterministic_unit_length_and_256_long() -> None:
    first = vectors("The cat sat on the mat.", "")
    assert first == vectors("The cat sat on the mat.", "")
    assert [len(v) for v in first] == [256, 256]
    for vector in first:
        assert math.isclose(math.sqrt(sum(x * x for x in vector)), 1.0, rel_tol=1e-6)


def test_similar_texts_are_nearer_than_unrelated_ones() -> None:
    cat, kitten, tax = vectors(
        "the cat sat on the mat", "a cat sat on a mat", "quarterly tax filing deadline"
    )
    assert cosine(cat, kitten) > 0.5
    assert cosine(cat, kitten) > cosine(cat, tax) + 0.3


@pytest.mark.parametrize("dimensions", [1, 3, 1024, 3072])
def test_dimensions_are_honoured(dimensions: int) -> None:
    assert {len(v) for v in vectors("a", "b c", dimensions=dimensions)} == {dimensions}


@pytest.mark.parametrize("dimensions", [0, 3073, -1])
def test_dimensions_out_of_range_are_refused(dimensions: int) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        adapter().embed_batches(EmbedCall(texts=("a",), dimensions=dimensions), target())
    assert (caught.value.code, caught.value.param) == ("dimensions_unsupported", "dimensions")


def test_other_demo_models_do_not_embed() -> None:
    with pytest.raises(InvalidRequestError) as caught:
        adapter().embed_batches(EmbedCall(texts=("a",)), target("demo"))
    assert (caught.value.code, caught.value.param) == ("embedding_model_unsupported", "model")


def test_token_arrays_are_hashed_and_counted_by_length() -> None:
    (answer,) = embed(EmbedCall(tokens=((1, 2, 3), (1, 2, 4), (900, 901))))
    same, near, far = answer.vectors[0], answer.vectors[1], answer.vectors[2]
    assert cosine(same, near) > cosine(same, far)
    assert answer.prompt_tokens == 8


def test_prompt_tokens_are_the_gateways_estimate() -> None:
    (answer,) = embed(EmbedCall(texts=("12345678", "123", "")))
    assert answer.prompt_tokens == 2 + 1 + 0


def test_batches_of_2048_keep_their_own_slice() -> None:
    texts = tuple(f"text number {i}" for i in range(2050))
    batches = adapter().embed_batches(EmbedCall(texts=texts, dimensions=8), target())
    assert [(b.start, b.count) for b in batches] == [(0, 2048), (2048, 2)]
    tail = embed(EmbedCall(texts=texts, dimensions=8))[1]
    assert tail.vectors == [
        demo_vector(text_features(t), 8) for t in ("text number 2048", "text number 2049")
    ]


def test_the_answer_is_openai_shaped() -> None:
    (batch,) = adapter().embed_batches(EmbedCall(texts=("hi",), dimensions=2), target())
    assert batch.request.local is not None
    ((pause, body),) = list(batch.request.local.script())
    doc: dict[str, Any] = json.loads(body)
    assert pause == 0.15  # first_token_ms, default 150
    assert doc["object"] == "list" and doc["model"] == "demo-embed"
    assert doc["usage"] == {"prompt_tokens": 1, "total_tokens": 1}
    assert [(d["object"], d["index"], len(d["embedding"])) for d in doc["data"]] == [
        ("embedding", 0, 2)
    ]


async def test_the_transport_delivers_the_whole_answer() -> None:
    call = EmbedCall(texts=tuple(f"t{i}" for i in range(40)), dimensions=64)
    (batch,) = adapter().embed_batches(call, target(options={"first_token_ms": 1}))
    assert batch.request.local is not None
    response = LocalResponse(batch.request.local.script(), asyncio.get_running_loop().time(), 60.0)
    body = await response.read_body(1 << 24)
    assert response.status == 200
    assert len(adapter().parse_embeddings(response.headers, body, batch).vectors) == 40
