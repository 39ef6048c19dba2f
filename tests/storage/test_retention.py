"""The request log is pruned to its retention (age and rows) in bounded batches, on both
backends (the store fixture); the ledger, and so spend reports and balances, never."""

from __future__ import annotations

import asyncio
import logging

import pytest

from sluice.config import MeteringConfig, StorageConfig
from sluice.storage.base import HoldRequest, RequestFilters, RequestRecord, Settlement, Store
from sluice.storage.retention import PRUNE_BATCH, Pruner, Retention
from sluice.storage.spend import SpendFilters
from sluice.storage.writer import WriteBehind

NOW = 1_800_000_000
DAY = 86_400


def row(n: int, created_at: int, account: str = "acct_a") -> RequestRecord:
    return RequestRecord(
        id=f"req_{n:05d}", account_id=account, key_id="key_a", created_at=created_at
    )


async def logged(store: Store) -> list[str]:
    return sorted(r.id for r in await store.list_requests(RequestFilters(), 10_000, None))


async def prune_all(pruner: Pruner) -> list[int]:
    """Step a prune from its start to its end; what each step deleted."""
    deleted = [await pruner.step(0.0)]
    while pruner.busy:
        deleted.append(await pruner.step(0.0))
    return deleted


async def test_rows_older_than_the_retention_go_and_newer_ones_stay(store: Store) -> None:
    old = [row(n, NOW - 40 * DAY + n) for n in range(30)]
    new = [row(100 + n, NOW - 29 * DAY + n) for n in range(5)]
    await store.write_requests(old + new)
    pruner = Pruner(store, Retention(max_age=30 * DAY, batch=7), lambda: NOW)
    deleted = await prune_all(pruner)
    assert deleted == [7, 7, 7, 7, 2]  # bounded batches, the last one short
    assert await logged(store) == sorted(r.id for r in new)


async def test_only_the_newest_max_rows_stay(store: Store) -> None:
    rows = [row(n, NOW - 1000 + n // 3) for n in range(25)]  # three rows share a second
    await store.write_requests(rows)
    pruner = Pruner(store, Retention(max_rows=10, batch=4), lambda: NOW)
    assert await prune_all(pruner) == [4, 4, 4, 3]
    newest = sorted(rows, key=lambda r: (r.created_at, r.id), reverse=True)[:10]
    assert await logged(store) == sorted(r.id for r in newest)
    assert await prune_all(pruner) == [0]  # nothing past the bound: nothing to do


async def test_age_and_rows_together_prune_whichever_cuts_more(store: Store) -> None:
    await store.write_requests([row(n, NOW - n * DAY) for n in range(10)])
    both = Pruner(store, Retention(max_age=5 * DAY + 1, max_rows=8), lambda: NOW)
    await prune_all(both)
    assert await logged(store) == [f"req_{n:05d}" for n in range(6)]
    assert (await store.prune_requests((NOW + 1, ""), 1)) == 1  # the oldest first
    assert await logged(store) == [f"req_{n:05d}" for n in range(5)]


async def test_a_prune_starts_once_per_period(store: Store) -> None:
    pruner = Pruner(store, Retention(max_age=DAY, every=60.0), lambda: NOW)
    await pruner.step(100.0)
    await store.write_requests([row(1, NOW - 2 * DAY)])
    assert await pruner.step(159.0) == 0 and pruner.due_in(159.0) == pytest.approx(1.0)
    assert await pruner.step(160.0) == 1


async def test_spend_and_balances_read_the_ledger_after_the_log_is_pruned(store: Store) -> None:
    account = await store.create_account("acct_s", "s", metered=True, credits=10**9, now=1)
    for n in range(4):
        hold = HoldRequest(f"hold_{n}", account.id, "key_s", f"req_{n:05d}", 1000, NOW, NOW + 60)
        assert await store.place_hold(hold)
    settlements = [
        Settlement(f"hold_{n}", account.id, "key_s", f"req_{n:05d}", 100 * (n + 1), NOW, "m", "p")
        for n in range(4)
    ]
    await store.settle(settlements)
    await store.write_requests([row(n, NOW - 90 * DAY, account.id) for n in range(4)])
    report = await store.spend(SpendFilters(account_id=account.id), "model", 10, None)
    await prune_all(Pruner(store, Retention(max_age=30 * DAY), lambda: NOW))
    assert await logged(store) == []
    assert await store.spend(SpendFilters(account_id=account.id), "model", 10, None) == report
    assert report[1].spend == 1000
    after = await store.get_account("s")
    assert after is not None and after.balance == 10**9 - 1000


async def test_the_write_behind_task_prunes_between_its_writes(store: Store) -> None:
    await store.write_requests([row(n, NOW - 60 * DAY) for n in range(3 * PRUNE_BATCH + 5)])
    storage = StorageConfig(request_log_retention="30d")
    writer = WriteBehind.configured(store, lambda: NOW, MeteringConfig(), storage)
    writer.start()
    try:
        writer.log(row(99_999, NOW))
        async with asyncio.timeout(10):
            while len(await logged(store)) > 1:
                await asyncio.sleep(0.01)
            await writer.flush()
    finally:
        await writer.close()
    assert await logged(store) == ["req_99999"]


async def test_a_failing_prune_is_logged_and_tried_again_next_period(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken:
        async def request_log_cutoff(self, keep: int) -> None:
            raise OSError("disk on fire")

    pruner = Pruner(Broken(), Retention(max_rows=1), lambda: NOW)  # type: ignore[arg-type]
    with caplog.at_level(logging.ERROR, "sluice.storage"):
        assert await pruner.step(0.0) == 0
    assert "pruning the request log failed" in caplog.text
    assert not pruner.busy and pruner.due_in(0.0) == 60.0


@pytest.mark.parametrize(
    ("storage", "retention"),
    [
        (StorageConfig(), Retention(max_age=30 * DAY, response_max_age=30 * DAY)),
        (
            StorageConfig(request_log_retention="12h", response_retention="1h"),
            Retention(max_age=12 * 3600, response_max_age=3600),
        ),
        (StorageConfig(request_log_retention="0", response_retention="0"), None),
        (StorageConfig(request_log_retention=None, response_retention=None), None),
        (
            StorageConfig(
                request_log_retention="0", request_log_max_rows=5, response_retention="0"
            ),
            Retention(max_rows=5),
        ),
        (
            StorageConfig(request_log_retention="0", response_retention="2d"),
            Retention(response_max_age=2 * DAY),
        ),
    ],
    ids=[
        "default-30d",
        "12h-1h",
        "zero-keeps-all",
        "none-keeps-all",
        "rows-only",
        "responses-only",
    ],
)
def test_the_storage_settings_make_the_retention(
    storage: StorageConfig, retention: Retention | None
) -> None:
    assert Retention.from_config(storage) == retention
