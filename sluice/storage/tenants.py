"""The accounts' own role in a store: their upstream connections (keys encrypted by the
vault, :mod:`sluice.accounts.vault`) and their own prices per model."""

from __future__ import annotations

from typing import Protocol

import msgspec

from sluice.config import PriceConfig
from sluice.core.connection import Timeouts


class StoredConnection(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """An account's own upstream connection (its key is stored apart, encrypted)."""

    id: str
    provider: str
    models: dict[str, str]
    """Our model id -> the provider's name for it, on this connection."""
    base_url: str | None = None
    region: str | None = None
    timeouts: Timeouts = Timeouts()
    prices: dict[str, PriceConfig] = {}


class TenantStore(Protocol):
    async def save_connection(
        self, account_id: str, spec: StoredConnection, api_key_enc: str | None, now: int
    ) -> bool:
        """Create or replace the account's connection with ``spec.id``; False (nothing
        written) when another account holds that id."""
        ...

    async def account_connections(
        self, account_id: str
    ) -> list[tuple[StoredConnection, str | None]]:
        """The account's connections with their encrypted keys, oldest first."""
        ...

    async def delete_connection(self, account_id: str, connection_id: str) -> bool: ...

    async def set_price(self, account_id: str, model_id: str, price: PriceConfig | None) -> None:
        """The account's own price for a model (``None`` removes it)."""
        ...

    async def account_prices(self, account_id: str) -> dict[str, PriceConfig]: ...
