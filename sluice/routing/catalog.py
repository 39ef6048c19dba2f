"""The model catalog: our model ids, native names per provider kind, prices and what
each model can do (docs/api.md#models-and-routes).

Built from the packaged ``catalog.toml`` with the config's ``[[models]]`` laid over it
(an entry with the same id replaces the built-in one). A bare name (``gpt-4o``: a native
name, or an id's part after ``/``) is an alias of the ids it names.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from importlib import resources
from types import MappingProxyType

import msgspec

from sluice.config import CacheConfig, ModelConfig, PriceConfig
from sluice.core.usage import Price
from sluice.errors import ConfigError
from sluice.wire.chunks import ModelCapabilities


class CatalogModel(msgspec.Struct, frozen=True):
    id: str
    providers: dict[str, str]
    listed_price: PriceConfig | None
    price: Price | None
    fallbacks: tuple[str, ...]
    max_output_tokens: int | None
    owned_by: str
    weighted: bool = False
    fastest: bool = False
    """Its connections are tried quickest first (:mod:`sluice.routing.speeds`)."""
    context_window: int | None = None
    dimensions: int | None = None
    capabilities: ModelCapabilities = ModelCapabilities()
    passthrough: bool = False
    """Not in the catalog: an upstream name a pass-through connection serves as is."""
    lacks: frozenset[str] = frozenset()
    """The abilities ``capabilities`` declares it has not (:meth:`ModelCapabilities.lacks`)."""
    hedge_after: float | None = None
    """Seconds before a stream's next attempt is started beside it (``hedge_after_ms``)."""
    cache: CacheConfig | None = None
    """Its complete streamed answers are served again (docs/cache.md)."""

    def native_name(self, connection_id: str, provider: str) -> str | None:
        """The upstream's name for this model on a connection, if it serves it."""
        return self.providers.get(connection_id) or self.providers.get(provider)


class _CatalogFile(msgspec.Struct, forbid_unknown_fields=True):
    models: list[ModelConfig]


def _entry(model: ModelConfig) -> CatalogModel:
    price = model.price
    return CatalogModel(
        id=model.id,
        providers=dict(model.providers),
        listed_price=price,
        price=None if price is None else price.price(),
        fallbacks=tuple(model.fallbacks),
        max_output_tokens=model.max_output_tokens,
        owned_by=model.owned_by or model.id.partition("/")[0] or "sluice",
        weighted=model.balance == "weighted",
        fastest=model.balance == "fastest",
        context_window=model.context_window,
        dimensions=model.dimensions,
        capabilities=model.capabilities,
        lacks=model.capabilities.lacks(),
        hedge_after=None if model.hedge_after_ms is None else model.hedge_after_ms / 1000,
        cache=model.cache,
    )


def builtin_models() -> list[ModelConfig]:
    raw = resources.files("sluice.routing").joinpath("catalog.toml").read_bytes()
    return msgspec.toml.decode(raw, type=_CatalogFile).models


class Catalog:
    def __init__(self, models: list[ModelConfig]) -> None:
        self._models: dict[str, CatalogModel] = {}
        for model in models:
            self._models[model.id] = _entry(model)
        for entry in self._models.values():
            for fallback in entry.fallbacks:
                if fallback not in self._models:
                    raise ConfigError(f"model {entry.id!r}: unknown fallback {fallback!r}")
        self._aliases = _aliases(self._models.values())

    @classmethod
    def with_overrides(cls, overrides: list[ModelConfig]) -> Catalog:
        return cls([*builtin_models(), *overrides])

    def get(self, model_id: str) -> CatalogModel | None:
        return self._models.get(model_id)

    def named(self, alias: str) -> tuple[str, ...]:
        """The ids a bare name stands for (none for an id itself), in catalog order."""
        return self._aliases.get(alias, ())

    def names(self) -> Iterator[str]:
        """Every id and alias, for suggesting the closest ones to an unknown name."""
        yield from self._models
        yield from self._aliases

    def __iter__(self) -> Iterator[CatalogModel]:
        return iter(self._models.values())


def _aliases(models: Collection[CatalogModel]) -> MappingProxyType[str, tuple[str, ...]]:
    """Each model's native names and the part of its id after ``/``, to the ids they
    name; a name that is an id itself is no alias."""
    ids = {m.id for m in models}
    named: dict[str, list[str]] = {}
    for model in models:
        bare = model.id.partition("/")[2]
        for alias in {bare, *model.providers.values()} - {"", model.id}:
            if alias not in ids:
                named.setdefault(alias, []).append(model.id)
    return MappingProxyType({alias: tuple(found) for alias, found in named.items()})
