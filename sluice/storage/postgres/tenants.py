"""Accounts' own connections and prices on PostgreSQL."""

from __future__ import annotations

import asyncpg
import msgspec

from sluice.config import PriceConfig
from sluice.storage.postgres.jsonb import jsonb_text
from sluice.storage.tenants import StoredConnection

_SPEC = msgspec.json.Decoder(StoredConnection)
_PRICE = msgspec.json.Decoder(PriceConfig)
_ENCODER = msgspec.json.Encoder()


class PostgresTenants:
    _pool: asyncpg.Pool | None

    @property
    def pool(self) -> asyncpg.Pool:
        if self._pool is None:
            raise RuntimeError("store is not open")
        return self._pool

    async def save_connection(
        self, account_id: str, spec: StoredConnection, api_key_enc: str | None, now: int
    ) -> bool:
        status = await self.pool.execute(
            "INSERT INTO account_connections (id, account_id, spec, api_key_enc, created_at) "
            "VALUES ($1, $2, $3::jsonb, $4, $5) ON CONFLICT (id) DO UPDATE SET "
            "spec = EXCLUDED.spec, api_key_enc = EXCLUDED.api_key_enc "
            "WHERE account_connections.account_id = EXCLUDED.account_id",
            spec.id,
            account_id,
            jsonb_text(spec),
            api_key_enc,
            now,
        )
        return status.split()[-1] != "0"  # "INSERT 0 <rows>"

    async def account_connections(
        self, account_id: str
    ) -> list[tuple[StoredConnection, str | None]]:
        rows = await self.pool.fetch(
            "SELECT spec::text, api_key_enc FROM account_connections WHERE account_id = $1 "
            "ORDER BY created_at, id",
            account_id,
        )
        return [(_SPEC.decode(spec), key) for spec, key in rows]

    async def delete_connection(self, account_id: str, connection_id: str) -> bool:
        status = await self.pool.execute(
            "DELETE FROM account_connections WHERE id = $1 AND account_id = $2",
            connection_id,
            account_id,
        )
        return status.split()[-1] != "0"

    async def set_price(self, account_id: str, model_id: str, price: PriceConfig | None) -> None:
        if price is None:
            await self.pool.execute(
                "DELETE FROM account_prices WHERE account_id = $1 AND model_id = $2",
                account_id,
                model_id,
            )
            return
        await self.pool.execute(
            "INSERT INTO account_prices (account_id, model_id, price) VALUES ($1, $2, $3::jsonb) "
            "ON CONFLICT (account_id, model_id) DO UPDATE SET price = EXCLUDED.price",
            account_id,
            model_id,
            _ENCODER.encode(price).decode(),
        )

    async def account_prices(self, account_id: str) -> dict[str, PriceConfig]:
        rows = await self.pool.fetch(
            "SELECT model_id, price::text FROM account_prices WHERE account_id = $1", account_id
        )
        return {model: _PRICE.decode(price) for model, price in rows}
