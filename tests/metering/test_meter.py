"""The meter's hold, when the client leaves while the hold is being placed."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from sluice.core.principal import Principal
from sluice.metering.meter import Meter
from sluice.storage.base import HoldRequest
from sluice.storage.sqlite import SqliteStore
from sluice.storage.writer import WriteBehind
from tests.support.gateway import counting_ids


class SlowStore(SqliteStore):
    """Places holds only when told to, like a database busy with other writes. The
    write, once sent, completes even if its caller stops waiting (the SQLite thread and
    a PostgreSQL statement in flight both do)."""

    gate: asyncio.Event

    async def place_hold(self, hold: HoldRequest) -> bool:
        return await asyncio.shield(self._place_when_let(hold))

    async def _place_when_let(self, hold: HoldRequest) -> bool:
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
    released = None
    for _ in range(200):  # until the hold exists and is released, not merely absent
        await asyncio.sleep(0.01)
        await writer.flush()
        released = await store.one("SELECT released_at FROM holds WHERE request_id = 'req_1'")
        if released is not None and released[0] is not None:
            break
    after = await store.get_account("team")
    assert released is not None and released[0] is not None
    assert after is not None
    assert (after.balance, after.held, after.open_holds) == (10**9, 0, 0)
    assert await store.reconcile() == []
    await writer.close()
    await store.close()
