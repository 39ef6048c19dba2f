"""Requests that cost their client nothing and can be repeated as fast as it likes:
refusals before any upstream call, and token counts answered from the cache. Each is
counted in the metrics; in the request log they are coalesced (:class:`RepeatLog`), and
a key that keeps being refused is answered more slowly (:class:`Tarpit`).

The first refusal of a key with a given status and code (the first cached count of a key
and model) opens a window (``window`` seconds) and gets a row; the repeats in that
window do not get rows of their own but are counted on that row (``coalesced``), which
is written again at most once per ``rewrite_every`` seconds. One client hammering a
closed door writes one row a minute, not thousands a second.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from sluice.core.principal import Principal
from sluice.errors import ApiError
from sluice.storage.base import RequestRecord
from sluice.storage.writer import WriteBehind

if TYPE_CHECKING:
    from sluice.exchange.services import Services

BODY_WEIGHT_BYTES = 256 * 1024
"""A refusal weighs one, and one more per this many bytes of body the gateway read (and
scanned) to refuse it: about what answering a small refusal costs."""
REFUSAL_STATUSES = frozenset((402, 403, 404, 429))
"""What a request refused before its upstream can answer (a guardrail's block is not
one: it is logged whole, as it is the record of a decision about its content)."""


class _Window:
    __slots__ = ("ends", "rewrite", "row")

    def __init__(self, row: RequestRecord, ends: float) -> None:
        self.row = row
        self.ends = ends
        self.rewrite: asyncio.TimerHandle | None = None


Repeat = tuple[str, int, str | None]
"""What makes two rows repeats of each other: the key, the status and the code."""


class RepeatLog:
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
        self._open: dict[Repeat, _Window] = {}

    def log(self, record: RequestRecord, ident: Repeat | None = None) -> None:
        """Log ``record`` (a row, or one more on its window's row); ``ident``: what it
        repeats, its key, status and error code unless given."""
        now = self._clock()
        if ident is None:
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


class Tarpit:
    """Keys that keep being refused are answered more slowly.

    A refusal is cheap, but not free: a client ignoring ``Retry-After`` on a few
    keep-alive connections can send thousands a second and take the event loop from
    every other tenant. Each key may be refused ``burst`` times at once and
    ``per_second`` times a second as fast as the gateway can answer; past that, each of
    its refusals is held for ``hold`` seconds (or its ``Retry-After``, if shorter)
    before it is sent. Holding costs a timer: the connection is busy meanwhile, so a
    proxy pooling connections sends other clients' requests on others, and the
    client's next request on it waits.
    """

    def __init__(
        self,
        clock: Callable[[], float],
        *,
        burst: float = 20.0,
        per_second: float = 10.0,
        hold: float = 1.0,
        most_keys: int = 10_000,
    ) -> None:
        self._clock = clock
        self._burst = burst
        self._rate = per_second
        self._hold = hold
        self._most = most_keys
        self._room: dict[str, tuple[float, float]] = {}
        """Key id -> (refusals it may have at once, when that was worked out)."""

    def holding(self, key_id: str) -> bool:
        """``key_id``'s next refusal would be held: it is past its burst and rate."""
        return self._now_room(key_id)[0] < 1.0

    def _now_room(self, key_id: str) -> tuple[float, float]:
        now = self._clock()
        room, then = self._room.get(key_id, (self._burst, now))
        return min(self._burst, room + (now - then) * self._rate), now

    def hold(self, key_id: str, retry_after: float | None, body_bytes: int = 0) -> float:
        """Seconds to hold this refusal of ``key_id`` before sending it (0: none). A
        refusal counts one, and one more per :data:`BODY_WEIGHT_BYTES` of body read."""
        room, now = self._now_room(key_id)
        if len(self._room) >= self._most and key_id not in self._room:
            self._room.clear()
        weight = 1.0 + body_bytes / BODY_WEIGHT_BYTES
        if room >= weight:
            self._room[key_id] = (room - weight, now)
            return 0.0
        self._room[key_id] = (max(room - weight, -self._burst), now)
        if retry_after is not None and retry_after > 0:
            return min(retry_after, self._hold)
        return self._hold


async def held(
    services: Services, principal: Principal, err: ApiError, body_bytes: int = 0
) -> None:
    """Hold a refusal of ``principal``'s key as long as the tarpit says."""
    delay = services.tarpit.hold(principal.key_id, err.retry_after, body_bytes)
    if delay:
        await asyncio.sleep(delay)
