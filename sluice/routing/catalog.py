"""The model catalog: our model ids, native names per provider kind, prices
(docs/api.md#models-and-routes).

Built from the packaged ``catalog.toml`` with the config's ``[[models]]`` laid over it
(an entry with the same id replaces the built-in one).
"""

from __future__ import annotations

from collections.abc import Iterator
from importlib import resources

import msgspec

from sluice.config import ModelConfig, PriceConfig
from sluice.core.usage import Price
from sluice.errors import ConfigError


class CatalogModel(msgspec.Struct, frozen=True):
    id: str
    providers: dict[str, str]
    listed_price: PriceConfig | None
    price: Price | None
    fallbacks: tuple[str, ...]
    max_output_tokens: int | None
    owned_by: str
    weighted: bool = False

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

    @classmethod
    def with_overrides(cls, overrides: list[ModelConfig]) -> Catalog:
        return cls([*builtin_models(), *overrides])

    def get(self, model_id: str) -> CatalogModel | None:
        return self._models.get(model_id)

    def __iter__(self) -> Iterator[CatalogModel]:
        return iter(self._models.values())
