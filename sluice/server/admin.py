"""The admin HTTP API under ``/admin/``, guarded by the admin key (docs/admin.md).

Off unless ``[server] admin_key_env`` names a variable holding a key of 32+ characters;
then every ``/admin/`` request needs ``Authorization: Bearer <that key>`` (compared in
constant time). Provider keys sent here are encrypted before they are stored and are
never returned.
"""

from __future__ import annotations

import hmac
import re
from functools import partial
from typing import TYPE_CHECKING

import msgspec

from sluice.accounts.policy import (
    AccountName,
    AllowanceChanges,
    account_spent,
    allowance_doc,
    apply_account_changes,
)
from sluice.accounts.policy import Text as Label
from sluice.config import PriceConfig
from sluice.core.connection import Timeouts
from sluice.core.money import nano_from_usd_text, usd_from_nano
from sluice.core.principal import NO_ACCOUNT_POLICY
from sluice.errors import (
    AuthenticationError,
    ConfigError,
    ConflictError,
    InvalidRequestError,
    MethodNotAllowedError,
    NotFoundError,
)
from sluice.ids import ordered_id
from sluice.providers.registry import ProviderSpec, provider_spec, upstream_base_url
from sluice.server.admin_common import decode_json, find_account, send_json
from sluice.server.admin_keys import key_endpoints
from sluice.server.pages import account_page
from sluice.storage.base import Account
from sluice.storage.tenants import StoredConnection
from sluice.wire.chat import ModelName

if TYPE_CHECKING:
    from sluice.server.call import Call
    from sluice.server.context import GatewayContext

ADMIN_PREFIX = "/admin/"
_CONNECTION_ID = re.compile(r"conn_[A-Za-z0-9_\-]{1,64}")
_ENCODER = msgspec.json.Encoder()


class NewAccount(AllowanceChanges, forbid_unknown_fields=True, kw_only=True):
    """An account, with its own budget and limits if given."""

    name: AccountName
    credits: str | int | float = 0
    metered: bool = True


class Credits(msgspec.Struct, forbid_unknown_fields=True):
    amount: str | int | float


class ConnectionBody(msgspec.Struct, forbid_unknown_fields=True):
    provider: Label
    models: dict[ModelName, ModelName]
    base_url: str | None = None
    api_key: str | None = None
    region: Label | None = None
    timeouts: Timeouts = Timeouts()
    prices: dict[str, PriceConfig] = {}


def _nano(amount: str | int | float, param: str) -> int:
    try:
        return nano_from_usd_text(str(amount))
    except ValueError as exc:
        raise InvalidRequestError(f"{str(exc).capitalize()}.", param=param) from None


def _account_json(account: Account, spent: int | None = None) -> dict[str, object]:
    """An account; ``spent`` in its budget's current period where it was looked up."""
    return {
        "id": account.id,
        "name": account.name,
        "metered": account.metered,
        "balance": usd_from_nano(account.balance),
        "held": usd_from_nano(account.held),
        "available": usd_from_nano(account.available),
        "open_holds": account.open_holds,
        **allowance_doc(account.policy, spent),
    }


async def _account_shown(gw: GatewayContext, account: Account, now: int) -> dict[str, object]:
    return _account_json(account, await account_spent(gw.store, account, now))


async def _account_listed(gw: GatewayContext, account: Account, now: int) -> dict[str, object]:
    """An account in a listing: ``spent`` where it has a budget to spend against (one
    indexed query each), so a page of accounts costs no report over the ledger."""
    if account.policy.budget is None:
        return _account_json(account)
    return await _account_shown(gw, account, now)


def authorize(gw: GatewayContext, call: Call) -> None:
    expected = gw.settings.admin_key
    if expected is None:
        raise NotFoundError(f"Unknown request URL: {call.request.method} {call.request.path}.")
    scheme, _, given = (call.request.headers.get("authorization") or "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(
        given.encode(), expected.reveal().encode()
    ):
        raise AuthenticationError("Invalid admin key.", code="invalid_admin_key")


async def admin(gw: GatewayContext, call: Call) -> None:
    """Dispatch ``/admin/…`` by method and path segments."""
    authorize(gw, call)
    parts = call.request.path[len(ADMIN_PREFIX) :].split("/")
    now = int(gw.wall_clock())
    for endpoints in (_accounts_and_keys, key_endpoints, _connections_and_prices):
        if await endpoints(gw, call, parts, now):
            return
    raise _unknown(call, parts)


async def _accounts_and_keys(gw: GatewayContext, call: Call, parts: list[str], now: int) -> bool:
    method, body = call.request.method, call.request.body
    match parts:
        case ["accounts"] if method == "POST":
            new = decode_json(body, NewAccount)
            credits = _nano(new.credits, "credits")
            if credits < 0:
                raise InvalidRequestError("Starting credits cannot be negative.", param="credits")
            account = await gw.store.create_account(
                ordered_id("acct"),
                new.name,
                metered=new.metered,
                credits=credits,
                now=now,
                policy=apply_account_changes(new, NO_ACCOUNT_POLICY),
            )
            await send_json(call, 201, await _account_shown(gw, account, now))
        case ["accounts"] if method == "GET":
            await send_json(
                call,
                200,
                await account_page(
                    gw.store, call.request.query, lambda a: _account_listed(gw, a, now)
                ),
            )
        case ["accounts", name] if method == "GET":
            await send_json(call, 200, await _account_shown(gw, await find_account(gw, name), now))
        case ["accounts", name] if method == "PATCH":
            account = await find_account(gw, name)
            changes = decode_json(body, AllowanceChanges)
            policy = await gw.store.change_account(
                account.id, partial(apply_account_changes, changes)
            )
            if policy is None:
                raise NotFoundError(f"No account named '{name}'.", code="account_not_found")
            gw.auth.forget()  # its keys' next requests see it (other replicas: the ttl)
            updated = msgspec.structs.replace(account, policy=policy)
            await send_json(call, 200, await _account_shown(gw, updated, now))
        case ["accounts", name, "credits"] if method == "POST":
            amount = _nano(decode_json(body, Credits).amount, "amount")
            account = await gw.store.add_credits(name, amount, now=now, note="admin api")
            gw.services.meter.forget(account.id)
            await send_json(call, 200, await _account_shown(gw, account, now))
        case _:
            return False
    return True


async def _connections_and_prices(
    gw: GatewayContext, call: Call, parts: list[str], now: int
) -> bool:
    method, body = call.request.method, call.request.body
    match parts:
        case ["accounts", name, "connections"] if method == "GET":
            account = await find_account(gw, name)
            await send_json(
                call,
                200,
                {
                    "object": "list",
                    "data": [
                        {**msgspec.to_builtins(spec), "has_api_key": key is not None}
                        for spec, key in await gw.store.account_connections(account.id)
                    ],
                },
            )
        case ["accounts", name, "connections", conn_id] if method == "PUT":
            await _put_connection(gw, call, await find_account(gw, name), conn_id, now)
        case ["accounts", name, "connections", conn_id] if method == "DELETE":
            account = await find_account(gw, name)
            if not await gw.store.delete_connection(account.id, conn_id):
                raise NotFoundError(f"No connection '{conn_id}'.", code="connection_not_found")
            gw.tenants.invalidate(account.id)
            await send_json(call, 200, {"deleted": conn_id})
        case ["accounts", name, "prices", *model] if model and method in ("PUT", "DELETE"):
            account = await find_account(gw, name)
            model_id = "/".join(model)
            if gw.catalog.get(model_id) is None:
                raise NotFoundError(
                    f"No model '{model_id}' in the catalog.", code="model_not_found"
                )
            price = decode_json(body, PriceConfig) if method == "PUT" else None
            await gw.store.set_price(account.id, model_id, price)
            gw.tenants.invalidate(account.id)
            await send_json(call, 200, {"model": model_id, "price": msgspec.to_builtins(price)})
        case _:
            return False
    return True


_SHAPES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("accounts",), "GET, POST"),
    (("accounts", "*"), "GET, PATCH"),
    (("accounts", "*", "credits"), "POST"),
    (("accounts", "*", "keys"), "GET, POST"),
    (("accounts", "*", "connections"), "GET"),
    (("accounts", "*", "connections", "*"), "PUT, DELETE"),
    (("keys", "revoke"), "POST"),
    (("keys", "*"), "PATCH"),
    (("keys", "*", "rotate"), "POST"),
)
"""The paths the dispatcher serves (``*``: one non-empty segment) and their methods; a
price's model id spans segments (``accounts/*/prices/…``: PUT, DELETE)."""


def _methods(parts: list[str]) -> str | None:
    """The methods served on this path, or None when it is not one of the dispatcher's."""
    if len(parts) > 3 and parts[0] == "accounts" and parts[2] == "prices" and all(parts):
        return "PUT, DELETE"
    for shape, methods in _SHAPES:
        if len(shape) == len(parts) and all(
            part and want in ("*", part) for want, part in zip(shape, parts, strict=True)
        ):
            return methods
    return None


def _unknown(call: Call, parts: list[str]) -> Exception:
    """405 naming the methods of a path the dispatcher serves, 404 for any other."""
    methods = _methods(parts)
    if methods is not None:
        return MethodNotAllowedError(
            f"Method {call.request.method} is not allowed here; use {methods}."
        )
    return NotFoundError(f"Unknown request URL: {call.request.method} {call.request.path}.")


async def _put_connection(
    gw: GatewayContext, call: Call, account: Account, conn_id: str, now: int
) -> None:
    if not _CONNECTION_ID.fullmatch(conn_id):
        raise InvalidRequestError(
            "Connection ids look like conn_<letters, digits, _ ->.", param="id"
        )
    if any(c.id == conn_id for c in gw.settings.connections):
        raise InvalidRequestError(f"'{conn_id}' is the id of an operator connection.", param="id")
    new = decode_json(call.request.body, ConnectionBody)
    kind = provider_spec_or_400(new.provider)
    for model in [*new.models, *new.prices]:
        if gw.catalog.get(model) is None:
            raise InvalidRequestError(f"No model '{model}' in the catalog.", param="models")
    if kind.local:
        raise InvalidRequestError(
            "That provider cannot be an account's connection.", param="provider"
        )
    try:
        base_url = upstream_base_url(kind, new.base_url, new.region)
    except ValueError as exc:
        param = "region" if "region" in str(exc) else "base_url"
        raise InvalidRequestError(f"This connection's {exc}.", param=param) from None
    await gw.check_upstream_url(base_url)
    if new.api_key is not None and gw.vault is None:
        raise InvalidRequestError(
            "The gateway has no secret key to encrypt provider keys with.", param="api_key"
        )
    sealed = None if new.api_key is None or gw.vault is None else gw.vault.seal(new.api_key)
    spec = StoredConnection(
        conn_id,
        kind.kind,
        new.models,
        base_url=new.base_url,
        region=new.region,
        timeouts=new.timeouts,
        prices=new.prices,
    )
    if not await gw.store.save_connection(account.id, spec, sealed, now):
        raise ConflictError(
            f"The connection id '{conn_id}' is taken; choose another.",
            code="connection_id_taken",
            param="id",
        )
    gw.tenants.invalidate(account.id)
    await send_json(call, 200, {**msgspec.to_builtins(spec), "has_api_key": sealed is not None})


def provider_spec_or_400(kind: str) -> ProviderSpec:
    try:
        return provider_spec(kind)
    except ConfigError as exc:
        raise InvalidRequestError(str(exc), param="provider") from None
