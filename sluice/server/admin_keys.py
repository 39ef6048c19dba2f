"""API keys in the admin API (docs/admin.md): create, list, change a key's policy,
rotate its secret, revoke. Secrets are shown once, when made; never stored, and a key
given whole to revoke it is only hashed, never echoed."""

from __future__ import annotations

import os
from functools import partial
from typing import TYPE_CHECKING, Annotated, Final

import msgspec
from msgspec import UNSET, UnsetType

from sluice.accounts.keys import (
    KEY_ID_PATTERN,
    NAMING_PREFIX_PATTERN,
    SHORTEST_NAMING_PREFIX,
    WHOLE_KEY_PATTERN,
    key_digest,
    key_prefix,
    keys_named,
    new_key,
    none_named,
)
from sluice.accounts.policy import KeyChanges, apply_changes, key_doc
from sluice.core.principal import NO_POLICY
from sluice.errors import ConflictError, InvalidRequestError, NotFoundError
from sluice.ids import ordered_id
from sluice.server.admin_common import decode_json, find_account, send_json
from sluice.server.pages import (
    CursorInt,
    decode_cursor,
    encode_cursor,
    page_limit,
    query_params,
)
from sluice.storage.base import KeyInfo

if TYPE_CHECKING:
    from sluice.server.call import Call
    from sluice.server.context import GatewayContext


class Revoke(msgspec.Struct, forbid_unknown_fields=True):
    """Exactly one of: ``prefix``, every live key whose readable prefix starts so (a
    whole key given here is taken as ``key``); ``key``, the key itself, matched by its
    SHA-256 digest (never stored or echoed); ``id``, the key's id, which a rotation
    keeps."""

    prefix: Annotated[str, msgspec.Meta(pattern=NAMING_PREFIX_PATTERN)] | UnsetType = UNSET
    key: Annotated[str, msgspec.Meta(pattern=WHOLE_KEY_PATTERN)] | UnsetType = UNSET
    id: Annotated[str, msgspec.Meta(pattern=KEY_ID_PATTERN)] | UnsetType = UNSET


_REVOKE_FIELDS: Final = ("prefix", "key", "id")


def _revoke_target(body: Revoke) -> tuple[str, str]:
    """The one field given and its text; 400 naming the field otherwise."""
    given = [(f, v) for f in _REVOKE_FIELDS if isinstance(v := getattr(body, f), str)]
    if not given:
        raise InvalidRequestError(
            "Missing required parameter: 'prefix' (or give 'key' or 'id' instead).",
            code="missing_required_parameter",
            param="prefix",
        )
    if len(given) > 1:
        raise InvalidRequestError(
            "Give one of 'prefix', 'key' or 'id', not several.",
            code="invalid_value",
            param=given[1][0],
        )
    return given[0]


async def _revoke(gw: GatewayContext, call: Call, body: bytes | bytearray, now: int) -> None:
    """``POST /admin/keys/revoke``: the keys revoked, named; 404 when none was live."""
    field, text = _revoke_target(decode_json(body, Revoke))
    try:
        which = keys_named(text)
    except ValueError as exc:  # the schema's pattern let a trailing newline through
        raise InvalidRequestError(f"Invalid '{field}': {exc}.", param=field) from None
    revoked = await gw.store.revoke_keys(which, now)
    if not revoked:
        message = none_named(text)
        raise NotFoundError(message[0].upper() + message[1:] + ".", code="key_not_found")
    gw.auth.forget()  # revoked here stops at once (other replicas: within the cache ttl)
    keys = [{"id": k.id, "prefix": k.prefix, "name": k.name} for k in revoked]
    await send_json(call, 200, {"revoked": len(keys), "keys": keys})


class KeyCursor(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    """Where a key listing stopped: the last key's ``created_at`` and id."""

    created_at: CursorInt
    id: str


async def _key_page(gw: GatewayContext, call: Call, name: str, now: int) -> dict[str, object]:
    """``GET /admin/accounts/{name}/keys``: a page of the account's keys, oldest first."""
    params = query_params(call.request.query, ("limit", "cursor"))
    limit = page_limit(params.get("limit"))
    cursor = params.get("cursor")
    at = None if cursor is None else decode_cursor(cursor, KeyCursor)
    account = await find_account(gw, name)
    after = None if at is None else (at.created_at, at.id)
    found = await gw.store.list_keys(account.id, limit + 1, after)
    page, more = found[:limit], len(found) > limit
    return {
        "object": "list",
        "data": [await key_doc(gw.store, k, now) for k in page],
        "has_more": more,
        "next_cursor": encode_cursor(KeyCursor(page[-1].created_at, page[-1].id)) if more else None,
    }


async def _key(gw: GatewayContext, prefix: str) -> KeyInfo:
    if len(prefix) < SHORTEST_NAMING_PREFIX:
        raise InvalidRequestError("Give at least `sk-sluice-` and 4 more characters.")
    found = await gw.store.find_key(prefix)
    if found is None:
        raise NotFoundError(f"No live key starts with '{prefix}'.", code="key_not_found")
    return found


async def key_endpoints(gw: GatewayContext, call: Call, parts: list[str], now: int) -> bool:
    method, body = call.request.method, call.request.body
    match parts:
        case ["accounts", name, "keys"] if method == "GET":
            await send_json(call, 200, await _key_page(gw, call, name, now))
        case ["accounts", name, "keys"] if method == "POST":
            account = await find_account(gw, name)
            label, policy = apply_changes(decode_json(body, KeyChanges), None, NO_POLICY)
            key, key_id = new_key(os.urandom(32)), ordered_id("key")
            await gw.store.add_key(
                key_id,
                account_id=account.id,
                key_digest=key_digest(key),
                prefix=key_prefix(key),
                name=label,
                now=now,
                policy=policy,
            )
            info = KeyInfo(key_id, account.id, key_prefix(key), label, now, None, policy)
            await send_json(call, 201, {"key": key, **await key_doc(gw.store, info, now)})
        case ["keys", prefix] if method == "PATCH":
            found = await _key(gw, prefix)
            changes = decode_json(body, KeyChanges)
            changed = await gw.store.change_key(found.id, partial(apply_changes, changes))
            if changed is None:
                raise NotFoundError(f"No live key starts with '{prefix}'.", code="key_not_found")
            gw.auth.forget()  # the next request sees it (other replicas: within the cache ttl)
            updated = msgspec.structs.replace(found, name=changed[0], policy=changed[1])
            await send_json(call, 200, await key_doc(gw.store, updated, now))
        case ["keys", prefix, "rotate"] if method == "POST":
            found = await _key(gw, prefix)
            key = new_key(os.urandom(32))
            if not await gw.store.rotate_key(
                found.id, key_digest=key_digest(key), prefix=key_prefix(key), was=found.prefix
            ):
                raise ConflictError(
                    "The key was rotated or revoked meanwhile; this rotation was not made.",
                    code="key_changed",
                )
            gw.auth.forget()  # the old secret stops here at once (other replicas: the ttl)
            rotated = msgspec.structs.replace(found, prefix=key_prefix(key))
            await send_json(call, 200, {"key": key, **await key_doc(gw.store, rotated, now)})
        case ["keys", "revoke"] if method == "POST":
            await _revoke(gw, call, body, now)
        case _:
            return False
    return True
