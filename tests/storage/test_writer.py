"""The write-behind queue: read-your-writes while traffic never stops."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from pathlib import Path

from msgspec import Raw

from sluice.storage.base import HoldRequest, RequestFilters, RequestRecord, Settlement
from sluice.storage.responses import StoredResponse
from sluice.storage.sqlite import SqliteStore
from sluice.storage.writer import WriteBehind


class BusyStore(SqliteStore):
    """Each write of the log is overtaken by another request: the queue is never empty."""

    during_write: Callable[[], None] = staticmethod(lambda: None)

    async def write_requests(self, records: list[RequestRecord]) -> None:
        self.during_write()
        await super().write_requests(records)


async def test_a_logged_request_can_be_read_back_under_steady_load(tmp_path: Path) -> None:
    store = BusyStore(tmp_path / "db.sqlite")
    await store.open()
    await store.migrate()
    account = await store.create_account("acct_t", "team", metered=False, credits=0, now=1)
    writer = WriteBehind(store, time.time, interval=0.001)
    writer.start()
    counter = itertools.count()

    def record(request_id: str) -> RequestRecord:
        return RequestRecord(id=request_id, account_id=account.id, key_id="key_1", created_at=1)

    store.during_write = lambda: writer.log(record(f"req_bg{next(counter)}"))
    try:
        writer.log(record("req_mine"))
        async with asyncio.timeout(5):
            await writer.flush_pending("req_mine")
        found = await store.get_request("req_mine", account.id)
    finally:
        store.during_write = lambda: None
        await writer.close()
        await store.close()
    assert found is not None and found.id == "req_mine"


async def test_a_listing_sees_every_row_queued_before_it_under_steady_load(
    tmp_path: Path,
) -> None:
    store = BusyStore(tmp_path / "db.sqlite")
    await store.open()
    await store.migrate()
    writer = WriteBehind(store, time.time, interval=0.001)
    writer.start()
    counter = itertools.count()

    def record(request_id: str) -> RequestRecord:
        return RequestRecord(id=request_id, account_id="acct_t", key_id="key_1", created_at=1)

    store.during_write = lambda: writer.log(record(f"req_bg{next(counter)}"))
    try:
        for n in range(5):
            writer.log(record(f"req_mine{n}"))
        async with asyncio.timeout(5):
            await writer.flush_logged()
        found = {r.id for r in await store.list_requests(RequestFilters(), 500, None)}
    finally:
        store.during_write = lambda: None
        await writer.close()
        await store.close()
    assert {f"req_mine{n}" for n in range(5)} <= found


async def test_a_batch_with_a_refused_row_still_lands_its_other_rows(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "db.sqlite")
    await store.open()
    await store.migrate()
    usd = 10**9
    account = await store.create_account("acct_t", "team", metered=True, credits=usd, now=1)
    for n in range(3):
        hold = HoldRequest(f"hold_{n}", account.id, "key_1", f"req_{n}", usd // 10, 1, 10**10)
        assert await store.place_hold(hold)
    writer = WriteBehind(store, time.time, interval=0.01)
    writer.start()
    try:
        for n, charge in enumerate((1000, -50 * usd, 2000)):  # the second would mint credits
            writer.settle(Settlement(f"hold_{n}", account.id, "key_1", f"req_{n}", charge, 5))
        await writer.flush()
        after = await store.get_account("team")
    finally:
        await writer.close()
        await store.close()
    assert after is not None
    assert (after.balance, after.held, after.open_holds) == (usd - 3000, usd // 10, 1)


async def test_a_kept_response_can_be_read_back_under_steady_load(tmp_path: Path) -> None:
    """Stored responses ride the request log's batches; a lookup waits for its own."""
    store = BusyStore(tmp_path / "db.sqlite")
    await store.open()
    await store.migrate()
    writer = WriteBehind(store, time.time, interval=0.001)
    writer.start()
    counter = itertools.count()

    def kept(response_id: str) -> StoredResponse:
        return StoredResponse(
            id=response_id,
            account_id="acct_t",
            request_id="req_" + response_id,
            created_at=1,
            response=Raw(b'{"id":"%s"}' % response_id.encode()),
            items=Raw(b'"hi"'),
        )

    def more() -> None:  # every write of the log is overtaken by another answer
        writer.log(
            RequestRecord(id=f"req_bg{next(counter)}", account_id="a", key_id="k", created_at=1)
        )
        writer.keep(kept(f"resp_bg{next(counter)}"))

    store.during_write = more
    try:
        writer.keep(kept("resp_mine"))
        writer.log(RequestRecord(id="req_x", account_id="a", key_id="k", created_at=1))
        await asyncio.wait_for(writer.flush_kept("resp_mine"), 5)
        found = await store.get_response("resp_mine", "acct_t")
    finally:
        store.during_write = lambda: None
        await writer.close()
        await store.close()
    assert found is not None and bytes(found.response) == b'{"id":"resp_mine"}'


class GatedStore(SqliteStore):
    """Settles only when the gate is open: a writer that has fallen behind."""

    gate: asyncio.Event

    async def settle(self, settlements: list[Settlement]) -> None:
        await self.gate.wait()
        await super().settle(settlements)


async def test_a_writer_behind_holds_new_requests_until_its_next_batch_lands(
    tmp_path: Path,
) -> None:
    """Past a batch's worth of queued settlements the writer is ``behind``; ``catch_up``
    returns once the queue is written, and at most after its bound if it never is."""
    store = GatedStore(tmp_path / "db.sqlite")
    store.gate = asyncio.Event()
    await store.open()
    await store.migrate()
    writer = WriteBehind(store, time.time, interval=0.001)
    writer.start()

    def settle(n: int) -> None:
        writer.settle(Settlement(f"hold_{n}", "acct_x", "key_1", f"req_{n}", 0, 5))

    try:
        settle(0)
        await asyncio.sleep(0.05)  # the writer took it and waits at the gate
        for n in range(1, 64):
            settle(n)
        assert not writer.behind
        settle(64)
        assert writer.behind
        started = time.monotonic()
        await writer.catch_up()  # the gate stays shut: the wait is bounded
        assert 0.9 < time.monotonic() - started < 3
        waiting = asyncio.ensure_future(writer.catch_up())
        await asyncio.sleep(0.05)
        assert not waiting.done()
        store.gate.set()
        async with asyncio.timeout(5):
            await waiting
        assert not writer.behind
    finally:
        store.gate.set()
        await writer.close()
        await store.close()
