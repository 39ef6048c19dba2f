"""SQLite's second connection: request-log reads and spend reports run on a thread of
their own, so they never wait behind the holds and settlements of the writing thread
(issue 20), nor hold them up."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sluice.storage.base import HoldRequest, RequestFilters, RequestRecord, Settlement
from sluice.storage.spend import SpendFilters
from sluice.storage.sqlite import SqliteStore
from sluice.storage.sqlite.connection import Tx


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    opened = SqliteStore(tmp_path / "db.sqlite")
    await opened.open()
    await opened.migrate()
    try:
        yield opened
    finally:
        await opened.close()


def record(n: int) -> RequestRecord:
    return RequestRecord(id=f"req_{n}", account_id="acct_t", key_id="key_t", created_at=n)


async def test_reads_of_the_log_do_not_wait_for_the_writing_thread(store: SqliteStore) -> None:
    await store.write_requests([record(n) for n in range(3)])
    release = threading.Event()

    def busy(tx: Tx) -> None:  # a long transaction on the writing thread
        release.wait(10)

    held = asyncio.create_task(store.write(busy))
    try:
        async with asyncio.timeout(2):
            page = await store.list_requests(RequestFilters(account_id="acct_t"), 10, None)
            listed = await store.list_requests(RequestFilters(status="error"), 10, None)
            one = await store.get_request("req_1", "acct_t")
            _, total = await store.spend(SpendFilters(account_id="acct_t"), "day", 10, None)
    finally:
        release.set()
        await held
    assert [r.id for r in page] == ["req_2", "req_1", "req_0"] == [r.id for r in listed]
    assert one == record(1) and total.requests == 0


async def test_a_slow_read_does_not_hold_up_a_credit_hold(store: SqliteStore) -> None:
    account = await store.create_account("acct_m", "m", metered=True, credits=10**9, now=1)
    release = threading.Event()

    def slow(tx: Tx) -> None:  # a long read on the reading thread
        release.wait(10)

    reading = asyncio.create_task(store.query(slow))
    try:
        async with asyncio.timeout(2):
            hold = HoldRequest("hold_1", account.id, "key_1", "req_1", 1000, 1, 10**10)
            assert await store.place_hold(hold)
            await store.settle([Settlement("hold_1", account.id, "key_1", "req_1", 400, 2)])
    finally:
        release.set()
        await reading
    after = await store.get_account("m")
    assert after is not None and (after.balance, after.held) == (10**9 - 400, 0)


async def test_the_reading_connection_sees_each_commit_and_refuses_writes(
    store: SqliteStore,
) -> None:
    assert await store.get_request("req_7", "acct_t") is None
    await store.write_requests([record(7)])
    assert await store.get_request("req_7", "acct_t") == record(7)
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        await store.query(lambda tx: tx.execute("DELETE FROM request_log"))


async def test_the_reader_opened_before_a_migration_sees_its_tables(tmp_path: Path) -> None:
    before = set(threading.enumerate())
    fresh = SqliteStore(tmp_path / "new.sqlite")
    await fresh.open()  # both connections open on a file with no tables yet
    try:
        await fresh.migrate()
        await fresh.write_requests([record(1)])
        page, resume = await fresh.request_page(RequestFilters(status="error"), 5, None)
        workers = {t.name for t in set(threading.enumerate()) - before}
    finally:
        await fresh.close()
    assert [r.id for r in page] == ["req_1"] and resume is None
    assert {name.rsplit("_", 1)[0] for name in workers} == {"sluice-sqlite", "sluice-sqlite-read"}
    assert not set(threading.enumerate()) - before  # close() ended both threads
    with pytest.raises(RuntimeError, match="not open"):
        await fresh.get_request("req_1", "acct_t")
