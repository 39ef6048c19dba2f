"""Rate-limit arithmetic (pure): GCRA, a token bucket kept as one number.

``limit`` units per ``window`` is a bucket of ``limit`` units that refills continuously
at ``limit / window``: from full, a burst of ``limit`` passes, then one unit every
``window / limit``. Its state is a *debt*: what was charged and has not drained yet,
in unit·milliseconds. Charging ``n`` units adds ``n * window_ms``; each millisecond
drains ``limit``. Everything is an integer, so every comparison is exact here and in
the Redis script (Lua numbers are doubles: exact below 2**53, hence the bound on
:class:`LimitSpec`).
"""

from __future__ import annotations

import msgspec


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


class Bucket(msgspec.Struct, frozen=True):
    limit: int
    window_ms: int

    def drained(self, debt: int, elapsed_ms: int) -> int:
        """The debt ``elapsed_ms`` later (a clock going backwards drains nothing)."""
        return max(0, debt - max(0, elapsed_ms) * self.limit)

    def wait_ms(self, debt: int, cost: int) -> int:
        """Milliseconds until ``cost`` units fit; 0: they fit now. A cost above the limit
        fits only an empty bucket (it is charged in full, so the bucket goes into debt)."""
        excess = debt - max(0, self.limit - cost) * self.window_ms
        return ceil_div(excess, self.limit) if excess > 0 else 0

    def charge(self, debt: int, amount: int) -> int:
        """Add ``amount`` units (negative: a refund, never below an empty bucket)."""
        return max(0, debt + amount * self.window_ms)

    def remaining(self, debt: int) -> int:
        """Whole units that fit now."""
        return max(0, (self.limit * self.window_ms - debt) // self.window_ms)

    def reset_ms(self, debt: int) -> int:
        """Milliseconds until the bucket is full again."""
        return ceil_div(debt, self.limit)
