"""API keys in the admin API (docs/admin.md): create, list, change a key's policy,
rotate its secret, revoke. Secrets are shown once, when made; never stored."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Annotated

import msgspec

from sluice.accounts.keys import key_digest, key_prefix, new_key
from sluice.accounts.policy import KeyChanges, apply_changes, key_doc
from sluice.core.principal import NO_POLICY
from sluice.errors import InvalidRequestError, NotFoundError
from sluice.ids import random_id
from sluice.server.admin_common import decode_json, find_account, send_json
from sluice.storage.base import KeyInfo

if TYPE_CHECKING:
    from sluice.server.app import Call, Gateway


class Revoke(msgspec.Struct, forbid_unknown_fields=True):
    prefix: Annotated[str, msgspec.Meta(pattern=r"^sk-sluice-[0-9A-Za-z]{0,40}$")]


async def _key(gw: Gateway, prefix: str) -> KeyInfo:
    if len(prefix) < len("sk-sluice-") + 4:
        raise InvalidRequestError("Give at least `sk-sluice-` and 4 more characters.")
    found = await gw.store.find_key(prefix)
    if found is None:
        raise NotFoundError(f"No live key starts with '{prefix}'.", code="key_not_found")
    return found


async def key_endpoints(gw: Gateway, call: Call, parts: list[str], now: int) -> bool:
    method, body = call.request.method, call.request.body
    match parts:
        case ["accounts", name, "keys"] if method == "GET":
            account = await find_account(gw, name)
            keys = await gw.store.list_keys(account.id)
            await send_json(call, 200, {"data": [await key_doc(gw.store, k, now) for k in keys]})
        case ["accounts", name, "keys"] if method == "POST":
            account = await find_account(gw, name)
            label, policy = apply_changes(decode_json(body, KeyChanges), None, NO_POLICY)
            key = new_key(os.urandom(32))
            await gw.store.add_key(
                random_id("key"),
                account_id=account.id,
                key_digest=key_digest(key),
                prefix=key_prefix(key),
                name=label,
                now=now,
                policy=policy,
            )
            info = KeyInfo("", account.id, key_prefix(key), label, now, None, policy)
            await send_json(call, 201, {"key": key, **await key_doc(gw.store, info, now)})
        case ["keys", prefix] if method == "PATCH":
            found = await _key(gw, prefix)
            label, policy = apply_changes(decode_json(body, KeyChanges), found.name, found.policy)
            await gw.store.update_key(found.id, name=label, policy=policy)
            gw.auth.forget()  # the next request sees it (other replicas: within the cache ttl)
            updated = msgspec.structs.replace(found, name=label, policy=policy)
            await send_json(call, 200, await key_doc(gw.store, updated, now))
        case ["keys", prefix, "rotate"] if method == "POST":
            found = await _key(gw, prefix)
            key = new_key(os.urandom(32))
            await gw.store.rotate_key(found.id, key_digest=key_digest(key), prefix=key_prefix(key))
            gw.auth.forget()  # the old secret stops here at once (other replicas: the ttl)
            rotated = msgspec.structs.replace(found, prefix=key_prefix(key))
            await send_json(call, 200, {"key": key, **await key_doc(gw.store, rotated, now)})
        case ["keys", "revoke"] if method == "POST":
            prefix = decode_json(body, Revoke).prefix
            if len(prefix) < len("sk-sluice-") + 4:
                raise InvalidRequestError(
                    "Give at least `sk-sluice-` and 4 more characters.", param="prefix"
                )
            revoked = await gw.store.revoke_keys(prefix, now)
            gw.auth.forget()
            await send_json(call, 200, {"revoked": revoked})
        case _:
            return False
    return True
