"""A key's quick calls are paced to a share of the event loop.

One event loop serves every tenant, in the order work becomes ready: a key reading as
fast as the gateway answers (models, the request log, spend, count_tokens: calls that
are all work and no waiting on an upstream) would take as much of it as it can send,
and every other tenant's next step waits behind it. Each key's quick calls are timed
(and charged :data:`CALL_COST` for what surrounds them);
a key whose calls took more than :data:`SHARE` of the time lately (a burst of
:data:`BURST` seconds aside) waits before its next one until it is back within it,
costing nothing meanwhile. Streams and whole answers are not paced: a client runs many
at once, and they spend their lives waiting on upstreams.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Final

SHARE: Final = 0.1
"""Of each second, what one key's quick calls may take, in the long run."""
BURST: Final = 0.1
"""Seconds of quick calls a key may take at once, from idle."""
CALL_COST: Final = 150e-6
"""What a call costs the loop besides its handler (reading and parsing it, its key, its
limits, the access log, the answer's way out): measured, a key's `GET /v1/models` took
194 us of the gateway's CPU each and a cached count_tokens 264 us, of which the
handlers' own time is the smaller part."""


class Pacer:
    """Owned by the gateway; remembers the keys that have been busy lately (bounded)."""

    def __init__(
        self,
        clock: Callable[[], float],
        *,
        share: float = SHARE,
        burst: float = BURST,
        most_keys: int = 10_000,
    ) -> None:
        self._clock = clock
        self._share = share
        self._burst = burst
        self._most = most_keys
        self._credit: dict[str, tuple[float, float]] = {}
        """Key id -> (seconds of calls it may still take now, when that was worked out)."""

    def _now_credit(self, key_id: str) -> float:
        now = self._clock()
        credit, then = self._credit.get(key_id, (self._burst, now))
        return min(self._burst, credit + (now - then) * self._share)

    @asynccontextmanager
    async def paced(self, key_id: str) -> AsyncIterator[None]:
        """Run the block in ``key_id``'s share: first wait while the key is in debt."""
        credit = self._now_credit(key_id)
        if credit < 0:
            await asyncio.sleep(-credit / self._share)
        started = self._clock()
        try:
            yield
        finally:
            took = self._clock() - started + CALL_COST
            if len(self._credit) >= self._most and key_id not in self._credit:
                self._credit.clear()
            self._credit[key_id] = (self._now_credit(key_id) - took, self._clock())
