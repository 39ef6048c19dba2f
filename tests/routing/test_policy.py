from __future__ import annotations

from collections import Counter
from random import Random

from sluice.routing.policy import weighted_order


def test_first_choice_follows_the_weights_and_every_item_stays() -> None:
    rng = Random(7)
    firsts: Counter[str] = Counter()
    for _ in range(20_000):
        order = weighted_order(["a", "b", "c"], [1.0, 3.0, 6.0], rng)
        assert sorted(order) == ["a", "b", "c"]
        firsts[order[0]] += 1
    share = {k: v / 20_000 for k, v in firsts.items()}
    assert abs(share["a"] - 0.1) < 0.015
    assert abs(share["b"] - 0.3) < 0.015
    assert abs(share["c"] - 0.6) < 0.015
