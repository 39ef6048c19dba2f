"""The response cache's requests by outcome since the process started, counted where
:class:`~sluice.exchange.metrics.Metrics` counts their Prometheus series, so
``GET /admin/cache`` reads plain numbers, not the client library's samples."""

from __future__ import annotations


class CacheOutcomes:
    """Requests for a cached model: ``hit``, ``miss``, ``bypass`` (docs/cache.md)."""

    __slots__ = ("bypass", "hit", "miss")

    def __init__(self) -> None:
        self.hit = self.miss = self.bypass = 0

    def count(self, outcome: str) -> None:
        if outcome == "hit":
            self.hit += 1
        elif outcome == "miss":
            self.miss += 1
        elif outcome == "bypass":
            self.bypass += 1

    @property
    def hit_ratio(self) -> float | None:
        """Hits over hits and misses (a bypass neither reads nor fills); None before any."""
        looked_up = self.hit + self.miss
        return self.hit / looked_up if looked_up else None
