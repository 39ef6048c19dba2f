"""``GET /v1/models`` and ``GET /v1/models/{id}``: the OpenAI list and retrieve formats
plus each model's prices, context window, longest answer and capabilities
(docs/api.md#models-and-routes).

Only models some configured connection can serve are listed, then the configured
routes (a route is shown as its primary model, priced as it). Retrieve answers for a
listed id, and for any other name a request may use: an alias (answered as the id it
names) or a pass-through id (unpriced, capabilities unknown).
"""

from __future__ import annotations

from collections.abc import Sequence

from msgspec import UNSET, UnsetType

from sluice.config import RouteConfig
from sluice.routing.catalog import Catalog, CatalogModel
from sluice.routing.plan import Planner
from sluice.wire.chunks import ModelCapabilities, ModelEntry, ModelList, ModelPricing

MODELS_PREFIX = "/v1/models/"


def _pricing(model: CatalogModel) -> ModelPricing | None:
    price = model.listed_price
    if price is None:
        return None
    return ModelPricing(
        input=price.input,
        output=price.output,
        cache_read=UNSET if price.cache_read is None else price.cache_read,
        cache_write=UNSET if price.cache_write is None else price.cache_write,
    )


def model_entry(model: CatalogModel, entry_id: str | None = None, owned_by: str = "") -> ModelEntry:
    """The model as an entry (of a route named ``entry_id`` when given)."""
    return ModelEntry(
        id=entry_id or model.id,
        created=0,
        owned_by=owned_by or model.owned_by,
        pricing=_pricing(model),
        context_window=_given(model.context_window),
        max_output_tokens=_given(model.max_output_tokens),
        dimensions=_given(model.dimensions),
        capabilities=model.capabilities if model.capabilities != _UNKNOWN else UNSET,
    )


def model_list(catalog: Catalog, planner: Planner, routes: Sequence[RouteConfig]) -> ModelList:
    entries = [model_entry(model) for model in catalog if planner.servable(model)]
    for route in routes:
        primary = catalog.get(route.chain[0].model)
        assert primary is not None  # the planner checked every route
        entries.append(model_entry(primary, route.name, "route"))
    return ModelList(data=entries)


def retrieved(listed: ModelList, planner: Planner, name: str) -> ModelEntry:
    """The entry ``name`` answers to: listed, or the model a request for it would be
    served (404 or 400 as that request would be)."""
    for entry in listed.data:
        if entry.id == name:
            return entry
    model = planner.plan(name).attempts[0].model
    for entry in listed.data:
        if entry.id == model.id:
            return entry
    return model_entry(model)


_UNKNOWN = ModelCapabilities()


def _given(value: int | None) -> int | UnsetType:
    return UNSET if value is None else value
