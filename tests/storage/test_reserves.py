"""Credit reservations on both backends: storage's reserve / tend / draw, and the
escrow that decides holds in memory from them (docs/api.md#credit-reservations)."""

from __future__ import annotations

import asyncio
import itertools
import random
import time

from sluice.metering.escrow import Escrow, Reservation
from sluice.storage.base import HoldRequest, Settlement, Store
from sluice.storage.reserves import ReserveChange, ReserveRequest

HOLD = 1_000


async def _account(store: Store, credits: int) -> str:
    created = await store.create_account("acct_r", "r", metered=True, credits=credits, now=1)
    return created.id


async def _state(store: Store) -> tuple[int, int, int]:
    account = await store.get_account("r")
    assert account is not None
    return account.balance, account.held, account.open_holds


def _drawn(r: Reservation, n: int, charge: int, held: int = HOLD) -> Settlement:
    return Settlement(
        f"hold_{n}", r.account_id, "key_1", f"req_{n}", charge, 20,
        reservation=r.hold_id, held=held, held_at=10,
    )  # fmt: skip


def _escrow(store: Store, *, idle: float = 30.0, most: int = 64, ttl: float = 3600) -> Escrow:
    counter = itertools.count()
    return Escrow(
        store,
        new_id=lambda prefix: f"{prefix}_{next(counter)}_{id(counter)}",
        wall_clock=time.time,
        clock=time.monotonic,
        hold_ttl=ttl,
        idle=idle,
        most=most,
    )


async def test_a_reservation_takes_what_the_account_can_give(store: Store) -> None:
    account_id = await _account(store, 5 * HOLD)
    grow = ReserveRequest("resv_1", account_id, HOLD, 3 * HOLD, 10, 100)
    assert await store.reserve(grow) == 3 * HOLD
    assert await _state(store) == (5 * HOLD, 3 * HOLD, 1)
    # at least `need` or nothing; at most what is available
    assert (
        await store.reserve(ReserveRequest("resv_1", account_id, 3 * HOLD, 9 * HOLD, 10, 100)) == 0
    )
    assert (
        await store.reserve(ReserveRequest("resv_1", account_id, HOLD, 9 * HOLD, 10, 100))
        == 2 * HOLD
    )
    assert await _state(store) == (5 * HOLD, 5 * HOLD, 1)
    assert await store.reconcile() == []


async def test_draws_give_back_and_close_keep_the_ledger_exact(store: Store) -> None:
    account_id = await _account(store, 10 * HOLD)
    assert await store.reserve(ReserveRequest("resv_1", account_id, HOLD, 4 * HOLD, 10, 100))
    r = Reservation("resv_1", account_id, 0.0)
    await store.settle([_drawn(r, 1, 300), _drawn(r, 2, HOLD)])
    # charged 1,300; the reservation holds 4,000 - 1,300; two closed holds written
    assert await _state(store) == (10 * HOLD - 1_300, 4 * HOLD - 1_300, 1)
    assert await store.tend_reserves([ReserveChange("resv_1", account_id, 700, 500, 30)]) == []
    assert await _state(store) == (10 * HOLD - 1_300, 2 * HOLD, 1)
    assert await store.reconcile() == []
    await store.settle([_drawn(r, 1, 300)])  # settled before: never charged twice
    closing = ReserveChange("resv_1", account_id, 0, 500, 40, close=True)
    assert await store.tend_reserves([closing]) == []
    assert await _state(store) == (10 * HOLD - 1_300, 0, 0)
    assert await store.reconcile() == []
    # closed: it grows no more, changes to it do nothing, its late draws charge only
    assert await store.reserve(ReserveRequest("resv_1", account_id, 1, HOLD, 50, 100)) is None
    assert await store.tend_reserves([closing]) == ["resv_1"]
    await store.settle([_drawn(r, 3, 200)])
    assert await _state(store) == (10 * HOLD - 1_500, 0, 0)
    assert await store.reconcile() == []


async def test_a_reclaimed_reservation_is_replaced(store: Store) -> None:
    account_id = await _account(store, 10 * HOLD)
    escrow = _escrow(store, ttl=1)
    first = await escrow.take(account_id, HOLD)
    assert first is not None
    assert await store.reclaim_expired(int(time.time()) + 5) == 1  # as after a crash
    escrow.settle(first, HOLD, 400)
    await store.settle([_drawn(first, 1, 400)])  # charged; nothing left to release
    assert await _state(store) == (10 * HOLD - 400, 0, 0)
    first.amount = first.used = 0  # as if it still looked open to this process
    second = await escrow.take(account_id, 2 * HOLD)
    assert second is not None and second.hold_id != first.hold_id
    assert await _state(store) == (10 * HOLD - 400, 2 * HOLD, 1)
    assert await store.reconcile() == []


async def test_holds_from_memory_never_pass_the_credits_and_come_back(store: Store) -> None:
    """200 concurrent holds on credits for 37 of them: exactly 37 pass in one process,
    in a few growths (not one round trip per hold); all given back once idle."""
    account_id = await _account(store, 37 * HOLD)
    escrow = _escrow(store, idle=0.1)
    grows = 0
    reserve = store.reserve

    async def counted(grow: ReserveRequest) -> int | None:
        nonlocal grows
        granted = await reserve(grow)
        grows += bool(granted)
        return granted

    store.reserve = counted  # type: ignore[method-assign]
    escrow.start()
    taken = await asyncio.gather(*(escrow.take(account_id, HOLD) for _ in range(200)))
    held = [r for r in taken if r is not None]
    assert len(held) == 37
    assert grows <= 8, grows
    rng = random.Random(3)
    charges = [rng.randrange(HOLD + 1) for _ in held]
    for n, (r, charge) in enumerate(zip(held, charges, strict=True)):
        escrow.settle(r, HOLD, charge)
        settled = _drawn(r, n, charge)
        await store.settle([settled])
        escrow.written([settled])
    again = await escrow.take(account_id, HOLD)  # the refunds are spare again
    assert again is not None
    escrow.settle(again, HOLD, 0)
    escrow.written([_drawn(again, 99, 0)])  # (never written: nothing to charge)
    balance, still_held, _ = await _state(store)
    assert balance == 37 * HOLD - sum(charges) and 0 < still_held <= balance
    for _ in range(100):  # idle past 0.1 s: the spare is given back and it closes
        await asyncio.sleep(0.05)
        if (await _state(store))[1:] == (0, 0):
            break
    assert await _state(store) == (37 * HOLD - sum(charges), 0, 0)
    assert await store.reconcile() == []
    await escrow.close()


async def test_two_processes_race_for_the_last_credits_without_overdraft(store: Store) -> None:
    account_id = await _account(store, 50 * HOLD)
    one, two = _escrow(store), _escrow(store)
    taken = await asyncio.gather(
        *(
            (one if n % 2 else two).take(account_id, HOLD)
            for n in range(200)
        )
    )  # fmt: skip
    held = [r for r in taken if r is not None]
    assert len(held) == 50  # each process used all it reserved
    balance, held_now, reservations = await _state(store)
    # one reservation each, or one only when a process took the last credits before
    # the other's first growth
    assert (balance, held_now) == (50 * HOLD, 50 * HOLD) and reservations in (1, 2)
    for n, r in enumerate(held):
        one.settle(r, HOLD, HOLD)  # (only the reservation's own counts change)
        await store.settle([_drawn(r, n, HOLD)])
    await one.close()
    await two.close()
    assert await _state(store) == (0, 0, 0)
    assert await store.reconcile() == []


async def test_a_hold_that_fits_while_another_grows_is_counted_before_it(store: Store) -> None:
    """A small hold that fits the unused part while a big one waits for its growth is
    taken first; the big one then finds less than it needs and grows again (here: the
    account has nothing more, so it is refused) rather than overdrawing."""
    account_id = await _account(store, 1_500)
    escrow = _escrow(store)
    first = await escrow.take(account_id, 1_000)
    assert first is not None
    escrow.settle(first, 1_000, 500)  # 500 unused again (its settlement not yet written)
    reserve = store.reserve
    growing = asyncio.Event()

    async def slow(grow: ReserveRequest) -> int | None:
        growing.set()
        await asyncio.sleep(0.05)
        return await reserve(grow)

    store.reserve = slow  # type: ignore[method-assign]
    big = asyncio.ensure_future(escrow.take(account_id, 1_000))
    await growing.wait()
    small = await escrow.take(account_id, 500)  # fits the unused 500 at once
    assert small is first
    assert await big is None  # the account had 500 to give, and the small hold took it
    assert first.used <= first.amount
    balance, held, _ = await _state(store)
    assert balance - held >= 0


async def test_a_refused_growth_is_not_asked_again_until_the_next_tick(store: Store) -> None:
    """A flood of holds too big for the account costs one storage round trip, not one
    each; a smaller need still asks; the tick (or credits added) asks again."""
    account_id = await _account(store, 1_500)
    escrow = _escrow(store)
    asked: list[int] = []
    reserve = store.reserve

    async def counted(grow: ReserveRequest) -> int | None:
        asked.append(grow.need)
        return await reserve(grow)

    store.reserve = counted  # type: ignore[method-assign]
    first = await escrow.take(account_id, 1_000)  # reserves exactly 1,000; 500 left
    assert first is not None and asked == [1_000]
    refused = await asyncio.gather(*(escrow.take(account_id, 2_500) for _ in range(50)))
    assert refused == [None] * 50 and asked == [1_000, 2_500]
    assert await escrow.take(account_id, 1_600) is None  # needs less: asked
    assert asked == [1_000, 2_500, 1_600] and escrow.spare(account_id) == 0
    escrow.settle(first, 1_000, 0)  # unused again: a small hold fits in memory
    assert await escrow.take(account_id, 400) is first and len(asked) == 3
    assert await escrow.take(account_id, 1_600 + 600) is None and len(asked) == 3
    escrow.forget_refusals(account_id)  # credits were added: asked again
    assert await escrow.take(account_id, 1_100) is first and asked[-1] == 500
    assert first.used <= first.amount
    await escrow.close()


async def test_one_batch_mixes_draws_stored_holds_repeats_and_closed_reservations(
    store: Store,
) -> None:
    """What the write-behind sends: every kind of settlement in one batch, settled as
    if one by one (SQLite's is set-based: storage/sqlite/settling.py)."""
    account_id = await _account(store, 10 * HOLD)
    assert await store.reserve(ReserveRequest("resv_1", account_id, HOLD, 4 * HOLD, 10, 100))
    assert await store.reserve(ReserveRequest("resv_2", account_id, HOLD, HOLD, 10, 100))
    closing = ReserveChange("resv_2", account_id, 0, 100, 15, close=True)
    assert await store.tend_reserves([closing]) == []  # closed: its late draws charge only
    assert await store.place_hold(
        HoldRequest("hold_s", account_id, "key_1", "req_s", HOLD, now=10, expires_at=100)
    )
    open_one, closed = (
        Reservation("resv_1", account_id, 0.0),
        Reservation("resv_2", account_id, 0.0),
    )
    batch = [
        _drawn(open_one, 1, 300),
        Settlement("hold_s", account_id, "key_1", "req_s", 400, 20),
        _drawn(open_one, 1, 300),  # the same request again: charged once
        _drawn(closed, 2, 200),
        _drawn(open_one, 3, HOLD),
    ]
    await store.settle(batch)
    await store.settle(batch[:2])  # and again in a later batch
    balance, held, open_holds = await _state(store)
    # charged 300 + 400 + 200 + 1,000; resv_1 holds 4,000 - 1,300 and stays open
    assert (balance, held, open_holds) == (10 * HOLD - 1_900, 4 * HOLD - 1_300, 1)
    assert await store.reconcile() == []
