"""How fast each (connection, model) opens a stream, from live traffic, for models with
``balance = "fastest"`` (docs/api.md#the-fastest-connection-first).

An attempt that opened (its first event) adds its time to first event to a moving
average per circuit, one that ended without (failed, timed out, lost a hedge) its time
so far when that is longer; connections of a ``fastest`` model are then tried quickest
estimate first, one never seen first of all (so each is measured), and on a small
share of streams in a random order, so a connection that recovered is seen again.
Per process; kept across reloads, as the breaker's circuits are.
"""

from __future__ import annotations

from collections.abc import Sequence
from random import Random
from typing import TypeVar

from sluice.routing.breaker import Circuit

WEIGHT = 0.3
"""The newest time's weight in the moving average (older ones fade by 0.7 each)."""
EXPLORE = 0.05
"""The share of streams whose connections are tried in a random order."""

_T = TypeVar("_T")


class Speeds:
    __slots__ = ("_ttft",)

    def __init__(self) -> None:
        self._ttft: dict[Circuit, float] = {}

    def opened(self, circuit: Circuit, seconds: float) -> None:
        """An attempt on ``circuit`` produced its first event ``seconds`` after it began."""
        known = self._ttft.get(circuit)
        self._ttft[circuit] = seconds if known is None else known + WEIGHT * (seconds - known)

    def no_sooner_than(self, circuit: Circuit, seconds: float) -> None:
        """An attempt on ``circuit`` ended without its first event after ``seconds``
        (failed, timed out, cancelled): a lower bound, counted when it is above the
        estimate, so a connection that stopped answering loses its place."""
        known = self._ttft.get(circuit)
        if known is None or seconds > known:
            self.opened(circuit, seconds)

    def estimate(self, circuit: Circuit) -> float | None:
        """Seconds to first event as the moving average has it; None before any."""
        return self._ttft.get(circuit)

    def estimates(self) -> dict[Circuit, float]:
        return dict(self._ttft)

    def fastest_first(
        self, attempts: Sequence[_T], circuits: Sequence[Circuit], rng: Random
    ) -> list[_T]:
        """``attempts`` (one position's, ``circuits`` theirs) quickest estimate first, an
        unmeasured one before all; on :data:`EXPLORE` of calls, shuffled."""
        order = list(range(len(attempts)))
        if rng.random() < EXPLORE:
            rng.shuffle(order)
        else:
            order.sort(key=lambda i: self._ttft.get(circuits[i], -1.0))
        return [attempts[i] for i in order]
