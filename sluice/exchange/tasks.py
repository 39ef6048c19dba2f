"""Work that outlives a request's response: drains (a stream read on after its client
left, ``on_disconnect = "drain"``) and settling rate-limit tokens; and the requests
running now, whose request-log row can be read while they run. Owned by the gateway
(shared by every configuration a reload swaps in); closed with it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from sluice.core.stopping import stopped
from sluice.storage.base import RequestRecord

_log = logging.getLogger("sluice.server")


class Tasks:
    __slots__ = (
        "_background",
        "_by_account",
        "_clock",
        "_drains",
        "_hold_ttl",
        "_may_drain",
        "_running",
    )

    def __init__(self, clock: Callable[[], float], hold_ttl: float) -> None:
        self._clock = clock
        self._hold_ttl = hold_ttl
        self._background: set[asyncio.Task[None]] = set()
        self._drains: set[asyncio.Task[None]] = set()
        self._may_drain = True
        self._running: dict[str, Callable[[], RequestRecord]] = {}
        self._by_account: dict[str, dict[str, Callable[[], RequestRecord]]] = {}
        """The same, by account: an account's live feed reads its own requests only."""

    def running(
        self, request_id: str, account_id: str, snapshot: Callable[[], RequestRecord]
    ) -> None:
        """A request started: ``snapshot()`` gives its row as it stands."""
        self._running[request_id] = snapshot
        self._by_account.setdefault(account_id, {})[request_id] = snapshot

    def finished(self, request_id: str, account_id: str) -> None:
        self._running.pop(request_id, None)
        own = self._by_account.get(account_id)
        if own is not None:
            own.pop(request_id, None)
            if not own:
                del self._by_account[account_id]

    def live(self, request_id: str) -> RequestRecord | None:
        """The row of a request still running (its ``status`` ``in_progress``), if it is."""
        snapshot = self._running.get(request_id)
        return None if snapshot is None else snapshot()

    def in_flight(
        self, account_id: str | None = None, limit: int | None = None
    ) -> list[RequestRecord]:
        """The rows of the requests running now (one account's, or every one's), oldest
        first: at most ``limit`` of them (the oldest), each built only when returned."""
        running = self._running if account_id is None else self._by_account.get(account_id, {})
        snapshots = tuple(running.values())[:limit]
        return [snapshot() for snapshot in snapshots]

    def running_count(self, account_id: str | None = None) -> int:
        """How many requests are running now (one account's, or every one's)."""
        if account_id is None:
            return len(self._running)
        return len(self._by_account.get(account_id, ()))

    @property
    def stopping(self) -> bool:
        """The gateway is shutting down (long-lived answers end)."""
        return not self._may_drain

    def counts(self) -> tuple[int, int]:
        """How many requests are running now, and how many of them are drains (for
        metrics, read when scraped)."""
        return len(self._running), len(self._drains)

    def background(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def drain(
        self,
        work: Callable[[], Coroutine[Any, Any, None]],
        *,
        started: float,
        request_id: str,
        then: Callable[[], None],
    ) -> asyncio.Task[None] | None:
        """Run ``work()`` unwatched, then ``then()`` however it ended; cut before the
        request's credit hold expires (an expired hold is reclaimed free). None, and
        nothing started, once the gateway is stopping."""
        if not self._may_drain:
            return None
        budget = 0.9 * self._hold_ttl - (self._clock() - started)
        task = asyncio.get_running_loop().create_task(
            self._drained(work(), budget, request_id, then)
        )
        self._drains.add(task)
        task.add_done_callback(self._drains.discard)
        return task

    @staticmethod
    async def _drained(
        work: Coroutine[Any, Any, None], budget: float, request_id: str, then: Callable[[], None]
    ) -> None:
        try:
            async with asyncio.timeout(budget):
                await work
        except TimeoutError:
            _log.warning("drain of request %s cut at its hold's lifetime", request_id)
        except Exception:
            _log.exception("draining request %s failed", request_id)
        finally:
            then()

    def stop_draining(self) -> None:
        """Shutting down: a client leaving from now on cancels its upstream call."""
        self._may_drain = False

    async def close(self) -> None:
        """Cancel the drains until they end (each is settled with what it read so far),
        then wait a little for the background work."""
        self._may_drain = False
        await stopped(list(self._drains))
        if self._background:
            await asyncio.wait(self._background, timeout=5)
