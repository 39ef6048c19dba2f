"""What one account sees: its own connections (tried first) beside the operator's, and
its own prices. Built from storage on first use and cached briefly per account; an
admin change in this process drops the entry at once (other replicas within the TTL).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType

import msgspec

from sluice.accounts.vault import Vault
from sluice.config import RouteConfig
from sluice.core.connection import ConnectionSettings
from sluice.core.usage import Price
from sluice.metering.pricing import prices_from_config
from sluice.providers.registry import provider_spec, upstream_base_url
from sluice.routing.catalog import Catalog
from sluice.routing.plan import Planner
from sluice.storage.base import Store
from sluice.storage.tenants import StoredConnection

_TTL = 10.0
_NO_PRICES: Mapping[str, Price] = MappingProxyType({})


class TenantView(msgspec.Struct, frozen=True):
    planner: Planner
    prices: Mapping[str, Price]


def own_connection(
    account_id: str, spec: StoredConnection, key_enc: str | None, vault: Vault | None
) -> ConnectionSettings:
    kind = provider_spec(spec.provider)
    return ConnectionSettings(
        id=spec.id,
        provider=kind.kind,
        base_url=upstream_base_url(kind, spec.base_url, spec.region),  # checked when saved
        api_key=None if key_enc is None or vault is None else vault.unseal(key_enc),
        region=spec.region,
        timeouts=spec.timeouts,
        prices=prices_from_config(spec.prices),
        models=dict(spec.models),
        owner=account_id,
    )


class Tenants:
    def __init__(
        self,
        *,
        store: Store,
        vault: Vault | None,
        catalog: Catalog,
        connections: Sequence[ConnectionSettings],
        routes: Sequence[RouteConfig],
        clock: Callable[[], float],
    ) -> None:
        self._store = store
        self._vault = vault
        self._catalog = catalog
        self._connections = tuple(connections)
        self._routes = tuple(routes)
        self._clock = clock
        self.shared = TenantView(Planner(catalog, connections, routes), _NO_PRICES)
        self._views: dict[str, tuple[TenantView, float]] = {}

    async def view(self, account_id: str) -> TenantView:
        now = self._clock()
        cached = self._views.get(account_id)
        if cached is not None and cached[1] > now:
            return cached[0]
        own = await self._store.account_connections(account_id)
        prices = await self._store.account_prices(account_id)
        if not own and not prices:
            view = self.shared
        else:
            mine = [own_connection(account_id, spec, key, self._vault) for spec, key in own]
            view = TenantView(
                Planner(self._catalog, [*mine, *self._connections], self._routes)
                if mine
                else self.shared.planner,
                MappingProxyType(prices_from_config(prices)),
            )
        if len(self._views) > 10_000:
            self._views.clear()
        self._views[account_id] = (view, now + _TTL)
        return view

    def invalidate(self, account_id: str) -> None:
        self._views.pop(account_id, None)
