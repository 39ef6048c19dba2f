"""The composition root: :func:`create_app` builds every part of a gateway from its
settings; nothing else constructs them. The parts a config decides form a
:class:`~.generation.Generation`, which a reload builds anew and swaps in whole; the
parts the process holds for its lifetime are built once and shared."""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from random import Random
from typing import TYPE_CHECKING

import msgspec

from sluice import __version__
from sluice.accounts.sealing import AccountSeal
from sluice.accounts.vault import Vault
from sluice.cache.flight import Flights
from sluice.cache.semantic import VectorIndex
from sluice.cache.store import AnswerStore
from sluice.exchange.metrics import Metrics
from sluice.exchange.refusals import RepeatLog, Tarpit
from sluice.exchange.services import Services
from sluice.exchange.tasks import Tasks
from sluice.exchange.telemetry import build_telemetry
from sluice.exchange.tenants import Tenants
from sluice.guardrails.selection import Guardrails
from sluice.ids import IdFactory, ordered_id
from sluice.limits.base import Limiter
from sluice.limits.stores.memory import MemoryLimiter
from sluice.limits.stores.redis import RedisLimiter
from sluice.metering.escrow import Escrow
from sluice.metering.meter import Meter
from sluice.providers.registry import AdapterRegistry
from sluice.routing.breaker import Breaker
from sluice.routing.breaker_share import BreakerShare
from sluice.routing.catalog import Catalog
from sluice.routing.references import check_references
from sluice.routing.router import Router
from sluice.routing.speed_share import SpeedShare
from sluice.routing.speeds import Speeds
from sluice.server.app import Gateway
from sluice.server.generation import Generation
from sluice.server.intake import Limits
from sluice.server.models import model_list
from sluice.server.reload import Reloader, SettingsSource
from sluice.settings import Settings, answers_file
from sluice.storage.answers import MemoryAnswers
from sluice.storage.base import Store
from sluice.storage.redis_answers import RedisAnswers
from sluice.storage.redis_mirror import RedisMirror
from sluice.storage.sqlite.answers import SqliteAnswers
from sluice.storage.writer import WriteBehind
from sluice.transport.http import HttpTransport
from sluice.transport.port import Transport

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter


class _Lasting:
    """The parts a process holds for its lifetime: every generation shares them, so a
    reload keeps the upstream pools, the limiter's buckets, the breaker's circuits, the
    metrics' series, the queued log rows, the drains in flight and the tracer."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        *,
        new_id: IdFactory,
        wall_clock: Callable[[], float],
        clock: Callable[[], float],
        rng: Random,
        span_exporter: SpanExporter | None,
    ) -> None:
        server, routing, metering = settings.server, settings.routing, settings.metering
        self.store, self.new_id, self.clock, self.rng = store, new_id, clock, rng
        self.vault = Vault(settings.secret_key) if settings.secret_key is not None else None
        self.seal = AccountSeal.from_secret(settings.secret_key)
        self.transport: Transport = HttpTransport(
            f"sluice/{__version__}",
            clock,
            allow_private_upstreams=server.allow_private_upstreams,
            receive_buffer_bytes=server.upstream_socket_buffer_bytes,
        )
        self.breaker = Breaker(
            routing.breaker_failures, routing.breaker_cooldown, routing.max_retry_after
        )
        self.speeds = Speeds()
        self.shares: list[BreakerShare | SpeedShare | RedisAnswers | SqliteAnswers] = []
        self.mirror = None
        cache = settings.cache
        shared: RedisAnswers | SqliteAnswers | None = None
        redis_url, prefix = settings.limits.redis_url, settings.limits.key_prefix
        if redis_url:
            breakers = BreakerShare.from_url(redis_url, prefix, self.breaker, clock)
            self.breaker.on_open = breakers.opened
            speeds = SpeedShare.from_url(redis_url, prefix, self.speeds)
            shared = RedisAnswers.from_url(redis_url, prefix, cache.max_bytes, clock)
            self.shares = [breakers, speeds, shared]
            self.mirror = RedisMirror.from_url(redis_url, prefix)
        elif (answers_path := answers_file(settings)) is not None:
            shared = SqliteAnswers(answers_path, cache.max_bytes, wall_clock)
            self.shares = [shared]
        escrow = None
        if metering.reserve:
            escrow = Escrow(
                store,
                new_id=new_id,
                wall_clock=wall_clock,
                clock=clock,
                hold_ttl=metering.hold_ttl,
                idle=metering.reserve_idle,
                most=metering.reserve_most,
            )
        settled = None if escrow is None else escrow.written
        self.log = WriteBehind.configured(store, wall_clock, metering, settings.storage, settled)
        self.meter = Meter(
            store,
            self.log,
            new_id=new_id,
            wall_clock=wall_clock,
            hold_ttl=metering.hold_ttl,
            escrow=escrow,
        )
        self.limiter = _limiter(settings, clock)
        kept = shared or MemoryAnswers(cache.max_bytes, clock)
        self.answers = AnswerStore(kept, cache.max_entry_bytes)
        self.flights = Flights(clock)
        self.vectors = VectorIndex(cache.max_vector_bytes)
        self.metrics = Metrics(
            self.breaker, clock, frozenset(), self.speeds, self.answers, flights=self.flights
        )
        self.tasks = Tasks(clock, metering.hold_ttl)
        self.repeats = RepeatLog(self.log, clock)
        limits = settings.limits
        self.tarpit = Tarpit(
            clock, burst=limits.refused_burst, per_second=limits.refused_per_second
        )
        self.telemetry = build_telemetry(settings.telemetry, span_exporter)


def _generation(lasting: _Lasting, settings: Settings) -> Generation:
    """What one config builds; raises :class:`ConfigError` before anything is swapped."""
    server, clock = settings.server, lasting.clock
    catalog = Catalog.with_overrides(list(settings.models))
    check_references(
        settings.models, catalog, settings.connections, settings.routes, settings.guardrails
    )
    guardrails = Guardrails(settings.guardrails, lasting.transport)
    router = Router(
        registry=AdapterRegistry(lasting.new_id, server.upstream_event_bytes),
        transport=lasting.transport,
        breaker=lasting.breaker,
        clock=clock,
        rng=lasting.rng,
        error_body_bytes=server.upstream_error_body_bytes,
        body_bytes=server.upstream_body_bytes,
        hedge_budget=settings.routing.hedge_budget,
        speeds=lasting.speeds,
    )
    tenants = Tenants(
        store=lasting.store,
        vault=lasting.vault,
        catalog=catalog,
        connections=settings.connections,
        routes=settings.routes,
        clock=clock,
    )
    services = Services(
        router=router,
        tenants=tenants,
        meter=lasting.meter,
        log=lasting.log,
        limiter=lasting.limiter,
        limits=settings.limits,
        guardrails=guardrails,
        metrics=lasting.metrics.relabelled(frozenset(c.id for c in settings.connections)),
        tasks=lasting.tasks,
        repeats=lasting.repeats,
        tarpit=lasting.tarpit,
        clock=clock,
        keepalive_interval=server.sse_keepalive_interval,
        max_json_depth=server.max_json_depth,
        telemetry=lasting.telemetry,
        answers=lasting.answers,
        flights=lasting.flights,
        vectors=lasting.vectors,
    )
    models = msgspec.json.encode(model_list(catalog, tenants.shared.planner, settings.routes))
    return Generation(settings, services, catalog, models)


def create_app(
    settings: Settings,
    store: Store,
    *,
    source: SettingsSource | None = None,
    new_id: IdFactory = ordered_id,
    wall_clock: Callable[[], float] = time.time,
    clock: Callable[[], float] = time.monotonic,
    rng: Random | None = None,
    span_exporter: SpanExporter | None = None,
) -> Gateway:
    """``source``: where ``settings`` came from, read again on reload (none: no reload).
    ``span_exporter``: where spans go when ``[telemetry]`` traces (default: OTLP/HTTP)."""
    lasting = _Lasting(
        settings,
        store,
        new_id=new_id,
        wall_clock=wall_clock,
        clock=clock,
        rng=rng or Random(),
        span_exporter=span_exporter,
    )
    build = partial(_generation, lasting)
    return Gateway(
        generation=build(settings),
        reloader=None if source is None else Reloader(source, build),
        store=store,
        transport=lasting.transport,
        shares=lasting.shares,
        mirror=lasting.mirror,
        vault=lasting.vault,
        seal=lasting.seal,
        new_id=new_id,
        wall_clock=wall_clock,
        clock=clock,
        limits=_intake_limits(settings),
    )


def _limiter(settings: Settings, clock: Callable[[], float]) -> Limiter:
    limits = settings.limits
    if limits.redis_url:
        return RedisLimiter.from_url(limits.redis_url, prefix=limits.key_prefix)
    return MemoryLimiter(clock)


def _intake_limits(settings: Settings) -> Limits:
    server = settings.server
    return Limits(
        max_body_bytes=server.max_body_bytes,
        max_header_bytes=server.max_header_bytes,
        header_timeout=server.header_timeout,
        body_timeout=server.body_timeout,
        keepalive_timeout=server.keepalive_timeout,
        write_timeout=server.client_write_timeout,
        max_concurrent_bodies=server.max_concurrent_bodies,
        max_buffered_body_bytes=server.max_buffered_body_bytes,
        write_buffer_bytes=server.client_write_buffer_bytes,
        socket_buffer_bytes=server.client_socket_buffer_bytes,
    )
