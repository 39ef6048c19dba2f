"""Limits held in this process (one gateway process).

Exact under asyncio concurrency: ``admit`` and ``finish`` never await, so each runs as
one step of the event loop. Buckets that have drained are the same as absent buckets;
they are swept out whenever the table doubles, so memory follows the buckets active
within the last window.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from sluice.limits.bucket import ceil_div
from sluice.limits.decision import (
    Decision,
    Line,
    Subject,
    Ticket,
    admission_lines,
    decide,
    fits,
    settlement_lines,
)

MIN_SWEEP = 1024


class _State:
    __slots__ = ("at_ms", "debt", "empty_at_ms")

    def __init__(self, debt: int, at_ms: int, limit: int) -> None:
        self.debt = debt
        self.at_ms = at_ms
        self.empty_at_ms = at_ms + ceil_div(debt, limit)


class MemoryLimiter:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._buckets: dict[str, _State] = {}
        self._sweep_at = MIN_SWEEP

    def __len__(self) -> int:
        """Buckets held (drained ones included until the next sweep)."""
        return len(self._buckets)

    async def admit(self, subject: Subject, estimated_tokens: int) -> Decision:
        lines = admission_lines(subject, estimated_tokens)
        now = self._now_ms()
        debts = [self._debt(line, now) for line in lines]
        allowed = fits(lines, debts)
        if allowed:
            debts = self._apply(lines, debts, now)
        return decide(Ticket(subject, estimated_tokens), lines, debts, allowed)

    async def finish(self, ticket: Ticket, total_tokens: int) -> None:
        lines = settlement_lines(ticket, total_tokens)
        now = self._now_ms()
        self._apply(lines, [self._debt(line, now) for line in lines], now)

    async def check(self) -> None:
        """In this process: always ready."""

    async def close(self) -> None:
        self._buckets.clear()

    def _now_ms(self) -> int:
        return round(self._clock() * 1000)

    def _debt(self, line: Line, now: int) -> int:
        state = self._buckets.get(line.ident)
        return 0 if state is None else line.bucket.drained(state.debt, now - state.at_ms)

    def _apply(self, lines: list[Line], debts: list[int], now: int) -> list[int]:
        after = []
        for line, debt in zip(lines, debts, strict=True):
            charged = line.bucket.charge(debt, line.amount)
            if charged:
                self._buckets[line.ident] = _State(charged, now, line.bucket.limit)
            else:
                self._buckets.pop(line.ident, None)
            after.append(charged)
        if len(self._buckets) >= self._sweep_at:
            self._sweep(now)
        return after

    def _sweep(self, now: int) -> None:
        drained = [ident for ident, s in self._buckets.items() if s.empty_at_ms <= now]
        for ident in drained:
            del self._buckets[ident]
        self._sweep_at = max(MIN_SWEEP, 2 * len(self._buckets))
