"""From a model name as a request gives it to the catalog model it means (pure;
docs/api.md#models-and-routes).

In order: a catalog id; an alias (a bare upstream name, ``gpt-4o``, naming one id, or
one id that some connection serves); a pass-through id (``<connection id or provider
kind>/<upstream name>`` on a connection with ``passthrough = true``: a model the catalog
does not know, priced only by the connection's ``prices``). Anything else is a 404
naming the closest ids; an alias naming several served ids is a 400 listing them.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Sequence

from sluice.core.connection import ConnectionSettings
from sluice.errors import InvalidRequestError, ModelNotFoundError
from sluice.providers.registry import PROVIDERS, ProviderSpec
from sluice.routing.catalog import Catalog, CatalogModel

AMBIGUOUS = "model_ambiguous"
"""The code of a bare name that names several models."""
SUGGESTED = 5
"""The most close ids an unknown model's 404 names."""


def served_name(model: CatalogModel, conn: ConnectionSettings) -> str | None:
    """The upstream's name for ``model`` on ``conn``: an account's connection serves
    exactly the models it maps, an operator's those the catalog maps to it."""
    if conn.models is not None:
        return conn.models.get(model.id)
    return model.native_name(conn.id, conn.provider)


class ModelNames:
    """The names one set of connections answers to (a planner's)."""

    def __init__(
        self,
        catalog: Catalog,
        connections: Sequence[ConnectionSettings],
        routes: Collection[str],
    ) -> None:
        self._catalog = catalog
        self._connections = tuple(connections)
        self._passthrough = tuple(c for c in connections if c.passthrough)
        self._known = (*catalog.names(), *routes)

    def servable(self, model: CatalogModel) -> bool:
        return any(served_name(model, c) for c in self._connections)

    def resolve(self, name: str, param: str) -> CatalogModel:
        """The model ``name`` means; 404 or 400 (naming ``param``) when none or several."""
        found = self._catalog.get(name) or self._alias(name, param) or self._pass(name)
        if found is None:
            raise self._unknown(name, param)
        return found

    def unserved(self, name: str, model: CatalogModel) -> ModelNotFoundError:
        """The 404 of a known model no connection serves, saying what would serve it."""
        ways = [_way(key) for key in model.providers]
        hint = f" To serve it, {'; or '.join(ways)}." if ways else ""
        return ModelNotFoundError(
            f"No configured connection serves the model '{name}'.{hint}",
            code="model_not_served",
            param="model",
        )

    def _alias(self, name: str, param: str) -> CatalogModel | None:
        ids = self._catalog.named(name)
        if len(ids) > 1:
            ids = tuple(i for i in ids if self.servable(self._model(i))) or ids
        if len(ids) > 1:
            raise InvalidRequestError(
                f"The model name '{name}' is ambiguous: it names {', '.join(ids)}. "
                "Ask for one of them by its id.",
                code=AMBIGUOUS,
                param=param,
            )
        return self._model(ids[0]) if ids else None

    def _pass(self, name: str) -> CatalogModel | None:
        prefix, _, upstream = name.partition("/")
        serving = {c.id: upstream for c in self._passthrough if prefix in (c.id, c.provider)}
        if not upstream or not serving:
            return None
        return CatalogModel(name, serving, None, None, (), None, prefix, passthrough=True)

    def _model(self, model_id: str) -> CatalogModel:
        model = self._catalog.get(model_id)
        assert model is not None
        return model

    def _unknown(self, name: str, param: str) -> ModelNotFoundError:
        close = difflib.get_close_matches(name[:128], self._known, n=SUGGESTED * 2, cutoff=0.5)
        ids = dict.fromkeys(i for n in close for i in self._catalog.named(n) or (n,))
        listed = ", ".join(f"'{i}'" for i in list(ids)[:SUGGESTED])
        return ModelNotFoundError(
            f"The model '{name}' does not exist or you do not have access to it."
            + (f" Close ones: {listed}." if listed else ""),
            param=param,
        )


def _way(key: str) -> str:
    """What would make a connection serve a model the catalog maps ``key`` to (a
    provider kind or a connection id)."""
    spec = next((s for s in PROVIDERS if s.kind == key), None)
    if spec is None:
        return f'add the [[connections]] entry with id = "{key}"'
    entry = f'add a [[connections]] entry with provider = "{spec.kind}"'
    if spec.local:
        return f"set [server] {spec.kind} = true or {entry}"
    if spec.env_key is None:
        return entry
    return f"set {spec.env_key}{_region(spec)} or {entry}"


def _region(spec: ProviderSpec) -> str:
    return f" and {spec.region_env[0]}" if spec.needs_region and spec.region_env else ""
