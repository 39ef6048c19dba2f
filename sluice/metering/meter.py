"""Credit holds before the upstream call, settlement after it
(docs/api.md#credits-and-cancellation).

A hold gates the upstream call. A key without a budget (nor its account) holds from
this process's reservation of the account's credits, in memory (:mod:`.escrow`); a
budgeted one places its hold in storage, one round trip, as the budget must see every
process's holds. The settlement is queued on the write-behind queue and never delays
the stream. Unmetered accounts (the development account) are not held or charged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import NoReturn

import msgspec

from sluice.core.money import usd_text
from sluice.core.principal import Allowance, Principal, period_start
from sluice.errors import BudgetExceededError
from sluice.ids import IdFactory
from sluice.metering.escrow import Escrow, Reservation
from sluice.storage.base import HoldRequest, Settlement, Store
from sluice.storage.budgets import Budget
from sluice.storage.writer import WriteBehind

EMPTY_FOR = 1.0
"""Seconds an account found empty is refused before its requests are read (credits
added on another replica or through the CLI are seen within this)."""


class Ticket(msgspec.Struct, frozen=True):
    """An open hold, to be settled exactly once."""

    hold_id: str
    account_id: str
    key_id: str
    request_id: str
    amount: int
    reservation: Reservation | None = None
    """Where the hold came from, when it was decided in memory."""
    held_at: int = 0

    def capped(self, charge: int) -> int:
        """A charge is never below zero nor above its hold, so no balance goes below
        zero and none goes up by being charged."""
        return min(max(charge, 0), self.amount)


def budget_of(allowance: Allowance, now: int) -> Budget | None:
    """The budget a hold placed at ``now`` must fit, if the key or account has one."""
    if allowance.budget is None:
        return None
    return Budget(allowance.budget, period_start(now, allowance.budget_period))


class Meter:
    def __init__(
        self,
        store: Store,
        writer: WriteBehind,
        *,
        new_id: IdFactory,
        wall_clock: Callable[[], float],
        hold_ttl: float,
        escrow: Escrow | None = None,
    ) -> None:
        self._store = store
        self._writer = writer
        self._escrow = escrow
        self._new_id = new_id
        self._wall_clock = wall_clock
        self._hold_ttl = hold_ttl
        self._empty: dict[str, float] = {}
        """Accounts found with nothing available, until when that is believed."""

    async def hold(
        self, principal: Principal, request_id: str, amount: int, *, capped: bool = True
    ) -> Ticket | None:
        """``capped``: the request set its own output cap (the 402 says which cap the
        hold assumed)."""
        if not principal.metered:
            return None
        now = int(self._wall_clock())
        key_budget = budget_of(principal.policy, now)
        account_budget = budget_of(principal.account_policy, now)
        if self._escrow is not None and key_budget is None and account_budget is None:
            reservation = await self._escrow.take(principal.account_id, amount)
            if reservation is None:
                await self._short(principal, amount, capped)
            ids = (self._new_id("hold"), principal.account_id, principal.key_id, request_id)
            return Ticket(*ids, amount, reservation, now)
        hold = HoldRequest(
            hold_id=self._new_id("hold"),
            account_id=principal.account_id,
            key_id=principal.key_id,
            request_id=request_id,
            amount=amount,
            now=now,
            expires_at=now + int(self._hold_ttl),
            key_budget=key_budget,
            account_budget=account_budget,
        )
        ticket = Ticket(hold.hold_id, hold.account_id, hold.key_id, request_id, amount)
        placing = asyncio.ensure_future(self._store.place_hold(hold))
        try:
            placed = await asyncio.shield(placing)
        except asyncio.CancelledError:
            # The client left while the hold was being placed: it may still commit, and
            # then nobody else would settle it; release it when it lands.
            placing.add_done_callback(lambda done: self._release_if_placed(done, ticket))
            raise
        if not placed:
            await self._short(principal, amount, capped)
        return ticket

    async def _short(self, principal: Principal, amount: int, capped: bool) -> NoReturn:
        await self._note_short(principal)
        assumed = "with its max_tokens" if capped else "with the model's longest answer"
        raise BudgetExceededError(
            f"The account's available credits do not cover this request "
            f"(up to {usd_text(amount)} {assumed}; a lower max_tokens holds less).",
            code="insufficient_credits",
        )

    def start(self) -> None:
        if self._escrow is not None:
            self._escrow.start()

    async def give_back(self) -> None:
        """Reserved credits not in use go back to their accounts now (:mod:`.escrow`)."""
        if self._escrow is not None:
            await self._escrow.give_back()

    async def close(self) -> None:
        """Give the reservations back (after the write-behind drained)."""
        if self._escrow is not None:
            await self._escrow.close()

    def out_of_credits(self, principal: Principal) -> bool:
        """The caller's account had nothing left when a hold last failed, under
        ``EMPTY_FOR`` seconds ago: a request can be refused before it is read (an account
        given credits in this process is forgotten at once, :meth:`forget`)."""
        until = self._empty.get(principal.account_id)
        return until is not None and principal.metered and until > self._wall_clock()

    def forget(self, account_id: str) -> None:
        """The account's credits changed."""
        self._empty.pop(account_id, None)
        if self._escrow is not None:
            self._escrow.forget_refusals(account_id)

    async def _note_short(self, principal: Principal) -> None:
        """After a failed hold: is the account empty (not merely short of this hold)?"""
        if self.out_of_credits(principal):
            return
        if self._escrow is not None and self._escrow.spare(principal.account_id) > 0:
            return  # credits unused in this process: short of this hold, not empty
        account = await self._store.get_account(principal.account_name)
        if account is not None and account.available <= 0:
            if len(self._empty) >= 10_000:
                self._empty.clear()
            self._empty[principal.account_id] = self._wall_clock() + EMPTY_FOR

    def _release_if_placed(self, done: asyncio.Future[bool], ticket: Ticket) -> None:
        if not done.cancelled() and done.exception() is None and done.result():
            self.settle(ticket, 0)

    def settle(self, ticket: Ticket, charge: int, served: tuple[str, str] | None = None) -> None:
        """Queue the charge; ``served``: the model and provider that answered, if any."""
        model, provider = served or (None, None)
        charged = ticket.capped(charge)
        r = ticket.reservation
        if r is not None and self._escrow is not None:
            self._escrow.settle(r, ticket.amount, charged)
        self._writer.settle(
            Settlement(
                hold_id=ticket.hold_id,
                account_id=ticket.account_id,
                key_id=ticket.key_id,
                request_id=ticket.request_id,
                charge=charged,
                now=int(self._wall_clock()),
                model=model,
                provider=provider,
                reservation=None if r is None else r.hold_id,
                held=ticket.amount,
                held_at=ticket.held_at,
            )
        )
