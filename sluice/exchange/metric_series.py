"""The process's Prometheus series (:class:`Families`), declared once per process and
counted by :class:`~sluice.exchange.metrics.Metrics`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from sluice.routing.breaker import Breaker

_TTFT_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)
_EMBEDDING_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
_RATE_BUCKETS = (1.0, 5.0, 10.0, 20.0, 40.0, 60.0, 100.0, 150.0, 250.0, 500.0, 1000.0)
_Family = TypeVar("_Family", Counter, Histogram)


class Labelled(Generic[_Family]):
    """A labelled series and its children by label values, each looked up in the
    library once: ``labels()`` checks and copies its arguments under a lock, which cost
    more than the count itself, several times for every request (py-spy)."""

    __slots__ = ("_children", "family")

    def __init__(self, family: _Family) -> None:
        self.family: _Family = family
        self._children: dict[tuple[str, ...], _Family] = {}

    def __call__(self, *values: str) -> _Family:
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = self.family.labels(*values)
        return child


class Families:
    """The registry and its series: one per process, whatever the config."""

    def __init__(self, breaker: Breaker, clock: Callable[[], float]) -> None:
        self.breaker = breaker
        self.clock = clock
        self.registry = CollectorRegistry()
        self.requests = Labelled(
            Counter(
                "sluice_requests",
                "Requests answered, by path and HTTP status (499: client gone).",
                ["path", "status"],
                registry=self.registry,
            )
        )
        self.attempts = Labelled(
            Counter(
                "sluice_upstream_attempts",
                "Upstream attempts by connection and outcome.",
                ["connection", "outcome"],
                registry=self.registry,
            )
        )
        self.streams = Gauge(
            "sluice_streams_in_flight", "Streams being relayed now.", registry=self.registry
        )
        self.ttft = Histogram(
            "sluice_time_to_first_token_seconds",
            "From the request's arrival to its first content event.",
            buckets=_TTFT_BUCKETS,
            registry=self.registry,
        )
        served = ["front_door", "model", "provider", "connection"]
        self.answered = Labelled(
            Counter(
                "sluice_model_requests",
                "Requests that ran, by front door, the model that served them (none: no model "
                "served), its provider and connection, and outcome.",
                [*served, "outcome"],
                registry=self.registry,
            )
        )
        self.duration = Labelled(
            Histogram(
                "sluice_request_duration_seconds",
                "From a request's arrival to its end, by what served it.",
                served,
                buckets=_TTFT_BUCKETS,
                registry=self.registry,
            )
        )
        self.served_ttft = Labelled(
            Histogram(
                "sluice_served_time_to_first_token_seconds",
                "Time to first token of the requests that got one, by what served them.",
                served,
                buckets=_TTFT_BUCKETS,
                registry=self.registry,
            )
        )
        self.rate = Labelled(
            Histogram(
                "sluice_tokens_per_second",
                "Streamed completion tokens per second after the first, by what served them.",
                served,
                buckets=_RATE_BUCKETS,
                registry=self.registry,
            )
        )
        self.tokens = Labelled(
            Counter(
                "sluice_tokens",
                "Tokens by model and kind (prompt, completion, cached: part of prompt).",
                ["model", "kind"],
                registry=self.registry,
            )
        )
        self.cost = Labelled(
            Counter(
                "sluice_cost_usd",
                "What the requests cost, by model.",
                ["model"],
                registry=self.registry,
            )
        )
        self.refused = Labelled(
            Counter(
                "sluice_refusals",
                "Requests refused before any upstream call, by reason (rate_limit, budget, "
                "guardrail, permission).",
                ["reason"],
                registry=self.registry,
            )
        )
        self.failovers = Labelled(
            Counter(
                "sluice_failovers",
                "Attempts a request moved on from to its plan's next (failed before the "
                "first event, or skipped by the breaker), by their connection.",
                ["connection"],
                registry=self.registry,
            )
        )
        self.cancellations = Counter(
            "sluice_cancellations",
            "Requests whose client left, their upstream call cancelled.",
            registry=self.registry,
        )
        self.drains = Counter(
            "sluice_drains",
            "Requests whose client left mid-stream, the rest read on unsent (ended drains).",
            registry=self.registry,
        )
        self.hedges = Labelled(
            Counter(
                "sluice_hedges",
                "Streams that started their next attempt beside a slow one (hedge_after_ms): "
                "fired, and won by the hedge.",
                ["outcome"],
                registry=self.registry,
            )
        )
        self.cache = Labelled(
            Counter(
                "sluice_cache_requests",
                "Requests for a model with a cache, by outcome: hit, miss, bypass.",
                ["outcome"],
                registry=self.registry,
            )
        )
        self.embedding = Labelled(
            Histogram(
                "sluice_cache_embedding_seconds",
                "The semantic cache's embedding calls, by outcome: embedded, failed.",
                ["outcome"],
                buckets=_EMBEDDING_BUCKETS,
                registry=self.registry,
            )
        )
        self.embedding_tokens = Labelled(
            Counter(
                "sluice_cache_embedding_tokens",
                "Tokens the semantic cache's embedding calls spent, by embedding model: "
                "the operator's cost, charged to no account.",
                ["model"],
                registry=self.registry,
            )
        )
        self.blocks = Labelled(
            Counter(
                "sluice_guardrail_blocks",
                "Requests a guardrail blocked, by guardrail and stage (input, output).",
                ["guardrail", "stage"],
                registry=self.registry,
            )
        )
