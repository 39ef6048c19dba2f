"""How long the request log keeps its rows (and stored responses theirs), and the
pruning that holds them to that.

``[storage] request_log_retention`` (an age) and ``request_log_max_rows`` (a count) set
a :class:`Retention`; the write-behind task (:mod:`~sluice.storage.writer`) runs a
:class:`Pruner` step between its batches. A prune starts every ``every`` seconds: it
finds the cut (the newer of "older than the age" and "past the newest ``max_rows``"),
then deletes the rows before it oldest first, ``batch`` rows per transaction, one
transaction per step, so a backlog of millions never holds SQLite's write lock for
more than one short batch. The ledger is never pruned: spend reports and balances
read it, never the log.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import msgspec

from sluice.config import StorageConfig
from sluice.storage.base import RequestPosition, Store

_log = logging.getLogger("sluice.storage")

PRUNE_BATCH = 200
"""Rows one prune transaction deletes: about 10 ms of SQLite's write lock (each row
leaves a dozen indexes), measured on a 200,000-row log."""


class Retention(msgspec.Struct, frozen=True, kw_only=True):
    """``max_age`` in seconds and ``max_rows`` of the request log, ``response_max_age``
    of stored responses; None keeps them in that regard."""

    max_age: int | None = None
    max_rows: int | None = None
    response_max_age: int | None = None
    every: float = 60.0
    """Seconds from the start of one prune to the next."""
    batch: int = PRUNE_BATCH

    @classmethod
    def from_config(cls, storage: StorageConfig) -> Retention | None:
        """The settings of ``[storage]``; None when they keep every row."""
        age, rows = storage.request_log_retention_seconds, storage.request_log_max_rows
        responses = storage.response_retention_seconds
        if age is None and rows is None and responses is None:
            return None
        return cls(max_age=age, max_rows=rows, response_max_age=responses)


class Pruner:
    """A prune in steps: :meth:`step` starts one when due, else deletes one batch of
    the one under way (stored responses first, then the request log)."""

    def __init__(self, store: Store, retention: Retention, wall_clock: Callable[[], float]):
        self._store = store
        self._retention = retention
        self._wall_clock = wall_clock
        self._cut: RequestPosition | None = None
        self._responses_before: int | None = None
        self._due = 0.0

    @property
    def busy(self) -> bool:
        """A prune is under way: its next batch should not wait for the next one due."""
        return self._cut is not None or self._responses_before is not None

    def due_in(self, now: float) -> float:
        """Seconds (of the loop's clock, ``now``) until the next prune starts."""
        return 0.0 if self.busy else max(0.0, self._due - now)

    async def step(self, now: float) -> int:
        """Start a prune if one is due, then delete a batch of the one under way; how
        many rows went. A failure is logged and ends the prune (the next starts afresh)."""
        if not self.busy:
            if now < self._due:
                return 0
            self._due = now + self._retention.every
            age = self._retention.response_max_age
            if age is not None:
                self._responses_before = int(self._wall_clock()) - age
            try:
                self._cut = await self._find_cut()
            except Exception:
                _log.exception("pruning the request log failed")
        if self._responses_before is not None:
            return await self._responses_step(self._responses_before)
        if self._cut is None:
            return 0
        try:
            deleted = await self._store.prune_requests(self._cut, self._retention.batch)
        except Exception:
            _log.exception("pruning the request log failed")
            self._cut = None
            return 0
        if deleted < self._retention.batch:
            self._cut = None
        return deleted

    async def _responses_step(self, before: int) -> int:
        try:
            deleted = await self._store.prune_responses(before, self._retention.batch)
        except Exception:
            _log.exception("pruning the stored responses failed")
            deleted = 0
        if deleted < self._retention.batch:
            self._responses_before = None
        return deleted

    async def _find_cut(self) -> RequestPosition | None:
        cuts: list[RequestPosition] = []
        if self._retention.max_age is not None:
            cuts.append((int(self._wall_clock()) - self._retention.max_age, ""))
        if self._retention.max_rows is not None:
            oldest_kept = await self._store.request_log_cutoff(self._retention.max_rows)
            if oldest_kept is not None:
                cuts.append(oldest_kept)
        return max(cuts, default=None)
