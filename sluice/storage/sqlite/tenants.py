"""Accounts' own connections and prices on SQLite."""

from __future__ import annotations

import msgspec

from sluice.config import PriceConfig
from sluice.storage.sqlite.connection import SqliteBase
from sluice.storage.tenants import StoredConnection

_SPEC = msgspec.json.Decoder(StoredConnection)
_PRICE = msgspec.json.Decoder(PriceConfig)
_ENCODER = msgspec.json.Encoder()


class SqliteTenants(SqliteBase):
    async def save_connection(
        self, account_id: str, spec: StoredConnection, api_key_enc: str | None, now: int
    ) -> bool:
        changed = await self.write(
            lambda tx: tx.execute(
                "INSERT INTO account_connections (id, account_id, spec, api_key_enc, created_at) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET spec = excluded.spec, "
                "api_key_enc = excluded.api_key_enc WHERE account_connections.account_id = "
                "excluded.account_id",
                (spec.id, account_id, _ENCODER.encode(spec).decode(), api_key_enc, now),
            )
        )
        return changed > 0

    async def account_connections(
        self, account_id: str
    ) -> list[tuple[StoredConnection, str | None]]:
        rows = await self.all(
            "SELECT spec, api_key_enc FROM account_connections WHERE account_id = ? "
            "ORDER BY created_at, id",
            (account_id,),
        )
        return [(_SPEC.decode(spec), key) for spec, key in rows]

    async def delete_connection(self, account_id: str, connection_id: str) -> bool:
        return bool(
            await self.write(
                lambda tx: tx.execute(
                    "DELETE FROM account_connections WHERE id = ? AND account_id = ?",
                    (connection_id, account_id),
                )
            )
        )

    async def set_price(self, account_id: str, model_id: str, price: PriceConfig | None) -> None:
        if price is None:
            await self.write(
                lambda tx: tx.execute(
                    "DELETE FROM account_prices WHERE account_id = ? AND model_id = ?",
                    (account_id, model_id),
                )
            )
            return
        await self.write(
            lambda tx: tx.execute(
                "INSERT INTO account_prices (account_id, model_id, price) VALUES (?, ?, ?) "
                "ON CONFLICT(account_id, model_id) DO UPDATE SET price = excluded.price",
                (account_id, model_id, _ENCODER.encode(price).decode()),
            )
        )

    async def account_prices(self, account_id: str) -> dict[str, PriceConfig]:
        rows = await self.all(
            "SELECT model_id, price FROM account_prices WHERE account_id = ?", (account_id,)
        )
        return {model: _PRICE.decode(price) for model, price in rows}
