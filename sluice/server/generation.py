"""One loaded configuration and what was built from it: the unit a reload swaps."""

from __future__ import annotations

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
