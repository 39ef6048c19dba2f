"""Credit-metered accounts and their keys, straight in storage (test support)."""

from __future__ import annotations

import os

from sluice.accounts.keys import key_digest, key_prefix, new_key
from sluice.core.principal import NO_POLICY, KeyPolicy
from sluice.server.app import Gateway
from sluice.storage.base import Store


async def metered_key(store: Store, name: str, credits: int, policy: KeyPolicy = NO_POLICY) -> str:
    """A new credit-metered account ``acct_<name>`` with ``credits`` nano-dollars; its key."""
    account = await store.create_account(f"acct_{name}", name, metered=True, credits=credits, now=1)
    key = new_key(os.urandom(32))
    await store.add_key(
        f"key_{name}",
        account_id=account.id,
        key_digest=key_digest(key),
        prefix=key_prefix(key),
        name=None,
        now=1,
        policy=policy,
    )
    return key


async def settled(gateway: Gateway) -> None:
    """Every settlement written and every credit reservation not in use given back
    (docs/metering.md#credit-reservations): ``held`` is then the holds still open."""
    await gateway.writer.flush()
    await gateway.services.meter.give_back()
