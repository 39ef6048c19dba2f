"""Prometheus metrics for one gateway (``GET /metrics``), in a registry of its own.

Counted per request from its request-log row when it ends (:meth:`Metrics.ran`),
never per chunk. What is true now is read when scraped (:meth:`Metrics.scrape`):
breaker states, the requests and drains running, and the ledger's open holds, from
the store that every replica shares (one query over the open-holds index). Only
operators read them (the admin key, or ``metrics_listen``); still, accounts' own
connections are one label, ``account-owned``: their ids are theirs and unbounded in
number. Models are labelled by the model that served (catalog ids), never by what a
client asked for.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Callable, Collection, Iterator
from types import MappingProxyType
from typing import Protocol

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

from sluice.cache.flight import Flights
from sluice.cache.store import AnswerStore
from sluice.core.money import usd_from_nano
from sluice.exchange.cache_outcomes import CacheOutcomes
from sluice.exchange.metric_series import Families
from sluice.exchange.tasks import Tasks
from sluice.routing.attempts import AttemptRecord
from sluice.routing.breaker import Breaker, Circuit, State
from sluice.routing.speeds import Estimate, Speeds
from sluice.storage.base import RequestRecord

_log = logging.getLogger("sluice.server")

_STATE_VALUE = MappingProxyType({State.CLOSED: 0.0, State.HALF_OPEN: 1.0, State.OPEN: 2.0})
_REFUSALS = MappingProxyType(
    {
        "rate_limit_error": "rate_limit",
        "budget_exceeded": "budget",
        "guardrail_error": "guardrail",
        "permission_error": "permission",
    }
)
_LEDGER_TIMEOUT = 2.0  # seconds a scrape waits for the open holds before leaving them out
ACCOUNT_OWNED = "account-owned"


class Ledger(Protocol):
    """What a scrape reads from the store (:meth:`~sluice.storage.base.Store.open_holds`)."""

    async def open_holds(self) -> tuple[int, int]: ...


def breaker_states(breaker: Breaker, now: float, operators: Collection[str]) -> dict[str, float]:
    """Each operator connection's circuit state (0 closed, 1 half-open, 2 open), the
    worst of its models' circuits; the other connections (accounts' own) folded into
    one ``account-owned`` series, the worst of theirs."""
    out: dict[str, float] = {}
    for (connection, _), state in breaker.states(now).items():
        label = connection if connection in operators else ACCOUNT_OWNED
        out[label] = max(out.get(label, 0.0), _STATE_VALUE[state])
    return out


class _Stored(Collector):
    """The response cache's store and its flights, read when scraped."""

    def __init__(self, answers: AnswerStore, flights: Flights | None) -> None:
        self._answers = answers
        self._flights = flights

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        kept = self._answers.kept
        yield GaugeMetricFamily(
            "sluice_cache_entries",
            "Answers the cache keeps (a store shared through Redis: all processes', as "
            "this one last saw it).",
            kept.entries,
        )
        yield GaugeMetricFamily(
            "sluice_cache_bytes", "Bytes of the answers the cache keeps.", kept.kept_bytes
        )
        yield CounterMetricFamily(
            "sluice_cache_evictions",
            "Answers this process dropped to make room (least recently used first).",
            kept.evictions,
        )
        flights = self._flights
        if flights is not None:
            yield GaugeMetricFamily(
                "sluice_cache_flights",
                "Cacheable misses streaming now that identical requests may join.",
                len(flights),
            )
            yield GaugeMetricFamily(
                "sluice_cache_flight_joiners",
                "Requests reading another's upstream stream now (one upstream call shared).",
                flights.joiners,
            )


class _Now(Collector):
    """What is read when scraped. ``holds``: the ledger's open holds and the nano-USD
    they hold, None when the store did not answer (the two series are left out)."""

    def __init__(
        self,
        breakers: dict[str, float],
        running: tuple[int, int] | None,
        holds: tuple[int, int] | None,
        estimates: dict[Circuit, Estimate],
    ) -> None:
        self._breakers = breakers
        self._running = running
        self._holds = holds
        self._estimates = estimates

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "sluice_connection_breaker_state",
            "Circuit breaker per connection: 0 closed, 1 half-open, 2 open (skipped); "
            "accounts' own connections as one, the worst of them.",
            labels=["connection"],
        )
        for label, value in sorted(self._breakers.items()):
            family.add_metric([label], value)
        yield family
        estimate = GaugeMetricFamily(
            "sluice_ttft_estimate_seconds",
            "Moving estimate of time to first event per connection and model, from live "
            'traffic (models with balance = "fastest").',
            labels=["connection", "model"],
        )
        rate = GaugeMetricFamily(
            "sluice_tokens_per_second_estimate",
            "Moving estimate of output tokens per second after the first event per "
            'connection and model, from streams read whole (balance = "fastest").',
            labels=["connection", "model"],
        )
        for (connection, model), found in sorted(self._estimates.items()):
            if found.ttft is not None:
                estimate.add_metric([connection, model], found.ttft)
            if found.rate is not None:
                rate.add_metric([connection, model], found.rate)
        yield estimate
        yield rate
        if self._running is not None:
            requests, drains = self._running
            yield GaugeMetricFamily(
                "sluice_requests_in_flight", "Requests running now, drains included.", requests
            )
            yield GaugeMetricFamily(
                "sluice_drains_in_flight",
                "Streams read on unsent after their client left (on_disconnect = drain).",
                drains,
            )
        if self._holds is not None:
            count, nano = self._holds
            yield GaugeMetricFamily(
                "sluice_holds_open", "Credit holds open in the ledger, every replica's.", count
            )
            yield GaugeMetricFamily(
                "sluice_credits_held_usd",
                "Credits the open holds hold, in USD, every replica's.",
                usd_from_nano(nano),
            )


async def _open_holds(ledger: Ledger) -> tuple[int, int] | None:
    """The ledger's open holds, or None when the store fails or is slow: a scrape still
    answers with everything else (the outermost edge, hence the broad ``except``)."""
    try:
        async with asyncio.timeout(_LEDGER_TIMEOUT):
            return await ledger.open_holds()
    except Exception as exc:
        _log.warning("metrics: open holds not read (%s)", type(exc).__name__)
        return None


def _samples(family: Collector) -> Iterator[Sample]:
    for metric in family.collect():
        yield from metric.samples


class ConnectionStats:
    """What :meth:`Metrics.by_connection` reads for one connection."""

    __slots__ = ("attempts", "failed", "ttft_count", "ttft_seconds")

    def __init__(self) -> None:
        self.attempts = self.failed = self.ttft_count = 0
        self.ttft_seconds = 0.0

    @property
    def mean_ttft_ms(self) -> float | None:
        return self.ttft_seconds / self.ttft_count * 1000 if self.ttft_count else None


_NOT_FAILED = frozenset({"served", "hedge_lost"})
"""Attempt outcomes that are no failover (a hedge's race decided before the end)."""


class Metrics:
    """The process's metrics as one config labels them: ``operators`` are the ids of
    the operator's connections, the ones labelled by id. A reload relabels
    (:meth:`relabelled`); the series carry on."""

    __slots__ = (
        "_answers",
        "_families",
        "_flights",
        "_operators",
        "_speeds",
        "cache_outcomes",
        "streams",
    )

    def __init__(
        self,
        breaker: Breaker,
        clock: Callable[[], float],
        operators: Collection[str],
        speeds: Speeds | None = None,
        answers: AnswerStore | None = None,
        *,
        flights: Flights | None = None,
    ) -> None:
        self._families = Families(breaker, clock)
        self._operators = operators
        self._speeds = speeds
        self._answers = answers
        self._flights = flights
        self.streams = self._families.streams
        self.cache_outcomes = CacheOutcomes()
        """The cache's requests by outcome, as ``sluice_cache_requests_total`` counts them."""

    def relabelled(self, operators: Collection[str]) -> Metrics:
        """The same series, labelled for another config's connections."""
        other = copy.copy(self)
        other._operators = operators
        return other

    def _connection(self, conn: str) -> str:
        return conn if conn in self._operators else ACCOUNT_OWNED

    def request(self, path: str, status: int, attempts: list[AttemptRecord]) -> None:
        families = self._families
        families.requests(path, str(status)).inc()
        for attempt in attempts:
            families.attempts(self._connection(attempt.connection), attempt.outcome).inc()

    def ran(self, record: RequestRecord) -> None:
        """A request that went through an exchange: what served it, its tokens, its cost,
        why it was refused, failed over, cancelled, drained or blocked. Labels are
        bounded: models served (from the catalog), provider kinds, operators' connection
        ids, the config's guardrail names."""
        model = record.served_model or "none"
        conn = record.connection or "none"
        connection = "none" if conn == "none" else self._connection(conn)
        self._served(record, (record.front_door, model, record.provider or "none", connection))
        self._used(record, model)
        self._events(record)

    def _served(self, record: RequestRecord, served: tuple[str, str, str, str]) -> None:
        families = self._families
        families.answered(*served, record.status).inc()
        families.duration(*served).observe(record.duration_ms / 1000)
        if record.cache == "hit":
            return  # a replay's pace is not the connection's
        if record.ttft_ms is not None and record.served_model is not None:
            families.served_ttft(*served).observe(record.ttft_ms / 1000)
        if record.tokens_per_second is not None:
            families.rate(*served).observe(record.tokens_per_second)

    def _used(self, record: RequestRecord, model: str) -> None:
        families = self._families
        for kind, count in (
            ("prompt", record.prompt_tokens),
            ("completion", record.completion_tokens),
            ("cached", record.cached_tokens),
        ):
            if count:
                families.tokens(model, kind).inc(count)
        if record.cost:
            families.cost(model).inc(record.cost)

    def _events(self, record: RequestRecord) -> None:
        """Refusals, failovers (every attempt but the last), a client leaving, blocks."""
        families = self._families
        reason = _REFUSALS.get(record.error_type or "")
        if reason is not None and not record.attempts:
            families.refused(reason).inc()
        hedged = won = False
        last = len(record.attempts) - 1
        for i, attempt in enumerate(record.attempts):
            if attempt.get("hedge"):
                hedged = True
                won = won or attempt["outcome"] == "served"
            elif i < last and attempt["outcome"] not in _NOT_FAILED:
                families.failovers(self._connection(str(attempt["connection"]))).inc()
        if hedged:
            families.hedges("fired").inc()
            if won:
                families.hedges("won").inc()
        if record.disconnect == "cancel":
            families.cancellations.inc()
        elif record.disconnect == "drain":
            families.drains.inc()
        if record.cache is not None:
            families.cache(record.cache).inc()
            self.cache_outcomes.count(record.cache)
        for note in record.guardrails:
            if note["outcome"] == "blocked":
                families.blocks(note["name"], note["stage"]).inc()

    def cache_embedded(self, model: str, seconds: float, tokens: int | None) -> None:
        """A semantic cache's embedding call by ``model`` (a catalog id): how long it
        took, and the tokens it spent (None: it failed)."""
        families = self._families
        families.embedding("failed" if tokens is None else "embedded").observe(seconds)
        if tokens:
            families.embedding_tokens(model).inc(tokens)

    def refusal(self, error_type: str) -> None:
        """A call refused before an exchange took it (past its request limit)."""
        reason = _REFUSALS.get(error_type)
        if reason is not None:
            self._families.refused(reason).inc()

    def by_connection(self) -> dict[str, ConnectionStats]:
        """Per connection label, since the process started: upstream attempts (a
        skipped one is none), those that failed, the mean time to first token served."""
        families = self._families
        stats: dict[str, ConnectionStats] = {}
        for sample in _samples(families.attempts.family):
            conn, outcome = sample.labels["connection"], sample.labels["outcome"]
            if not sample.name.endswith("_total") or outcome == "skipped":
                continue
            seen = stats.setdefault(conn, ConnectionStats())
            seen.attempts += int(sample.value)
            seen.failed += 0 if outcome == "served" else int(sample.value)
        for sample in _samples(families.served_ttft.family):
            seen = stats.setdefault(sample.labels["connection"], ConnectionStats())
            if sample.name.endswith("_sum"):
                seen.ttft_seconds += sample.value
            elif sample.name.endswith("_count"):
                seen.ttft_count += int(sample.value)
        return stats

    def first_token(self, seconds: float) -> None:
        self._families.ttft.observe(seconds)

    def render(self) -> bytes:
        """Every series, then the breaker states as this config labels them (no I/O;
        :meth:`scrape` adds the requests running and the ledger's open holds)."""
        return self._rendered(None, None)

    async def scrape(self, ledger: Ledger, tasks: Tasks) -> bytes:
        """:meth:`render` with the tasks' counts and the ledger's open holds, read now
        (one indexed query; left out when the store does not answer)."""
        holds = await _open_holds(ledger)
        return self._rendered(tasks.counts(), holds)

    def _rendered(self, running: tuple[int, int] | None, holds: tuple[int, int] | None) -> bytes:
        families = self._families
        breakers = breaker_states(families.breaker, families.clock(), self._operators)
        now = CollectorRegistry(auto_describe=False)
        speeds = {} if self._speeds is None else self._speeds.estimates()
        estimates = {c: v for c, v in speeds.items() if c[0] in self._operators}
        now.register(_Now(breakers, running, holds, estimates))
        if self._answers is not None:
            now.register(_Stored(self._answers, self._flights))
        return generate_latest(families.registry) + generate_latest(now)
