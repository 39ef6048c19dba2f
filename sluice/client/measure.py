"""Per-model figures from many stream results, for ``sluice bench`` (pure)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from msgspec import Struct

from sluice.client.events import StreamResult


class Sample(Struct, frozen=True):
    state: str
    ttft: float | None
    tokens_per_second: float | None
    cost: float | None
    error: str | None = None


class ModelSummary(Struct, frozen=True, kw_only=True):
    """Percentiles over the requests that produced the figure (an errored request has
    no TTFT); ``cost_per_request`` averages the priced requests."""

    model: str
    requests: int
    ok: int
    ttft_p50: float | None
    ttft_p90: float | None
    tokens_per_second_p50: float | None
    tokens_per_second_p90: float | None
    cost_per_request: float | None
    samples: tuple[Sample, ...]


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default); ``q`` in [0, 100]."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def sample(result: StreamResult) -> Sample:
    error = result.error
    label = None if error is None or result.ok else f"{error.type}: {error.message}"
    return Sample(result.state, result.ttft, result.tokens_per_second, result.cost, label)


def summarize(model: str, samples: Sequence[Sample]) -> ModelSummary:
    ttfts = [s.ttft for s in samples if s.ttft is not None]
    rates = [s.tokens_per_second for s in samples if s.tokens_per_second is not None]
    costs = [s.cost for s in samples if s.cost is not None]
    return ModelSummary(
        model=model,
        requests=len(samples),
        ok=sum(s.state in ("complete", "truncated") for s in samples),
        ttft_p50=percentile(ttfts, 50),
        ttft_p90=percentile(ttfts, 90),
        tokens_per_second_p50=percentile(rates, 50),
        tokens_per_second_p90=percentile(rates, 90),
        cost_per_request=sum(costs) / len(costs) if costs else None,
        samples=tuple(samples),
    )
