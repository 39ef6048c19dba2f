"""From the requested ``model`` to an ordered list of upstream attempts (pure;
docs/api.md#models-and-routes). What a name means (an id, an alias, a pass-through id)
is :mod:`.names`'.

Order: the route's chain (or the one model asked for), then the request's ``models``
list, then the model-level fallbacks of every model so far. Each position is tried
on every connection that serves it, in configured order, before the next position.
Positions are named ``primary``, ``standby_a``, ``standby_b``, … ``standby_z``,
``standby_aa``, …
"""

from __future__ import annotations

import string
from collections.abc import Callable, Sequence

import msgspec

from sluice.config import CacheConfig, RouteConfig
from sluice.core.connection import ConnectionSettings, Target
from sluice.errors import ApiError, ConfigError
from sluice.routing.catalog import Catalog, CatalogModel
from sluice.routing.names import ModelNames, served_name

MAX_KEPT_PLANS = 4096
"""Plans a planner keeps for reuse, by the name asked for."""


class Attempt(msgspec.Struct, frozen=True):
    position: str
    target: Target
    model: CatalogModel
    fallback: bool = False
    """From a model's configured ``fallbacks``, not named by the request or its route."""
    hedge_after: float | None = None
    """Seconds after which a stream starts the next attempt beside this one."""


class Plan(msgspec.Struct, frozen=True):
    requested_model: str
    route_name: str | None
    attempts: tuple[Attempt, ...]
    hedged: bool = False
    """Some attempt but the last may start the next beside it (a stream races them)."""
    cache: CacheConfig | None = None
    """The response cache of the route asked for, else of the model first tried."""

    def within(self, allows: Callable[[str], bool]) -> Plan:
        """Without the configured fallbacks to models ``allows`` refuses (a key's
        allow-list binds every model a request may be served as)."""
        kept = tuple(a for a in self.attempts if not a.fallback or allows(a.target.model_id))
        if len(kept) == len(self.attempts):
            return self
        return msgspec.structs.replace(self, attempts=kept)


def position_name(index: int) -> str:
    if index == 0:
        return "primary"
    letters = ""
    n = index
    while n > 0:
        n, rest = divmod(n - 1, 26)
        letters = string.ascii_lowercase[rest] + letters
    return "standby_" + letters


class Planner:
    def __init__(
        self,
        catalog: Catalog,
        connections: Sequence[ConnectionSettings],
        routes: Sequence[RouteConfig],
    ) -> None:
        self._catalog = catalog
        self._connections = tuple(connections)
        self._routes = {route.name: route for route in routes}
        self._names = ModelNames(catalog, connections, self._routes)
        self._plans: dict[str, Plan] = {}  # by name, for requests without `models`
        self._check()

    def _check(self) -> None:
        ids = {c.id for c in self._connections}
        for route in self._routes.values():
            if not route.chain:
                raise ConfigError(f"route {route.name!r} has an empty chain")
            if self._catalog.get(route.name) is not None:
                raise ConfigError(f"route {route.name!r} has the same name as a model")
            for target in route.chain:
                if self._catalog.get(target.model) is None:
                    raise ConfigError(f"route {route.name!r}: unknown model {target.model!r}")
                if target.connection is not None and target.connection not in ids:
                    raise ConfigError(
                        f"route {route.name!r}: unknown connection {target.connection!r}"
                    )

    def servable(self, model: CatalogModel) -> bool:
        return self._names.servable(model)

    def means(self, name: str) -> str | None:
        """The catalog id a model name stands for (itself for an id or a route, the id
        an alias names); None when it names nothing, or several."""
        if name in self._routes:
            return name
        try:
            return self._names.resolve(name, "model").id
        except ApiError:
            return None

    def plan(self, model: str, extra_models: Sequence[str] = ()) -> Plan:
        """The attempts for a model id, alias, pass-through id or route, and the
        request's ``models``; plans without ``models`` are kept (up to
        :data:`MAX_KEPT_PLANS`: pass-through names are unbounded)."""
        if extra_models:
            return self._build(model, extra_models)
        cached = self._plans.get(model)
        if cached is None:
            cached = self._build(model, ())
            if len(self._plans) < MAX_KEPT_PLANS:
                self._plans[model] = cached
        return cached

    def _build(self, model: str, extra_models: Sequence[str]) -> Plan:
        route = self._routes.get(model)
        chain: list[tuple[CatalogModel, str | None, float | None]] = (
            [(self._entry(t.model), t.connection, _seconds(t.hedge_after_ms)) for t in route.chain]
            if route is not None
            else [(self._names.resolve(model, "model"), None, None)]
        )
        chain += [
            (self._names.resolve(m, f"models[{i}]"), None, None) for i, m in enumerate(extra_models)
        ]
        named = len(chain)
        for entry, _, _ in list(chain):
            chain.extend((self._entry(f), None, None) for f in entry.fallbacks)
        attempts: list[Attempt] = []
        seen: set[tuple[str, str | None]] = set()
        position = 0
        for i, (entry, connection, hedge) in enumerate(chain):
            if (entry.id, connection) in seen:
                continue
            seen.add((entry.id, connection))
            found = self._attempts(
                entry,
                connection,
                position_name(position),
                fallback=i >= named,
                hedge_after=hedge if hedge is not None else entry.hedge_after,
            )
            if found:
                attempts += found
                position += 1
        if not attempts:
            raise self._names.unserved(model, chain[0][0])
        hedged = any(a.hedge_after is not None for a in attempts[:-1])
        cache = route.cache if route is not None else None
        return Plan(
            model,
            route.name if route is not None else None,
            tuple(attempts),
            hedged,
            cache or attempts[0].model.cache,
        )

    def _entry(self, model_id: str) -> CatalogModel:
        entry = self._catalog.get(model_id)
        assert entry is not None  # routes and fallbacks are checked when built
        return entry

    def _attempts(
        self,
        entry: CatalogModel,
        connection: str | None,
        position: str,
        *,
        fallback: bool,
        hedge_after: float | None,
    ) -> list[Attempt]:
        out = []
        for conn in self._connections:
            if connection is not None and conn.id != connection:
                continue
            native = served_name(entry, conn)
            if native:
                target = Target(entry.id, native, conn)
                out.append(Attempt(position, target, entry, fallback, hedge_after))
        return out


def _seconds(milliseconds: int | None) -> float | None:
    return None if milliseconds is None else milliseconds / 1000
