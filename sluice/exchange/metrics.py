"""Prometheus metrics for one gateway (``GET /metrics``), in a registry of its own.

Counted per request, never per chunk. Breaker states are read when scraped. Only
operators read them (the admin key, or ``metrics_listen``); still, accounts' own
connections are one label, ``account-owned``: their ids are theirs and unbounded in
number. Models are labelled by the model that served (catalog ids), never by what a
client asked for.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Collection, Iterator
from types import MappingProxyType

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from sluice.routing.breaker import Breaker, State
from sluice.routing.router import AttemptRecord
from sluice.storage.base import RequestRecord

_STATE_VALUE = MappingProxyType({State.CLOSED: 0.0, State.HALF_OPEN: 1.0, State.OPEN: 2.0})
_TTFT_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)
_RATE_BUCKETS = (1.0, 5.0, 10.0, 20.0, 40.0, 60.0, 100.0, 150.0, 250.0, 500.0, 1000.0)
_REFUSALS = MappingProxyType(
    {
        "rate_limit_error": "rate_limit",
        "budget_exceeded": "budget",
        "guardrail_error": "guardrail",
        "permission_error": "permission",
    }
)
ACCOUNT_OWNED = "account-owned"


class _BreakerCollector(Collector):
    def __init__(
        self, breaker: Breaker, clock: Callable[[], float], operators: Collection[str]
    ) -> None:
        self._breaker = breaker
        self._clock = clock
        self._operators = operators

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "sluice_connection_breaker_state",
            "Circuit breaker per connection: 0 closed, 1 half-open, 2 open (skipped).",
            labels=["connection"],
        )
        for key, state in sorted(self._breaker.states(self._clock()).items()):
            if key in self._operators:
                family.add_metric([key], _STATE_VALUE[state])
        yield family


class _Families:
    """The registry and its series: one per process, whatever the config."""

    def __init__(self, breaker: Breaker, clock: Callable[[], float]) -> None:
        self.breaker = breaker
        self.clock = clock
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "sluice_requests",
            "Requests answered, by path and HTTP status (499: client gone).",
            ["path", "status"],
            registry=self.registry,
        )
        self.attempts = Counter(
            "sluice_upstream_attempts",
            "Upstream attempts by connection and outcome.",
            ["connection", "outcome"],
            registry=self.registry,
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
        self.answered = Counter(
            "sluice_model_requests",
            "Requests that ran, by front door, the model that served them (none: no model "
            "served), its provider and connection, and outcome.",
            [*served, "outcome"],
            registry=self.registry,
        )
        self.duration = Histogram(
            "sluice_request_duration_seconds",
            "From a request's arrival to its end, by what served it.",
            served,
            buckets=_TTFT_BUCKETS,
            registry=self.registry,
        )
        self.served_ttft = Histogram(
            "sluice_served_time_to_first_token_seconds",
            "Time to first token of the requests that got one, by what served them.",
            served,
            buckets=_TTFT_BUCKETS,
            registry=self.registry,
        )
        self.rate = Histogram(
            "sluice_tokens_per_second",
            "Streamed completion tokens per second after the first, by what served them.",
            served,
            buckets=_RATE_BUCKETS,
            registry=self.registry,
        )
        self.tokens = Counter(
            "sluice_tokens",
            "Tokens by model and kind (prompt, completion, cached: part of prompt).",
            ["model", "kind"],
            registry=self.registry,
        )
        self.cost = Counter(
            "sluice_cost_usd",
            "What the requests cost, by model.",
            ["model"],
            registry=self.registry,
        )
        self.refused = Counter(
            "sluice_refusals",
            "Requests refused before any upstream call, by reason (rate_limit, budget, "
            "guardrail, permission).",
            ["reason"],
            registry=self.registry,
        )


class Metrics:
    """The process's metrics as one config labels them: ``operators`` are the ids of
    the operator's connections, the ones labelled by id. A reload relabels
    (:meth:`relabelled`); the series carry on."""

    __slots__ = ("_families", "_operators", "streams")

    def __init__(
        self, breaker: Breaker, clock: Callable[[], float], operators: Collection[str]
    ) -> None:
        self._families = _Families(breaker, clock)
        self._operators = operators
        self.streams = self._families.streams

    def relabelled(self, operators: Collection[str]) -> Metrics:
        """The same series, labelled for another config's connections."""
        other = copy.copy(self)
        other._operators = operators
        return other

    def request(self, path: str, status: int, attempts: list[AttemptRecord]) -> None:
        families = self._families
        families.requests.labels(path, str(status)).inc()
        for attempt in attempts:
            conn = attempt.connection
            label = conn if conn in self._operators else ACCOUNT_OWNED
            families.attempts.labels(label, attempt.outcome).inc()

    def ran(self, record: RequestRecord) -> None:
        """A request that went through an exchange: what served it, its tokens, its cost,
        or why it was refused. Labels are bounded: models served (from the catalog),
        provider kinds, operators' connection ids."""
        families = self._families
        model = record.served_model or "none"
        conn = record.connection or "none"
        connection = conn if conn in self._operators or conn == "none" else ACCOUNT_OWNED
        served = (record.front_door, model, record.provider or "none", connection)
        families.answered.labels(*served, record.status).inc()
        families.duration.labels(*served).observe(record.duration_ms / 1000)
        if record.ttft_ms is not None and record.served_model is not None:
            families.served_ttft.labels(*served).observe(record.ttft_ms / 1000)
        if record.tokens_per_second is not None:
            families.rate.labels(*served).observe(record.tokens_per_second)
        for kind, count in (
            ("prompt", record.prompt_tokens),
            ("completion", record.completion_tokens),
            ("cached", record.cached_tokens),
        ):
            if count:
                families.tokens.labels(model, kind).inc(count)
        if record.cost:
            families.cost.labels(model).inc(record.cost)
        reason = _REFUSALS.get(record.error_type or "")
        if reason is not None and not record.attempts:
            families.refused.labels(reason).inc()

    def first_token(self, seconds: float) -> None:
        self._families.ttft.observe(seconds)

    def render(self) -> bytes:
        """Every series, then the breaker states as this config labels them."""
        families = self._families
        breakers = CollectorRegistry(auto_describe=False)
        breakers.register(_BreakerCollector(families.breaker, families.clock, self._operators))
        return generate_latest(families.registry) + generate_latest(breakers)
