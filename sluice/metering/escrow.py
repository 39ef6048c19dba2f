"""Credit reservations: each process holds a share of a busy account's credits in
storage (one open hold, :mod:`sluice.storage.reserves`) and decides its requests' holds
from it in memory, so most metered requests make no storage round trip before their
upstream call (docs/metering.md#credit-reservations).

No overdraft: what this process counts as reserved never exceeds what storage holds
for it (a charge is taken off here at once and there when its batch is written), and
a hold is only taken when the reservation's unused part covers it. A reservation grows
when a hold does not fit: by at least what is missing and at most ``most`` holds of
that size, doubling with each growth, as far as the account's available credits go.
Unused for ``idle`` seconds it gives its unused part back, and closes once nothing
drawn from it is open or unwritten. Its expiry moves forward while it lives; a killed
process's reservations are reclaimed like any expired hold.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from sluice.ids import IdFactory
from sluice.storage.base import Settlement, Store
from sluice.storage.reserves import ReserveChange, ReserveRequest

_log = logging.getLogger("sluice.metering")


class Reservation:
    """This process's reservation of one account's credits."""

    __slots__ = (
        "account_id",
        "amount",
        "expires_at",
        "growing",
        "grows",
        "hold_id",
        "last_hold",
        "refused",
        "unwritten",
        "used",
    )

    def __init__(self, hold_id: str, account_id: str, now: float) -> None:
        self.hold_id = hold_id
        self.account_id = account_id
        self.amount = 0
        """What it holds: storage's amount less the charges not yet written there."""
        self.used = 0
        """The open holds drawn from it."""
        self.unwritten = 0
        """Settlements drawn from it that are queued, not yet written."""
        self.last_hold = now
        self.expires_at = 0
        self.grows = 0
        self.growing = asyncio.Lock()
        self.refused = 0
        """The smallest growth storage refused since the last tick (0: none): a hold
        that needs at least as much is refused without asking again."""

    @property
    def spare(self) -> int:
        return self.amount - self.used


class Escrow:
    def __init__(
        self,
        store: Store,
        *,
        new_id: IdFactory,
        wall_clock: Callable[[], float],
        clock: Callable[[], float],
        hold_ttl: float,
        idle: float,
        most: int,
    ) -> None:
        self._store = store
        self._new_id = new_id
        self._wall_clock = wall_clock
        self._clock = clock
        self._ttl = int(hold_ttl)
        self._idle = idle
        self._most = most
        self._by_account: dict[str, Reservation] = {}
        self._by_id: dict[str, Reservation] = {}
        self._retry: list[ReserveChange] = []
        """Closes that did not reach storage; tried again on the next tick."""
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._tend_forever())

    async def take(self, account_id: str, amount: int) -> Reservation | None:
        """Hold ``amount`` of the account's credits; None when they do not cover it."""
        r: Reservation | None = self._by_account.get(account_id) or self._open(account_id)
        assert r is not None
        if r.spare < amount:
            if r.refused and amount - r.spare >= r.refused:
                return None
            async with r.growing:
                r = await self._grown(r, amount)
            if r is None:
                return None
        r.used += amount
        r.last_hold = self._clock()
        return r

    def spare(self, account_id: str) -> int:
        """What this process holds of the account's credits unused."""
        r = self._by_account.get(account_id)
        return 0 if r is None else max(r.spare, 0)

    def forget_refusals(self, account_id: str) -> None:
        """The account's credits changed: a growth refused before may pass now."""
        r = self._by_account.get(account_id)
        if r is not None:
            r.refused = 0

    def settle(self, r: Reservation, held: int, charge: int) -> None:
        """A hold drawn from ``r`` ended, charged ``charge`` (to be written)."""
        r.used -= held
        r.amount -= charge
        r.unwritten += 1

    def written(self, settlements: list[Settlement]) -> None:
        """The write-behind is done with these (written, or given up on)."""
        for s in settlements:
            r = None if s.reservation is None else self._by_id.get(s.reservation)
            if r is not None:
                r.unwritten -= 1

    async def close(self) -> None:
        """Give every reservation back (the write-behind has drained)."""
        if self._task is not None:
            self._task.cancel()
            self._task = None
        now = int(self._wall_clock())
        changes = [self._closing(r, now) for r in list(self._by_account.values())]
        await self._apply([*self._retry, *changes])

    async def _grown(self, r: Reservation, amount: int) -> Reservation | None:
        """``r`` grown to cover ``amount`` (or another reservation, when ``r`` was
        reclaimed); None when the account cannot cover it."""
        while r.spare < amount:  # checked again after each growth: holds that fit took
            need = amount - r.spare  # from it meanwhile
            if r.refused and need >= r.refused:
                return None
            want = max(need, amount * min(2**r.grows, self._most) - r.spare)
            now = int(self._wall_clock())
            grow = ReserveRequest(r.hold_id, r.account_id, need, want, now, now + self._ttl)
            growing = asyncio.ensure_future(self._grow(r, grow))
            granted = await asyncio.shield(growing)  # lands in r even if the caller left
            if granted == 0:
                r.refused = min(r.refused or need, need)
                return None
            if granted is None:
                r = self._open(r.account_id)
        return r

    async def _grow(self, r: Reservation, grow: ReserveRequest) -> int | None:
        granted = await self._store.reserve(grow)
        if granted is None:  # reclaimed as expired: what was drawn from it was let go
            self._forget(r)
        elif granted:
            r.amount += granted
            r.grows += 1
            r.expires_at = grow.expires_at
        return granted

    def _open(self, account_id: str) -> Reservation:
        r = Reservation(self._new_id("resv"), account_id, self._clock())
        self._by_account[account_id] = self._by_id[r.hold_id] = r
        return r

    def _forget(self, r: Reservation) -> None:
        if self._by_account.get(r.account_id) is r:
            del self._by_account[r.account_id]
        self._by_id.pop(r.hold_id, None)

    def _closing(self, r: Reservation, now: int) -> ReserveChange:
        self._forget(r)
        return ReserveChange(r.hold_id, r.account_id, 0, r.expires_at, now, close=True)

    async def give_back(self) -> None:
        """Give back now what is unused, as if every reservation had been idle (an
        operator's or a test's "settle everything")."""
        await self._apply([*self._retry, *self._changes(everything=True)])

    def _changes(self, everything: bool = False) -> list[ReserveChange]:
        """What each reservation gives back or needs this tick (applied here at once)."""
        moment, wall = self._clock(), self._wall_clock()
        now = int(wall)
        changes = []
        for r in list(self._by_account.values()):
            if r.growing.locked():
                continue
            r.refused = 0  # credits given back elsewhere are asked for again
            idle = everything or moment - r.last_hold >= self._idle
            # by the clock's fraction too: an expiry in whole seconds, renewed at the last
            # whole second, would race the reclaim that compares it with the same second
            renew = r.expires_at - wall < self._ttl / 2
            if idle and r.used == 0 and r.unwritten == 0:
                changes.append(self._closing(r, now))
            elif (idle and r.spare > 0) or renew:
                give = r.spare if idle else 0
                r.amount -= give
                r.grows = 0 if idle else r.grows
                r.expires_at = now + self._ttl
                changes.append(ReserveChange(r.hold_id, r.account_id, give, r.expires_at, now))
        return changes

    async def _tend_forever(self) -> None:
        tick = min(0.25, self._idle / 2, self._ttl / 4)
        while True:
            await asyncio.sleep(tick)
            await self._apply([*self._retry, *self._changes()])

    async def _apply(self, changes: list[ReserveChange]) -> None:
        self._retry = []
        if not changes:
            return
        try:
            gone = await self._store.tend_reserves(changes)
        except Exception:
            _log.exception("giving back %d credit reservations failed; retrying", len(changes))
            self._retry = [c for c in changes if c.close]
            return
        for hold_id in gone:
            r = self._by_id.get(hold_id)
            if r is not None:
                _log.warning("credit reservation %s was reclaimed as expired", hold_id)
                self._forget(r)
