"""``GET /admin/cache``: the response cache as an operator watches it (docs/cache.md):
the store (where, how full, what it evicted), this process's requests by outcome since
it started and their hit ratio, the identical requests in flight now, and the models
and routes that have a cache with its settings.

The counts and flights are this replica's; a store shared through Redis reports its
entries and bytes as this process last saw them (as ``/metrics`` does).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import msgspec

from sluice.config import CacheConfig
from sluice.exchange.heads import JSON
from sluice.server.admin import authorize

if TYPE_CHECKING:
    from sluice.cache.store import AnswerStore
    from sluice.exchange.cache_outcomes import CacheOutcomes
    from sluice.routing.plan import Planner
    from sluice.server.call import Call
    from sluice.server.context import GatewayContext

CACHE_PATH = "/admin/cache"
_ENCODER = msgspec.json.Encoder()


class CacheStoreView(msgspec.Struct, kw_only=True):
    kind: str
    """``memory`` (this process's own) or ``redis`` (every process's)."""
    entries: int
    bytes: int
    """The answers' bytes, counted against ``max_bytes``."""
    max_bytes: int
    max_entry_bytes: int
    """The largest answer kept; a longer one is served, not kept."""
    evictions: int
    """Answers this process dropped to make room (least recently used first)."""


class CacheRequestsView(msgspec.Struct, kw_only=True):
    """Requests for a cached model since this process started, by outcome."""

    hit: int
    miss: int
    bypass: int


class CachedModelView(msgspec.Struct, kw_only=True):
    id: str
    kind: Literal["model", "route"]
    cache: CacheConfig
    """The cache a request naming it uses (a route's own, else its first model's)."""


class CacheView(msgspec.Struct, kw_only=True):
    store: CacheStoreView
    requests: CacheRequestsView
    hit_ratio: float | None
    """Hits over hits and misses; None before any."""
    flights: int
    """Cacheable misses streaming now that identical requests may join."""
    flight_joiners: int
    """Requests reading another's upstream stream now."""
    models: list[CachedModelView]


def _store(answers: AnswerStore) -> CacheStoreView:
    kept = answers.kept
    return CacheStoreView(
        kind=answers.kind,
        entries=kept.entries,
        bytes=kept.kept_bytes,
        max_bytes=answers.max_bytes,
        max_entry_bytes=answers.max_entry_bytes,
        evictions=kept.evictions,
    )


def _requests(outcomes: CacheOutcomes) -> CacheRequestsView:
    return CacheRequestsView(hit=outcomes.hit, miss=outcomes.miss, bypass=outcomes.bypass)


def _cached(
    planner: Planner, names: list[tuple[str, Literal["model", "route"]]]
) -> list[CachedModelView]:
    views = []
    for name, kind in names:
        cache = planner.plan(name).cache
        if cache is not None:
            views.append(CachedModelView(id=name, kind=kind, cache=cache))
    return views


async def cache_view(gw: GatewayContext, call: Call) -> None:
    authorize(gw, call)
    services, planner = gw.services, gw.tenants.shared.planner
    names: list[tuple[str, Literal["model", "route"]]] = [
        (m.id, "model") for m in gw.catalog if planner.servable(m)
    ]
    names += [(r.name, "route") for r in gw.settings.routes]
    outcomes = services.metrics.cache_outcomes
    view = CacheView(
        store=_store(services.answers),
        requests=_requests(outcomes),
        hit_ratio=outcomes.hit_ratio,
        flights=len(services.flights),
        flight_joiners=services.flights.joiners,
        models=_cached(planner, names),
    )
    await call.writer.send(200, [*call.headers, JSON], _ENCODER.encode(view))
