"""The cache of verified keys never outlives a revocation in this process."""

from __future__ import annotations

import asyncio
from typing import cast

import pytest

from sluice.accounts.keys import key_digest
from sluice.core.principal import Principal
from sluice.errors import AuthenticationError
from sluice.server.auth import Authenticator
from sluice.storage.base import Store
from tests.support.fake_transport import FakeClock

KEY = "sk-sluice-" + "a" * 40
PRINCIPAL = Principal(
    account_id="acct_1",
    account_name="team",
    key_id="key_1",
    key_prefix=KEY[:18],
    metered=True,
    is_dev=False,
)


class SlowStore:
    """``find_principal`` reads ``live``, then waits for ``answer`` to be set to answer
    what it read (a query that read the row before a revocation committed)."""

    def __init__(self) -> None:
        self.live = True
        self.answer = asyncio.Event()
        self.lookups = 0

    async def find_principal(self, digest: str) -> Principal | None:
        assert digest == key_digest(KEY)
        self.lookups += 1
        live = self.live
        await self.answer.wait()
        return PRINCIPAL if live else None


async def test_a_key_revoked_while_it_was_looked_up_is_not_cached() -> None:
    """Found in review: a lookup that began before a revocation cached the key it read
    after the revocation's forget(), so the revoked key worked for the cache's 5 s."""
    store = SlowStore()
    clock = FakeClock(100.0)
    auth = Authenticator(cast(Store, store), dev_key_enabled=False, clock=clock, wall_clock=clock)
    lookup = asyncio.ensure_future(auth.authenticate(f"Bearer {KEY}"))
    await asyncio.sleep(0)  # the lookup has read the old row, its answer is on its way
    store.live = False  # revoked ...
    auth.forget()  # ... and forgotten, while the lookup is in flight
    store.answer.set()
    assert await lookup == PRINCIPAL  # it read the row before the revocation: it passes
    store.answer.clear()
    store.answer.set()
    with pytest.raises(AuthenticationError):
        await auth.authenticate(f"Bearer {KEY}")
    assert store.lookups == 2  # the second asked the store: nothing was cached
