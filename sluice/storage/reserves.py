"""Reservations: a process's share of an account's credits, held in storage as one
open hold, from which its requests' holds are decided in memory
(:mod:`sluice.metering.escrow`, docs/metering.md#credit-reservations).

A reservation is a row of ``holds`` whose ``request_id`` is its own id and whose
``key_id`` is empty (it belongs to no key). Its amount counts in the account's
``held`` like any open hold, so what it covers cannot be held or spent by anyone
else. A request served from it is settled as a closed hold row of its own (the amount
held for it and the charge) while the reservation's amount goes down by the charge:
``held`` stays the sum of open holds, ``balance`` the sum of the ledger.
"""

from __future__ import annotations

from typing import Protocol

import msgspec


class ReserveRequest(msgspec.Struct, frozen=True):
    """Grow reservation ``hold_id`` (open it when it does not exist) by at least
    ``need`` and at most ``want``, as far as the account's available credits go."""

    hold_id: str
    account_id: str
    need: int
    want: int
    now: int
    expires_at: int


class ReserveChange(msgspec.Struct, frozen=True):
    """Give back ``release`` of reservation ``hold_id`` and move its expiry to
    ``expires_at``; with ``close``, give back all it still holds and close it."""

    hold_id: str
    account_id: str
    release: int
    expires_at: int
    now: int
    close: bool = False


class ReserveStore(Protocol):
    async def reserve(self, grow: ReserveRequest) -> int | None:
        """Atomically: what was added to the reservation (0: the account's available
        credits do not cover ``need``; nothing changed); None when the reservation was
        closed meanwhile (reclaimed as expired): nothing was granted, open another."""
        ...

    async def tend_reserves(self, changes: list[ReserveChange]) -> list[str]:
        """Apply every change in one transaction; the ids among them that are no longer
        open (reclaimed as expired), whose changes did nothing."""
        ...
