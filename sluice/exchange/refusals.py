"""Refusals before any upstream call, coalesced in the request log.

A request refused before it reached an upstream (past its rate limit, out of credits,
a model it may not use or that does not exist) costs its caller nothing, so a client
can send them as fast as it likes. Each one is counted in the metrics; in the request
log, the first refusal of a key with a given status and code opens a window
(``window`` seconds) and gets a row; the refusals like it in that window do not get
rows of their own but are counted on that row (``coalesced``), which is written again
at most once per ``rewrite_every`` seconds. One client hammering a closed door writes
one row a minute, not thousands a second.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from sluice.storage.base import RequestRecord
from sluice.storage.writer import WriteBehind

REFUSAL_STATUSES = frozenset((402, 403, 404, 429))
"""What a request refused before its upstream can answer (a guardrail's block is not
one: it is logged whole, as it is the record of a decision about its content)."""


class _Window:
    __slots__ = ("ends", "rewrite", "row")

    def __init__(self, row: RequestRecord, ends: float) -> None:
        self.row = row
        self.ends = ends
        self.rewrite: asyncio.TimerHandle | None = None


class RefusalLog:
    """Owned by the gateway (shared by every configuration a reload swaps in)."""

    def __init__(
        self,
        log: WriteBehind,
        clock: Callable[[], float],
        *,
        window: float = 60.0,
        rewrite_every: float = 1.0,
        most_windows: int = 10_000,
    ) -> None:
        self._log = log
        self._clock = clock
        self._window = window
        self._rewrite_every = rewrite_every
        self._most = most_windows
        self._open: dict[tuple[str, int, str | None], _Window] = {}

    def log(self, record: RequestRecord) -> None:
        """Log the refusal ``record`` (a row, or one more on its window's row)."""
        now = self._clock()
        ident = (record.key_id, record.http_status, record.error_code)
        open_ = self._open.get(ident)
        if open_ is not None and open_.ends > now:
            open_.row.coalesced += 1
            if open_.rewrite is None:
                loop = asyncio.get_running_loop()
                open_.rewrite = loop.call_later(self._rewrite_every, self._rewrite, open_)
            return
        if len(self._open) >= self._most:
            self._sweep(now)
        self._open[ident] = _Window(record, now + self._window)
        self._log.log(record)

    def _rewrite(self, window: _Window) -> None:
        window.rewrite = None
        self._log.log(window.row)  # the same id: the row is replaced

    def _sweep(self, now: float) -> None:
        """Forget closed windows (and, if that is not enough, every one)."""
        for ident, window in list(self._open.items()):
            if window.ends <= now and window.rewrite is None:
                del self._open[ident]
        if len(self._open) >= self._most:
            self._open.clear()

    def close(self) -> None:
        """Write every count still waiting (before the write-behind log closes)."""
        for window in self._open.values():
            if window.rewrite is not None:
                window.rewrite.cancel()
                self._rewrite(window)
        self._open.clear()
