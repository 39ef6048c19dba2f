"""The semantic cache's pure part (docs/cache.md#semantic-cache): which requests it may
serve, what must be the same for a hit (everything but the last user turn), and the
bounded index of vectors, compared by honest cosine similarity."""

from __future__ import annotations

import math
from typing import Any

import msgspec
import pytest

from sluice.cache.semantic import PER_KEY, Probe, VectorIndex, last_turn, semantic_key
from sluice.config import SemanticConfig
from sluice.wire.chat import ChatRequest
from tests.cache.test_key import BASE, PLAN

SEMANTIC = SemanticConfig("sluice/demo-embed", 0.9)
TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
USER = {"role": "user", "content": "Hi"}
IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}


def request(**extra: Any) -> ChatRequest:
    return msgspec.json.decode(msgspec.json.encode(BASE | extra), type=ChatRequest)


def asked(text: str | list[Any], **extra: Any) -> ChatRequest:
    return request(messages=[{"role": "user", "content": text}], **extra)


def skey(req: ChatRequest, scope: str = "acct_1", semantic: SemanticConfig = SEMANTIC) -> str:
    return semantic_key(req, PLAN, scope, semantic)


@pytest.mark.parametrize(
    ("req", "semantic", "text"),
    [
        (asked("What is it?"), SEMANTIC, "What is it?"),
        (
            asked([{"type": "text", "text": "What "}, {"type": "text", "text": "is it?"}]),
            SEMANTIC,
            "What is it?",
        ),
        (asked([{"type": "text", "text": "What is this?"}, IMAGE]), SEMANTIC, None),
        (asked("  "), SEMANTIC, None),
        (asked("What is it?", tools=[TOOL]), SEMANTIC, None),
        (asked("What is it?", tools=[TOOL]), SemanticConfig("e", tools=True), "What is it?"),
        (request(messages=[USER, {"role": "assistant", "content": "Hello"}]), SEMANTIC, None),
    ],
    ids=["text", "text-parts", "image", "blank", "tools", "tools-allowed", "ends-assistant"],
)
def test_which_requests_the_semantic_cache_may_serve(
    req: ChatRequest, semantic: SemanticConfig, text: str | None
) -> None:
    assert last_turn(req, semantic) == text


def test_the_semantic_key_leaves_out_the_last_turn_alone() -> None:
    first, other = asked("What is the capital of France?"), asked("Tell me France's capital")
    assert skey(first) == skey(other)
    assert skey(first) != skey(asked("What is the capital of France?", temperature=0.2))
    assert skey(first) != skey(first, scope="acct_2")
    assert skey(first) != skey(first, semantic=SemanticConfig("other/embed"))
    earlier = request(messages=[USER, *BASE["messages"]])
    assert skey(first) != skey(earlier)


def unit(*xs: float) -> list[float]:
    norm = math.sqrt(sum(x * x for x in xs))
    return [x / norm for x in xs]


def test_nearest_is_the_cosine_at_or_above_the_threshold_most_similar_first() -> None:
    index = VectorIndex(10_000)
    index.add(Probe("k", [1.0, 0.0], 0.0), "near")
    index.add(Probe("k", [3.0, 4.0], 0.0), "far")  # not normalized: the cosine is honest
    index.add(Probe("other", [1.0, 0.0], 0.0), "elsewhere")
    found = index.nearest(Probe("k", [2.0, 0.2], 0.0), threshold=0.5)
    assert [answer for _, answer in found] == ["near", "far"]
    assert found[0][0] == pytest.approx(2.0 / math.hypot(2.0, 0.2))
    assert found[1][0] == pytest.approx((6.0 + 0.8) / (5 * math.hypot(2.0, 0.2)))
    assert index.nearest(Probe("k", [2.0, 0.2], 0.0), threshold=0.9) == [found[0]]
    assert index.nearest(Probe("k", [0.0, 1.0, 0.0], 0.0), threshold=0.0) == []  # other length


def test_the_index_is_bounded_in_bytes_and_per_key() -> None:
    one = 2 * 8 + 64
    index = VectorIndex(3 * one)
    for i in range(4):
        index.add(Probe(f"k{i}", unit(1.0, i), 0.0), f"a{i}")
    assert len(index) == 3 and index.bytes == 3 * one
    assert index.nearest(Probe("k0", [1.0, 0.0], 0.0), 0.0) == []  # least recent out
    roomy = VectorIndex(10**6)
    for i in range(PER_KEY + 1):
        roomy.add(Probe("k", unit(1.0, i), 0.0), f"a{i}")
    kept = {answer for _, answer in roomy.nearest(Probe("k", [1.0, 0.0], 0.0), -1.0)}
    assert len(kept) == PER_KEY and "a0" not in kept


def test_one_answer_has_one_vector_and_a_forgotten_one_none() -> None:
    index = VectorIndex(10_000)
    index.add(Probe("k", [1.0, 0.0], 0.0), "a")
    index.add(Probe("k", [0.0, 1.0], 0.0), "a")  # the answer kept again: its new vector
    assert index.nearest(Probe("k", [0.0, 1.0], 0.0), 0.5) == [(1.0, "a")]
    assert len(index) == 1
    index.forget("k", "a")
    assert len(index) == 0 and index.bytes == 0
