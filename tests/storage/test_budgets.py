"""A key's budget and an account's (over all its keys), enforced by the holds on both
backends: exact under races (one store, two stores sharing PostgreSQL, holds racing
settlements), charges since the period began count, holds that end give their room
back, a new period starts from nothing, a key's own budget is checked first."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from functools import partial

import msgspec
import pytest

from sluice.core.principal import AccountPolicy, period_start
from sluice.errors import BudgetExceededError
from sluice.storage.base import HoldRequest, Settlement, Store
from sluice.storage.budgets import Budget
from sluice.storage.factory import open_store
from tests.support.databases import fresh_postgres

USD = 10**9
WHOSE = pytest.mark.parametrize("whose", ["key", "account"])


def hold(
    n: int, amount: int, budget: Budget | None, whose: str = "key", *, now: int = 1000
) -> HoldRequest:
    """Key budgets are on key ``key_b``; an account's holds come from three keys."""
    key, budgets = ("key_b", (budget, None)) if whose == "key" else (f"key_{n % 3}", (None, budget))
    return HoldRequest(f"hold_{n}", "acct_t", key, f"req_{n}", amount, now, now + 60, *budgets)


async def funded(store: Store, credits: int = 1000 * USD) -> None:
    await store.create_account("acct_t", "team", metered=True, credits=credits, now=1)


async def placed(store: Store, n: int, amount: int, budget: Budget, whose: str = "key") -> bool:
    try:
        return await store.place_hold(hold(n, amount, budget, whose))
    except BudgetExceededError as exc:
        assert exc.code == f"{whose}_budget_exceeded" and exc.http_status == 402
        return False


@WHOSE
async def test_a_hundred_racing_holds_on_a_budget_of_ten(store: Store, whose: str) -> None:
    await funded(store)
    budget = Budget(limit=10 * USD, since=0)
    results = await asyncio.gather(*[placed(store, n, USD, budget, whose) for n in range(100)])
    assert sum(results) == 10
    account = await store.get_account("team")
    assert account is not None and account.held == 10 * USD
    assert await store.reconcile() == []


@WHOSE
async def test_charges_in_the_period_and_open_holds_fill_the_budget(
    store: Store, whose: str
) -> None:
    await funded(store)
    budget = Budget(limit=5 * USD, since=500)
    first = hold(1, 3 * USD, budget, whose)
    assert await placed(store, 1, 3 * USD, budget, whose)
    assert not await placed(store, 2, 3 * USD, budget, whose)  # 3 held + 3 > 5
    await store.settle([Settlement("hold_1", "acct_t", first.key_id, "req_1", 2 * USD, now=900)])
    assert await placed(store, 3, 3 * USD, budget, whose)  # 2 charged + 3 = 5: exactly enough
    assert not await placed(store, 4, 1, budget, whose)
    reclaimed = await store.reclaim_expired(now=2000)  # hold 3 expires unused
    assert reclaimed == 1
    assert await placed(store, 5, 3 * USD, budget, whose)
    later = Budget(limit=5 * USD, since=950)  # a new period: the charge at 900 is before it
    assert await placed(store, 6, 2 * USD, later, whose)  # 3 held + 2 = 5
    assert await store.reconcile() == []


@WHOSE
async def test_holds_racing_settlements_never_spend_past_the_budget(
    store: Store, whose: str
) -> None:
    """A settlement swaps a hold for a charge of the same size: what the budget has
    used never shrinks, so however they interleave exactly ten fit."""
    await funded(store)
    budget = Budget(limit=10 * USD, since=0)

    async def hold_and_charge(n: int) -> bool:
        if not await placed(store, n, USD, budget, whose):
            return False
        key = hold(n, USD, budget, whose).key_id
        await store.settle([Settlement(f"hold_{n}", "acct_t", key, f"req_{n}", USD, 1000)])
        return True

    results = await asyncio.gather(*[hold_and_charge(n) for n in range(100)])
    account = await store.get_account("team")
    assert sum(results) == 10
    assert account is not None and account.balance == 990 * USD and account.held == 0
    assert await store.reconcile() == []


async def test_without_a_budget_only_the_account_limits_holds(store: Store) -> None:
    await funded(store, credits=3 * USD)
    assert await store.place_hold(hold(1, 3 * USD, None))
    assert await store.place_hold(hold(2, 1, None)) is False
    # a budget wider than the balance: the account still refuses, as False, not 402
    assert await store.place_hold(hold(3, 1, Budget(100 * USD, 0))) is False


@WHOSE
async def test_two_stores_sharing_postgres_never_overspend(whose: str) -> None:
    """Two pools on one database, as two gateway processes have."""
    async with fresh_postgres() as dsn:
        first, second = await open_store(dsn), await open_store(dsn)
        try:
            await funded(first)
            budget = Budget(limit=10 * USD, since=0)
            results = await asyncio.gather(
                *[placed(second if n % 2 else first, n, USD, budget, whose) for n in range(100)]
            )
            account = await first.get_account("team")
            mismatches = await second.reconcile()
        finally:
            await first.close()
            await second.close()
    assert sum(results) == 10
    assert account is not None and account.held == 10 * USD
    assert mismatches == []


async def test_a_keys_own_budget_is_checked_before_its_accounts(store: Store) -> None:
    await funded(store)
    tight = Budget(limit=1, since=0)
    try:
        await store.place_hold(both(1, tight))
    except BudgetExceededError as exc:
        assert exc.code == "key_budget_exceeded"
    else:
        raise AssertionError("the hold was placed past both budgets")
    assert await store.place_hold(both(2, Budget(2 * USD, 0)))


async def test_the_policy_is_stored_with_the_account_and_its_keys_principal(store: Store) -> None:
    await funded(store)
    await store.add_key("key_x", account_id="acct_t", key_digest="d", prefix="p", name=None, now=1)
    policy = AccountPolicy(rpm=7, budget=3 * USD, budget_period="weekly", metadata={"t": "x"})
    assert await store.change_account("acct_t", lambda _: policy) == policy
    account = await store.get_account("team")
    principal = await store.find_principal("d")
    assert account is not None and account.policy == policy
    assert principal is not None and principal.account_policy == policy
    made = await store.create_account(
        "acct_u", "other", metered=True, credits=0, now=1, policy=AccountPolicy(tpm=9)
    )
    assert made.policy == AccountPolicy(tpm=9)
    listed = await store.list_accounts(10, None)
    assert [a.policy for a in listed] == [policy, AccountPolicy(tpm=9)]


def both(n: int, budget: Budget) -> HoldRequest:
    """A hold of 1 USD under a key budget and an account budget, both ``budget``."""
    return HoldRequest(f"hold_{n}", "acct_t", "key_b", f"req_{n}", USD, 1000, 1060, budget, budget)


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


async def test_concurrent_account_changes_each_build_on_the_one_before(store: Store) -> None:
    await funded(store)
    changes = {"rpm": 7, "tpm": 700, "budget": 3 * USD, "budget_period": "weekly"}
    await asyncio.gather(
        *(
            store.change_account("acct_t", partial(msgspec.structs.replace, **{name: value}))
            for name, value in changes.items()
        )
    )
    account = await store.get_account("team")
    assert account is not None
    assert {name: getattr(account.policy, name) for name in changes} == changes
    assert await store.change_account("acct_none", lambda p: p) is None
