"""How fast each (connection, model) answers, from live traffic, for models with
``balance = "fastest"`` (docs/api.md#the-fastest-connection-first).

Per circuit, two moving averages: time to first event (an attempt that opened adds
its time, one that failed :data:`FAILED` seconds or its time if longer, one that lost
a hedge or was cancelled its time so far when that is longer) and, from streams read
whole, output tokens per second after the first event; per model, a third: the
answer's length in output tokens. A fastest
model's connections are tried soonest expected end first: the time to first event,
plus, once every one of them has a rate, the expected length (the model's average, at
most the request's own output cap) over its rate; short answers go to the quickest to
open, long ones to the quickest to finish. A connection never measured goes first (so
each is measured), and a small share of calls try them in a random order, so one that
recovered is seen again. Per process, kept across reloads as the breaker's circuits
are; with ``[limits] redis_url`` every process also averages in the others' estimates
(:mod:`.speed_share`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from random import Random
from typing import TypeVar

import msgspec

from sluice.routing.breaker import Circuit

WEIGHT = 0.3
"""The newest value's weight in each moving average (older ones fade by 0.7 each)."""
EXPLORE = 0.05
"""The share of calls whose connections are tried in a random order."""
RATE_TOKENS = 16
"""Fewer output tokens than this say too little about a rate to count."""
FAILED = 5.0
"""Seconds to first event a failed attempt counts as (its own time when longer)."""

_T = TypeVar("_T")


class Estimate(msgspec.Struct, array_like=True, frozen=True):
    """One circuit's averages as one process has them (None: not measured)."""

    ttft: float | None = None
    rate: float | None = None
    """Output tokens per second after the first event."""


def _moved(known: float | None, value: float) -> float:
    return value if known is None else known + WEIGHT * (value - known)


class Speeds:
    """The moving averages of this process, and the other processes' as last told."""

    __slots__ = ("_lengths", "_others", "_others_lengths", "_own")

    def __init__(self) -> None:
        self._own: dict[Circuit, Estimate] = {}
        self._lengths: dict[str, float] = {}
        """Output tokens of a model's answers read whole, by model."""
        self._others: dict[Circuit, tuple[Estimate, ...]] = {}
        self._others_lengths: dict[str, tuple[float, ...]] = {}

    def opened(self, circuit: Circuit, seconds: float) -> None:
        """An attempt on ``circuit`` produced its first event ``seconds`` after it began."""
        own = self._own.get(circuit, Estimate())
        self._own[circuit] = msgspec.structs.replace(own, ttft=_moved(own.ttft, seconds))

    def no_sooner_than(self, circuit: Circuit, seconds: float) -> None:
        """An attempt on ``circuit`` ended without its first event after ``seconds``
        (failed, timed out, cancelled): a lower bound, counted when it is above the
        estimate, so a connection that stopped answering loses its place."""
        known = self._own.get(circuit, Estimate()).ttft
        if known is None or seconds > known:
            self.opened(circuit, seconds)

    def failed(self, circuit: Circuit, seconds: float) -> None:
        """An attempt on ``circuit`` failed after ``seconds``: counted as :data:`FAILED`
        seconds at least, so a connection that fails fast does not look fast."""
        self.opened(circuit, max(seconds, FAILED))

    def streamed(self, circuit: Circuit, tokens: int, seconds: float) -> None:
        """A stream on ``circuit`` was read whole: ``tokens`` output tokens in the
        ``seconds`` after its first event."""
        model = circuit[1]
        self._lengths[model] = _moved(self._lengths.get(model), tokens)
        if tokens >= RATE_TOKENS and seconds > 0:
            own = self._own.get(circuit, Estimate())
            self._own[circuit] = Estimate(own.ttft, _moved(own.rate, tokens / seconds))

    def estimate(self, circuit: Circuit) -> float | None:
        """Seconds to first event, this process's average with the others'."""
        return self._merged(circuit).ttft

    def rate(self, circuit: Circuit) -> float | None:
        """Output tokens per second, this process's average with the others'."""
        return self._merged(circuit).rate

    def estimates(self) -> dict[Circuit, Estimate]:
        """Every circuit measured here or elsewhere, merged."""
        return {c: self._merged(c) for c in self._own.keys() | self._others.keys()}

    def length(self, model: str) -> float | None:
        """Output tokens of ``model``'s answers, this process's average with the others'."""
        known = self._lengths.get(model)
        return _mean((*self._others_lengths.get(model, ()), known))

    def own(self) -> tuple[dict[Circuit, Estimate], dict[str, float]]:
        """This process's averages alone (what it shares): by circuit, and each model's
        answer length."""
        return dict(self._own), dict(self._lengths)

    def share(
        self,
        others: dict[Circuit, tuple[Estimate, ...]],
        lengths: dict[str, tuple[float, ...]] | None = None,
    ) -> None:
        """The other processes' averages, replacing those told before."""
        self._others = others
        self._others_lengths = lengths or {}

    def fastest_first(
        self,
        attempts: Sequence[_T],
        circuits: Sequence[Circuit],
        rng: Random,
        ceiling: int | None = None,
    ) -> list[_T]:
        """``attempts`` (one position's, ``circuits`` theirs) soonest expected end
        first for an answer of at most ``ceiling`` output tokens, an unmeasured one
        before all; on :data:`EXPLORE` of calls, shuffled."""
        order = list(range(len(attempts)))
        if rng.random() < EXPLORE:
            rng.shuffle(order)
        else:
            order.sort(key=self._ends(circuits, ceiling).__getitem__)
        return [attempts[i] for i in order]

    def _ends(self, circuits: Sequence[Circuit], ceiling: int | None) -> list[float]:
        """Each circuit's expected seconds to the answer's end (-1: never measured)."""
        merged = [self._merged(c) for c in circuits]
        length = _mean(self.length(c[1]) for c in circuits) or 0.0
        if ceiling is not None:
            length = min(length, ceiling)
        by_rate = length > 0 and all(e.rate for e in merged)
        return [
            -1.0 if e.ttft is None else e.ttft + (length / e.rate if by_rate and e.rate else 0)
            for e in merged
        ]

    def _merged(self, circuit: Circuit) -> Estimate:
        own = self._own.get(circuit)
        every = (*self._others.get(circuit, ()), *(() if own is None else (own,)))
        return Estimate(_mean(e.ttft for e in every), _mean(e.rate for e in every))


def _mean(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None
