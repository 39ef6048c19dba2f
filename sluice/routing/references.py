"""Names one part of the config gives another, checked when it is loaded: a gateway (or
a reload) refuses a file in which something names a connection, model or route that
does not exist, saying what names it, where, and what exists; one whose semantic cache
names a model that cannot embed; and one whose AWS-signed connections this install
cannot sign (the ``aws`` extra is missing)."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence

from sluice.config import CacheConfig, GuardrailConfig, ModelConfig, RouteConfig
from sluice.core.connection import ConnectionSettings
from sluice.errors import ConfigError
from sluice.providers.registry import PROVIDERS
from sluice.routing.catalog import Catalog


def check_references(
    models: Sequence[ModelConfig],
    catalog: Catalog,
    connections: Sequence[ConnectionSettings],
    routes: Sequence[RouteConfig],
    guardrails: Sequence[GuardrailConfig],
) -> None:
    """:class:`ConfigError` for the first dangling name (routes' own targets are
    checked by the planner)."""
    ids = sorted(c.id for c in connections)
    kinds = {spec.kind for spec in PROVIDERS}
    for model in models:
        for name in model.providers:
            if name not in ids and name not in kinds:
                raise ConfigError(
                    f'[[models]] "{model.id}": providers names "{name}", which is neither '
                    f"a connection (known: {', '.join(ids) or 'none'}) nor a provider kind"
                )
    _check_signing(connections)
    cached = [(f'[[models]] "{m.id}"', m.cache) for m in models]
    cached += [(f'[[routes]] "{r.name}"', r.cache) for r in routes]
    for place, cache in cached:
        _check_embedder(place, cache, catalog, connections)
    slugs = {route.name for route in routes} | {m.id for m in catalog}
    for rule in guardrails:
        for slug in rule.applies_to.routes or ():
            if slug not in slugs:
                raise ConfigError(
                    f'[[guardrails]] "{rule.name}": applies_to.routes names "{slug}", '
                    "which is neither a route nor a model"
                )


def _check_embedder(
    place: str,
    cache: CacheConfig | None,
    catalog: Catalog,
    connections: Sequence[ConnectionSettings],
) -> None:
    """A semantic cache's ``embedding_model`` is a catalog model that declares
    ``embeddings = true`` and that one of the operator's connections serves."""
    semantic = None if cache is None else cache.semantic
    if semantic is None:
        return
    name = semantic.embedding_model
    said = f'{place}: cache.semantic.embedding_model names "{name}", which'
    entry = catalog.get(name)
    if entry is None:
        raise ConfigError(f"{said} is not a model id of the catalog")
    if entry.capabilities.embeddings is not True:
        raise ConfigError(f"{said} cannot embed (its capabilities do not say embeddings = true)")
    if not any(entry.native_name(c.id, c.provider) for c in connections):
        raise ConfigError(f"{said} no connection serves")


def _check_signing(connections: Sequence[ConnectionSettings]) -> None:
    """A connection signed for AWS (no API key) needs botocore, the ``aws`` extra."""
    signed = [
        c.id
        for c in connections
        if any(s.kind == c.provider and s.needs_region for s in PROVIDERS) and c.api_key is None
    ]
    if signed and importlib.util.find_spec("botocore") is None:
        raise ConfigError(
            f"connection {signed[0]!r} signs its requests for AWS, which needs the aws "
            "extra: pip install 'sluice-gateway[aws]'"
        )
