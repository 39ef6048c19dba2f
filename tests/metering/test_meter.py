"""The meter's hold, when the client leaves while the hold is being placed."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from sluice.metering.meter import Meter
from sluice.storage.base import Account, HoldRequest, Principal
from sluice.storage.sqlite import SqliteStore
from sluice.storage.writer import WriteBehind
from tests.support.gateway import counting_ids


class SlowStore(SqliteStore):
    """Places holds only when told to (a slow database)."""

    gate: asyncio.Event

    async def place_hold(self, hold: HoldRequest) -> Account | None:
        await self.gate.wait()
        return await super().place_hold(hold)


async def test_a_hold_placed_after_the_client_left_is_released(tmp_path: Path) -> None:
    store = SlowStore(tmp_path / "db.sqlite")
    store.gate = asyncio.Event()
    await store.open()
    await store.migrate()
    account = await store.create_account("acct_t", "team", metered=True, credits=10**9, now=1)
    writer = WriteBehind(store, time.time)
    writer.start()
    meter = Meter(store, writer, new_id=counting_ids(), wall_clock=time.time, hold_ttl=3600)
    principal = Principal(account.id, "team", "key_1", "sk-sluice-x", True, False)
    holding = asyncio.ensure_future(meter.hold(principal, "req_1", 5000))
    await asyncio.sleep(0.01)
    holding.cancel()  # the client went away mid-hold
    with pytest.raises(asyncio.CancelledError):
        await holding
    store.gate.set()  # ... and the hold commits afterwards
    for _ in range(100):
        await asyncio.sleep(0.01)
        await writer.flush()
        after = await store.get_account("team")
        if after is not None and after.open_holds == 0:
            break
    assert after is not None
    assert (after.balance, after.held, after.open_holds) == (10**9, 0, 0)
    assert await store.reconcile() == []
    await writer.close()
    await store.close()
