"""The semantic lookup's store round trips (sluice/exchange/semantic.py): a vector whose
answer is gone is forgotten, so answers that expired do not keep a live one from being
tried; one a store out of reach cannot give now is kept for later."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from sluice.cache.semantic import Probe, VectorIndex
from sluice.cache.store import AnswerStore
from sluice.config import CacheConfig
from sluice.exchange.cached import CacheNote
from sluice.exchange.semantic import TRIES, _nearest
from sluice.routing.plan import Plan
from tests.cache.test_store import answer

PROBE = Probe("semantic-key", [1.0, 0.0], 1.0)


def index_with_stale_answers() -> VectorIndex:
    """``TRIES`` vectors nearer the probe than the one live answer's, their answers gone."""
    vectors = VectorIndex(1 << 20)
    for n in range(TRIES):
        vectors.add(Probe(PROBE.key, [1.0, 0.01 * n], 1.0), f"stale-{n}")
    vectors.add(Probe(PROBE.key, [1.0, 0.2], 1.0), "live")
    return vectors


async def looked(store: AnswerStore, vectors: VectorIndex) -> None:
    services = cast(Any, SimpleNamespace(answers=store, vectors=vectors))
    note = CacheNote("miss", CacheConfig(), "exact-key")
    await _nearest(services, cast(Plan, SimpleNamespace(attempts=())), note, PROBE, 0.5)


async def test_vectors_of_answers_gone_are_forgotten() -> None:
    store = AnswerStore.in_memory(1 << 20, 1 << 20, lambda: 0.0)
    store.put("live", answer("x"), ttl=60)
    vectors = index_with_stale_answers()
    await looked(store, vectors)
    assert [key for _, key in vectors.nearest(PROBE, 0.5)] == ["live"]


async def test_a_store_out_of_reach_forgets_nothing() -> None:
    store = AnswerStore.in_memory(1 << 20, 1 << 20, lambda: 0.0)
    store.kept = cast(Any, SimpleNamespace(reachable=False, get=_nothing, kind="test"))
    vectors = index_with_stale_answers()
    await looked(store, vectors)
    assert len(vectors) == TRIES + 1


async def _nothing(key: str) -> None:
    return None
