"""A key's budget, enforced by its holds on both backends: exact under races (one store
and two stores sharing PostgreSQL), charges since the period began count, holds that
end give their room back, a new period starts from nothing."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from sluice.core.principal import period_start
from sluice.errors import BudgetExceededError
from sluice.storage.base import HoldRequest, KeyBudget, Settlement, Store
from sluice.storage.factory import open_store
from tests.support.databases import fresh_postgres

USD = 10**9


def hold(n: int, amount: int, budget: KeyBudget | None, *, now: int = 1000) -> HoldRequest:
    return HoldRequest(f"hold_{n}", "acct_t", "key_b", f"req_{n}", amount, now, now + 60, budget)


async def funded(store: Store, credits: int = 1000 * USD) -> None:
    await store.create_account("acct_t", "team", metered=True, credits=credits, now=1)


async def placed(store: Store, n: int, amount: int, budget: KeyBudget) -> bool:
    try:
        return await store.place_hold(hold(n, amount, budget))
    except BudgetExceededError as exc:
        assert exc.code == "key_budget_exceeded" and exc.http_status == 402
        return False


async def test_a_hundred_racing_holds_on_a_budget_of_ten(store: Store) -> None:
    await funded(store)
    budget = KeyBudget(limit=10 * USD, since=0)
    results = await asyncio.gather(*[placed(store, n, USD, budget) for n in range(100)])
    assert sum(results) == 10
    account = await store.get_account("team")
    assert account is not None and account.held == 10 * USD
    assert await store.reconcile() == []


async def test_charges_in_the_period_and_open_holds_fill_the_budget(store: Store) -> None:
    await funded(store)
    budget = KeyBudget(limit=5 * USD, since=500)
    assert await placed(store, 1, 3 * USD, budget)
    assert not await placed(store, 2, 3 * USD, budget)  # 3 held + 3 > 5
    await store.settle([Settlement("hold_1", "acct_t", "key_b", "req_1", 2 * USD, now=900)])
    assert await placed(store, 3, 3 * USD, budget)  # 2 charged + 3 = 5: exactly enough
    assert not await placed(store, 4, 1, budget)
    reclaimed = await store.reclaim_expired(now=2000)  # hold 3 expires unused
    assert reclaimed == 1
    assert await placed(store, 5, 3 * USD, budget)
    later = KeyBudget(limit=5 * USD, since=950)  # a new period: the charge at 900 is before it
    assert await placed(store, 6, 2 * USD, later)  # 3 held + 2 = 5
    assert await store.reconcile() == []


async def test_without_a_budget_only_the_account_limits_holds(store: Store) -> None:
    await funded(store, credits=3 * USD)
    assert await store.place_hold(hold(1, 3 * USD, None))
    assert await store.place_hold(hold(2, 1, None)) is False
    # a budget wider than the balance: the account still refuses, as False, not 402
    assert await store.place_hold(hold(3, 1, KeyBudget(100 * USD, 0))) is False


async def test_two_stores_sharing_postgres_never_overspend_a_key() -> None:
    """Two pools on one database, as two gateway processes have."""
    async with fresh_postgres() as dsn:
        first, second = await open_store(dsn), await open_store(dsn)
        try:
            await funded(first)
            budget = KeyBudget(limit=10 * USD, since=0)
            results = await asyncio.gather(
                *[placed(second if n % 2 else first, n, USD, budget) for n in range(100)]
            )
            account = await first.get_account("team")
            mismatches = await second.reconcile()
        finally:
            await first.close()
            await second.close()
    assert sum(results) == 10
    assert account is not None and account.held == 10 * USD
    assert mismatches == []


def _at(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp())


@pytest.mark.parametrize(
    ("now", "period", "start"),
    [
        ("2026-12-01T13:45:10", "daily", "2026-12-01T00:00:00"),
        ("2026-12-01T00:00:00", "daily", "2026-12-01T00:00:00"),
        ("2026-12-03T23:59:59", "weekly", "2026-11-30T00:00:00"),  # a Thursday: Monday
        ("2026-11-30T00:00:00", "weekly", "2026-11-30T00:00:00"),
        ("2026-12-31T23:59:59", "monthly", "2026-12-01T00:00:00"),
        ("2027-01-01T00:00:00", "monthly", "2027-01-01T00:00:00"),
    ],
)
def test_a_period_starts_at_its_utc_boundary(now: str, period: str, start: str) -> None:
    assert period_start(_at(now), period) == _at(start)  # type: ignore[arg-type]


def test_a_budget_that_never_resets_counts_from_the_start() -> None:
    assert period_start(_at("2026-12-01T13:45:10"), "never") == 0
