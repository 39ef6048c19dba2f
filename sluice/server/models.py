"""``GET /v1/models``: the OpenAI list format plus each model's prices
(docs/api.md#models-and-routes).

Only models some configured connection can serve are listed, then the configured
routes (a route is priced as its primary model).
"""

from __future__ import annotations

from collections.abc import Sequence

from msgspec import UNSET

from sluice.config import RouteConfig
from sluice.routing.catalog import Catalog, CatalogModel
from sluice.routing.plan import Planner
from sluice.wire.chunks import ModelEntry, ModelList, ModelPricing


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


def model_list(catalog: Catalog, planner: Planner, routes: Sequence[RouteConfig]) -> ModelList:
    entries = []
    for model in catalog:
        if not planner.servable(model):
            continue
        entry = ModelEntry(id=model.id, created=0, owned_by=model.owned_by, pricing=_pricing(model))
        if model.max_output_tokens is not None:
            entry.max_output_tokens = model.max_output_tokens
        entries.append(entry)
    for route in routes:
        primary = catalog.get(route.chain[0].model)
        entries.append(
            ModelEntry(
                id=route.name,
                created=0,
                owned_by="route",
                pricing=None if primary is None else _pricing(primary),
            )
        )
    return ModelList(data=entries)
