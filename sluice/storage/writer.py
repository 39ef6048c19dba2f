"""Per-request writes, off the hot path: settlements, request-log rows and stored
responses.

The request hands its rows to :class:`WriteBehind` (no await, no I/O) and goes on; one
task writes them in batches. A failed batch is retried a few times, then dropped with
an error in the log: an unsettled hold expires and is reclaimed, so money stays
consistent (the request is then not charged). A batch the database refuses for one
bad row (:class:`~sluice.storage.base.ConstraintViolationError`) is written row by row, so
only that row is dropped. The same task reclaims expired holds now and then and, given a
:class:`~sluice.storage.retention.Retention`, prunes the request log: one short batch
between its writes, so a long prune never holds up a settlement for more than that.
``close`` drains what is queued.

The queue is bounded in time, not only in memory: once more is queued than a batch
should hold (:attr:`WriteBehind.behind`), new requests wait for the next batch to land
(:meth:`WriteBehind.catch_up`, at most ``_CATCH_UP_WAIT``). A writer that falls behind a
busy event loop (SQLite's thread waits for the GIL at every statement step) would
otherwise let the charges clients were told of pile up unwritten, and a crash would
lose them (docs/metering.md#what-a-crash-can-lose). Waiting idles the loop, which is
what lets the writing thread catch up.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from sluice.config import MeteringConfig, StorageConfig
from sluice.storage.base import ConstraintViolationError, RequestRecord, Settlement, Store
from sluice.storage.responses import StoredResponse
from sluice.storage.retention import Pruner, Retention

_log = logging.getLogger("sluice.storage")
_RETRIES = 5
_BEHIND_SETTLEMENTS = 64
"""Settlements queued, beyond the batch being written, that make new requests wait."""
_BEHIND_RECORDS = 512
"""Request-log rows queued, likewise (the log is larger and its lag costs no money)."""
_CATCH_UP_WAIT = 1.0
"""The longest a request waits for the writer: a database that fails for longer (its
writes retried) must not stop traffic that has nothing to settle."""
_Row = TypeVar("_Row")


class WriteBehind:
    def __init__(
        self,
        store: Store,
        wall_clock: Callable[[], float],
        *,
        interval: float = 0.05,
        reclaim_every: float = 30.0,
        retention: Retention | None = None,
        settled: Callable[[list[Settlement]], None] | None = None,
    ) -> None:
        """``settled``: told of each batch of settlements once it is written (or given
        up on)."""
        self._store = store
        self._settled = settled
        self._wall_clock = wall_clock
        self._interval = interval
        self._reclaim_every = reclaim_every
        self._settlements: list[Settlement] = []
        self._records: list[RequestRecord] = []
        self._pending_ids: set[str] = set()
        self._kept: list[StoredResponse] = []
        self._kept_ids: set[str] = set()
        self._wake = asyncio.Event()
        self._full = asyncio.Event()
        """Set while :attr:`behind`: the writer stops gathering and writes."""
        self._idle = asyncio.Event()
        self._idle.set()
        self._batch_written = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._pruner = None if retention is None else Pruner(store, retention, wall_clock)

    @classmethod
    def configured(
        cls,
        store: Store,
        wall_clock: Callable[[], float],
        metering: MeteringConfig,
        storage: StorageConfig,
        settled: Callable[[list[Settlement]], None] | None = None,
    ) -> WriteBehind:
        """As ``[metering] reclaim_interval`` and ``[storage] request_log_retention`` and
        ``request_log_max_rows`` say."""
        retention = Retention.from_config(storage)
        every = metering.reclaim_interval
        return cls(store, wall_clock, reclaim_every=every, retention=retention, settled=settled)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    def settle(self, settlement: Settlement) -> None:
        self._settlements.append(settlement)
        self._idle.clear()
        self._wake.set()
        if self.behind:
            self._full.set()

    def log(self, record: RequestRecord) -> None:
        self._records.append(record)
        self._pending_ids.add(record.id)
        self._idle.clear()
        self._wake.set()
        if self.behind:
            self._full.set()

    def keep(self, response: StoredResponse) -> None:
        """A stored response, written with the next batch."""
        self._kept.append(response)
        self._kept_ids.add(response.id)
        self._idle.clear()
        self._wake.set()

    async def flush_kept(self, response_id: str) -> None:
        """Read-your-writes for stored responses: wait until that one's batch is written."""
        while response_id in self._kept_ids:
            await self._batch_written.wait()

    @property
    def behind(self) -> bool:
        """More is queued than the writer should hold: new requests :meth:`catch_up`."""
        return (
            len(self._settlements) >= _BEHIND_SETTLEMENTS or len(self._records) >= _BEHIND_RECORDS
        )

    async def catch_up(self) -> None:
        """Wait (at most ``_CATCH_UP_WAIT``) until the writer is no longer :attr:`behind`."""
        loop = asyncio.get_running_loop()
        until = loop.time() + _CATCH_UP_WAIT
        while self.behind and self._task is not None and not self._task.done():
            left = until - loop.time()
            if left <= 0:
                return
            try:
                await asyncio.wait_for(self._batch_written.wait(), left)
            except TimeoutError:
                return

    async def flush(self) -> None:
        """Wait until everything queued so far is written (tests, shutdown)."""
        await self._idle.wait()

    async def flush_pending(self, request_id: str) -> None:
        """Read-your-writes for the request log: wait until that row's batch is written.

        Per batch, not for idle: under steady traffic the queue may never be empty.
        """
        while request_id in self._pending_ids:
            await self._batch_written.wait()

    async def flush_logged(self) -> None:
        """Read-your-writes for a listing: wait until every request-log row queued so far
        is written (rows queued meanwhile are not waited for)."""
        queued = set(self._pending_ids)
        while not queued.isdisjoint(self._pending_ids):
            await self._batch_written.wait()

    async def close(self) -> None:
        self._closing = True
        self._wake.set()
        if self._task is not None:
            await self._task
            self._task = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        next_reclaim = loop.time()
        while True:
            if loop.time() >= next_reclaim:
                await self._reclaim()
                next_reclaim = loop.time() + self._reclaim_every
            if self._pruner is not None and not self._closing:
                await self._pruner.step(loop.time())
            if not self._settlements and not self._records and not self._kept:
                self._idle.set()
                if self._closing:
                    return
                pause = next_reclaim - loop.time()
                if self._pruner is not None:
                    pause = min(pause, self._pruner.due_in(loop.time()))
                if pause <= 0:
                    continue
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), pause)
                except TimeoutError:
                    continue
                with contextlib.suppress(TimeoutError):  # gather a batch, unless behind
                    await asyncio.wait_for(self._full.wait(), self._interval)
            self._full.clear()
            settlements, self._settlements = self._settlements, []
            records, self._records = self._records, []
            kept, self._kept = self._kept, []
            if settlements:
                await self._write("settlements", self._store.settle, settlements)
                if self._settled is not None:
                    self._settled(settlements)
            if records:
                await self._write("request log", self._store.write_requests, records)
                self._pending_ids.difference_update(r.id for r in records)
            if kept:
                await self._write("stored response", self._store.save_responses, kept)
                self._kept_ids.difference_update(r.id for r in kept)
            written, self._batch_written = self._batch_written, asyncio.Event()
            written.set()

    async def _write(
        self, what: str, write: Callable[[list[_Row]], Awaitable[None]], rows: list[_Row]
    ) -> None:
        for attempt in range(_RETRIES):
            try:
                await write(rows)
                return
            except ConstraintViolationError:
                if len(rows) == 1:
                    _log.error("dropping a %s row the database refused: %s", what, rows[0])
                    return
                for row in rows:  # find the bad one; the others still land
                    await self._write(what, write, [row])
                return
            except Exception:
                if attempt == _RETRIES - 1:
                    _log.exception("dropping %d %s rows after %d tries", len(rows), what, _RETRIES)
                    return
                _log.warning("writing %d %s rows failed; retrying", len(rows), what)
                await asyncio.sleep(0.1 * 2**attempt)

    async def _reclaim(self) -> None:
        try:
            reclaimed = await self._store.reclaim_expired(int(self._wall_clock()))
        except Exception:
            _log.exception("reclaiming expired holds failed")
            return
        if reclaimed:
            _log.warning("reclaimed %d expired credit holds", reclaimed)
