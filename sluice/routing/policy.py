"""Ordering connections by weight (pure: the random source is passed in)."""

from __future__ import annotations

from collections.abc import Sequence
from random import Random
from typing import TypeVar

_T = TypeVar("_T")


def weighted_order(items: Sequence[_T], weights: Sequence[float], rng: Random) -> list[_T]:
    """A random order where each item comes first with probability weight / total.

    Weighted sampling without replacement (Efraimidis and Spirakis): every item gets the key
    ``u ** (1 / weight)`` for a uniform ``u``, largest key first. Failover then walks the
    whole list, so every connection is still tried.
    """
    keyed = [(rng.random() ** (1.0 / w), i) for i, w in enumerate(weights)]
    keyed.sort(reverse=True)
    return [items[i] for _, i in keyed]
