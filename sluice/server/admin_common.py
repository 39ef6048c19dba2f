"""What every admin endpoint module shares: the JSON body in and out, the account."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from sluice.errors import NotFoundError
from sluice.exchange.heads import JSON
from sluice.storage.base import Account
from sluice.wire.bounds import DEFAULT_MAX_JSON_DEPTH
from sluice.wire.errors import decode_body

if TYPE_CHECKING:
    from sluice.server.call import Call
    from sluice.server.context import GatewayContext

_ENCODER = msgspec.json.Encoder()


def decode_json(body: bytes | bytearray, kind: type[Any]) -> Any:
    return decode_body(msgspec.json.Decoder(kind), body or b"{}", DEFAULT_MAX_JSON_DEPTH)


async def send_json(call: Call, status: int, doc: object) -> None:
    await call.writer.send(status, [*call.headers, JSON], _ENCODER.encode(doc))


async def find_account(gw: GatewayContext, name: str) -> Account:
    account = await gw.store.get_account(name)
    if account is None:
        raise NotFoundError(f"No account named '{name}'.", code="account_not_found")
    return account
