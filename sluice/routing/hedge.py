"""Hedged first tokens (docs/api.md#hedged-first-tokens): a stream whose attempt has not
produced its first event ``hedge_after`` seconds after it started also starts the rest
of the plan beside it, and keeps whichever produces its first event first; the other is
cancelled at once (before any of its content reached the client, so nothing of it is
charged). A budget keeps hedges to a share of the streams that could fire one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from sluice.errors import ApiError

_T = TypeVar("_T")
_BURST = 1.0
"""Hedges the budget holds before any traffic (a quiet gateway may hedge at once)."""


class HedgeBudget:
    """A token bucket: each stream that could hedge adds ``share`` of a hedge, a hedge
    takes one; at most :data:`_BURST` (or ``share`` x 10) saved up."""

    __slots__ = ("_most", "_share", "_tokens")

    def __init__(self, share: float) -> None:
        self._share = share
        self._most = max(_BURST, share * 10) if share > 0 else 0.0
        self._tokens = self._most

    def take(self) -> bool:
        """A stream may hedge now (its share added first): True, and the hedge paid for."""
        self._tokens = min(self._most, self._tokens + self._share)
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False


class Hedge:
    """One race: whether it was decided, so the loser's cancellation is recorded as
    lost to the hedge rather than as the client leaving."""

    __slots__ = ("after", "decided")

    def __init__(self, after: float) -> None:
        self.after = after
        self.decided = False


async def race(
    first: asyncio.Task[_T],
    hedge: Hedge,
    start_rest: Callable[[], Awaitable[_T]],
    close: Callable[[_T], None],
) -> tuple[_T, bool]:
    """``first`` against the rest of the plan started ``hedge.after`` seconds in: the
    first result and whether the rest won. A failure that allows failover waits for the
    other, both failing raises the later error; one that does not is raised at once.
    The loser is cancelled (a result it had already produced is closed)."""
    rest = asyncio.ensure_future(start_rest())
    pending: set[asyncio.Task[_T]] = {first, rest}
    failure: ApiError | None = None
    try:
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            opened = [task for task in done if task.exception() is None]
            if opened:  # both may open in one turn: the first kept, the other closed
                hedge.decided = True
                for extra in opened[1:]:
                    close(extra.result())
                return opened[0].result(), opened[0] is rest
            for task in done:
                exc = task.exception()
                if not isinstance(exc, ApiError) or not exc.failover:
                    assert exc is not None
                    raise exc  # not the connection's fault: the other would fail alike
                failure = exc
        assert failure is not None
        raise failure
    finally:
        for task in pending:
            task.cancel()
        if pending:  # the loser's cancellation or failure is recorded by it
            for ended in await asyncio.gather(*pending, return_exceptions=True):
                if not isinstance(ended, BaseException):
                    close(ended)  # it produced its first event in the same turn: unused
