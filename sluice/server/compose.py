"""The composition root: :func:`create_app` builds every part of a gateway from its
settings, once; nothing else constructs them, and reload builds a new one whole."""

from __future__ import annotations

import time
from collections.abc import Callable
from random import Random

from sluice import __version__
from sluice.accounts.vault import Vault
from sluice.exchange.metrics import Metrics
from sluice.exchange.services import Services
from sluice.exchange.tasks import Tasks
from sluice.exchange.tenants import Tenants
from sluice.guardrails.selection import Guardrails
from sluice.ids import IdFactory, random_id
from sluice.limits.base import Limiter
from sluice.limits.stores.memory import MemoryLimiter
from sluice.limits.stores.redis import RedisLimiter
from sluice.metering.meter import Meter
from sluice.providers.registry import AdapterRegistry
from sluice.routing.breaker import Breaker
from sluice.routing.catalog import Catalog
from sluice.routing.router import Router
from sluice.server.app import Gateway
from sluice.server.intake import Limits
from sluice.settings import Settings
from sluice.storage.base import Store
from sluice.storage.writer import WriteBehind
from sluice.transport.http import HttpTransport


def create_app(
    settings: Settings,
    store: Store,
    *,
    new_id: IdFactory = random_id,
    wall_clock: Callable[[], float] = time.time,
    clock: Callable[[], float] = time.monotonic,
    rng: Random | None = None,
) -> Gateway:
    server, routing, metering = settings.server, settings.routing, settings.metering
    catalog = Catalog.with_overrides(list(settings.models))
    vault = Vault(settings.secret_key) if settings.secret_key is not None else None
    transport = HttpTransport(
        f"sluice/{__version__}",
        clock,
        allow_private_upstreams=server.allow_private_upstreams,
        receive_buffer_bytes=server.upstream_socket_buffer_bytes,
    )
    router = Router(
        registry=AdapterRegistry(new_id, server.upstream_event_bytes),
        transport=transport,
        breaker=Breaker(
            routing.breaker_failures, routing.breaker_cooldown, routing.max_retry_after
        ),
        clock=clock,
        rng=rng or Random(),
        error_body_bytes=server.upstream_error_body_bytes,
        body_bytes=server.upstream_body_bytes,
    )
    log = WriteBehind(store, wall_clock, reclaim_every=metering.reclaim_interval)
    services = Services(
        router=router,
        tenants=Tenants(
            store=store,
            vault=vault,
            catalog=catalog,
            connections=settings.connections,
            routes=settings.routes,
            clock=clock,
        ),
        meter=Meter(store, log, new_id=new_id, wall_clock=wall_clock, hold_ttl=metering.hold_ttl),
        log=log,
        limiter=_limiter(settings, clock),
        limits=settings.limits,
        guardrails=Guardrails(settings.guardrails, transport),
        metrics=Metrics(router.breaker, clock, frozenset(c.id for c in settings.connections)),
        tasks=Tasks(clock, metering.hold_ttl),
        clock=clock,
        keepalive_interval=server.sse_keepalive_interval,
        max_json_depth=server.max_json_depth,
    )
    return Gateway(
        settings=settings,
        store=store,
        services=services,
        transport=transport,
        catalog=catalog,
        vault=vault,
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
