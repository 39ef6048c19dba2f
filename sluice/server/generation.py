"""One loaded configuration and what was built from it: the unit a reload swaps; and
what a swap changed (:class:`Reloaded`)."""

from __future__ import annotations

import msgspec

from sluice.exchange.services import Services
from sluice.routing.catalog import Catalog
from sluice.settings import Settings


class Generation:
    """``services`` is what each new exchange captures; an exchange started on an
    older generation keeps it to its end. ``models_body``: ``GET /v1/models``, encoded."""

    __slots__ = ("catalog", "models_body", "services", "settings")

    def __init__(
        self, settings: Settings, services: Services, catalog: Catalog, models_body: bytes
    ) -> None:
        self.settings = settings
        self.services = services
        self.catalog = catalog
        self.models_body = models_body


class Reloaded(msgspec.Struct, frozen=True):
    """What a reload applied (``POST /admin/reload``'s answer)."""

    changed: tuple[str, ...]
    """Sections that differ from the previous config, e.g. ``("connections", "routes")``."""
    needs_restart: tuple[str, ...]
    """Settings that changed but are not applied until a restart, e.g. ``("[server] port",)``."""
    connections: tuple[str, ...]
    models: tuple[str, ...]
    routes: tuple[str, ...]
    guardrails: tuple[str, ...]
