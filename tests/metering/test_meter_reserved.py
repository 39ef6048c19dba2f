"""The meter over a credit reservation: a hold too big for what is left refuses that
request only, while the account still has credits unused in this process."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from sluice.core.principal import Principal
from sluice.errors import BudgetExceededError
from sluice.metering.escrow import Escrow
from sluice.metering.meter import Meter
from sluice.storage.sqlite import SqliteStore
from sluice.storage.writer import WriteBehind
from tests.support.gateway import counting_ids


async def test_one_hold_too_big_does_not_mark_the_account_empty(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "db.sqlite")
    await store.open()
    await store.migrate()
    account = await store.create_account("acct_t", "team", metered=True, credits=2_000, now=1)
    new_id = counting_ids()
    escrow = Escrow(
        store, new_id=new_id, wall_clock=time.time, clock=time.monotonic,
        hold_ttl=3600, idle=30, most=64,
    )  # fmt: skip
    writer = WriteBehind(store, time.time, settled=escrow.written)
    writer.start()
    meter = Meter(store, writer, new_id=new_id, wall_clock=time.time, hold_ttl=3600, escrow=escrow)
    principal = Principal(account.id, "team", "key_1", "sk-sluice-x", True, False)
    held = [await meter.hold(principal, f"req_{n}", 1_000) for n in range(2)]
    for ticket in held:  # the reservation holds all 2,000 (none left in storage) ...
        assert ticket is not None
        meter.settle(ticket, 0)  # ... and none of it is in use
    with pytest.raises(BudgetExceededError) as refused:
        await meter.hold(principal, "req_2", 2_500)
    assert refused.value.code == "insufficient_credits"
    assert not meter.out_of_credits(principal)  # not empty: 2,000 are still there
    third = await meter.hold(principal, "req_3", 1_400)
    assert third is not None
    meter.settle(third, 200)
    await writer.close()
    await escrow.close()
    after = await store.get_account("team")
    assert after is not None and (after.balance, after.held) == (1_800, 0)
    assert await store.reconcile() == []
    await store.close()
