"""From the requested ``model`` to an ordered list of upstream attempts (pure;
docs/api.md#models-and-routes).

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

from sluice.config import RouteConfig, RouteTargetConfig
from sluice.core.connection import ConnectionSettings, Target
from sluice.errors import ConfigError, ModelNotFoundError
from sluice.routing.catalog import Catalog, CatalogModel


class Attempt(msgspec.Struct, frozen=True):
    position: str
    target: Target
    model: CatalogModel
    fallback: bool = False
    """From a model's configured ``fallbacks``, not named by the request or its route."""


class Plan(msgspec.Struct, frozen=True):
    requested_model: str
    route_name: str | None
    attempts: tuple[Attempt, ...]

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
        self._plans: dict[str, Plan] = {}  # by model/route, for requests without `models`
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
        return any(_native(model, c) for c in self._connections)

    def plan(self, model: str, extra_models: Sequence[str] = ()) -> Plan:
        if not extra_models:
            cached = self._plans.get(model)
            if cached is None:
                cached = self._plans[model] = self._build(model, ())
            return cached
        return self._build(model, extra_models)

    def _build(self, model: str, extra_models: Sequence[str]) -> Plan:
        route = self._routes.get(model)
        chain: list[RouteTargetConfig] = (
            list(route.chain) if route is not None else [RouteTargetConfig(model)]
        )
        if route is None and self._catalog.get(model) is None:
            raise ModelNotFoundError(
                f"The model '{model}' does not exist or you do not have access to it.",
                param="model",
            )
        for i, extra in enumerate(extra_models):
            if self._catalog.get(extra) is None:
                raise ModelNotFoundError(
                    f"The model '{extra}' does not exist or you do not have access to it.",
                    param=f"models[{i}]",
                )
            chain.append(RouteTargetConfig(extra))
        named = len(chain)
        for target in list(chain):
            entry = self._catalog.get(target.model)
            assert entry is not None
            chain.extend(RouteTargetConfig(f) for f in entry.fallbacks)
        attempts: list[Attempt] = []
        seen: set[tuple[str, str | None]] = set()
        position = 0
        for i, target in enumerate(chain):
            key = (target.model, target.connection)
            if key in seen:
                continue
            seen.add(key)
            found = self._attempts(target, position_name(position), fallback=i >= named)
            if found:
                attempts.extend(found)
                position += 1
        if not attempts:
            raise ModelNotFoundError(
                f"No configured connection serves the model '{model}'.",
                code="model_not_served",
                param="model",
            )
        return Plan(model, route.name if route is not None else None, tuple(attempts))

    def _attempts(
        self, target: RouteTargetConfig, position: str, *, fallback: bool
    ) -> list[Attempt]:
        entry = self._catalog.get(target.model)
        assert entry is not None
        out = []
        for conn in self._connections:
            if target.connection is not None and conn.id != target.connection:
                continue
            native = _native(entry, conn)
            if native:
                out.append(Attempt(position, Target(entry.id, native, conn), entry, fallback))
        return out


def _native(model: CatalogModel, conn: ConnectionSettings) -> str | None:
    """The upstream's name for ``model`` on ``conn``: an account's connection serves
    exactly the models it maps, an operator's those the catalog maps to it."""
    if conn.models is not None:
        return conn.models.get(model.id)
    return model.native_name(conn.id, conn.provider)
