"""Spend reports on both backends (the store fixture): every grouping adds up to the
ledger to the nano-dollar, each filter keeps exactly its charges, pages resume after
their last group, and charges from before schema 8 take their model from the log."""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

from sluice.storage.base import HoldRequest, RequestRecord, Settlement, Store
from sluice.storage.factory import open_store
from sluice.storage.migrations import migration_scripts
from sluice.storage.spend import DAY_SECONDS, SpendBy, SpendFilters, SpendGroup
from sluice.storage.sqlite.connection import split_statements

USD = 10**9
DAY = 20_000  # a UTC day number: 2024-10-04
MODELS = ("test/small", "test/big", "test/vision")
PROVIDERS = ("openai", "anthropic")


class Charge:
    def __init__(self, n: int) -> None:
        self.n = n
        self.account = "acct_a" if n % 4 else "acct_b"
        self.key = f"key_{self.account[-1]}{n % 3}"
        self.model: str | None = None if n % 11 == 0 else MODELS[n % 3]
        self.provider: str | None = None if self.model is None else PROVIDERS[n % 2]
        self.amount = 1_234_567 * (n % 5) + n  # odd nano amounts; some charges are 0+n
        self.when = (DAY + n % 6) * DAY_SECONDS + n * 7  # six days, in settle order

    def value(self, by: SpendBy) -> str | int:
        if by == "day":
            return self.when // DAY_SECONDS
        found = {"key": self.key, "model": self.model, "provider": self.provider}[by]
        return found or ""


CHARGES = [Charge(n) for n in range(1, 121)]


async def seed(store: Store) -> None:
    for account in ("acct_a", "acct_b"):
        await store.create_account(account, account, metered=True, credits=10 * USD, now=1)
    for c in CHARGES:
        hold = HoldRequest(f"h{c.n}", c.account, c.key, f"r{c.n}", c.amount, c.when, c.when + 60)
        assert await store.place_hold(hold)
    await store.settle(
        [
            Settlement(
                f"h{c.n}", c.account, c.key, f"r{c.n}", c.amount, c.when, c.model, c.provider
            )
            for c in CHARGES
        ]
    )


def expected(by: SpendBy, keep: Callable[[Charge], bool]) -> list[SpendGroup]:
    sums: dict[str | int, list[int]] = defaultdict(lambda: [0, 0])
    for c in CHARGES:
        if keep(c):
            sums[c.value(by)][0] += 1
            sums[c.value(by)][1] += c.amount
    return [SpendGroup(v, n, total) for v, (n, total) in sorted(sums.items())]


def bare(groups: list[SpendGroup]) -> list[SpendGroup]:
    return [SpendGroup(g.value, g.requests, g.spend) for g in groups]


@pytest.mark.parametrize("by", ["key", "model", "provider", "day"])
async def test_every_grouping_adds_up_to_the_ledger(store: Store, by: SpendBy) -> None:
    await seed(store)
    for account in ("acct_a", "acct_b"):
        groups, total = await store.spend(SpendFilters(account_id=account), by, 100, None)
        assert bare(groups) == expected(by, lambda c, a=account: c.account == a)  # type: ignore[misc]
        found = await store.get_account(account)
        assert found is not None
        assert total.spend == sum(g.spend for g in groups) == 10 * USD - found.balance
        assert total.requests == sum(1 for c in CHARGES if c.account == account)
    assert await store.reconcile() == []


@pytest.mark.parametrize(
    ("filters", "keep"),
    [
        (SpendFilters(key_id="key_a1"), lambda c: c.key == "key_a1"),
        (SpendFilters(model="test/big"), lambda c: c.model == "test/big"),
        (SpendFilters(provider="anthropic"), lambda c: c.provider == "anthropic"),
        (SpendFilters(since=(DAY + 2) * DAY_SECONDS), lambda c: c.when >= (DAY + 2) * DAY_SECONDS),
        (SpendFilters(until=(DAY + 2) * DAY_SECONDS), lambda c: c.when < (DAY + 2) * DAY_SECONDS),
        (
            SpendFilters(account_id="acct_a", model="test/small", since=(DAY + 1) * DAY_SECONDS),
            lambda c: (
                c.account == "acct_a"
                and c.model == "test/small"
                and c.when >= (DAY + 1) * DAY_SECONDS
            ),
        ),
        (SpendFilters(model="test/none"), lambda c: False),
    ],
    ids=["key", "model", "provider", "since", "until", "combined", "no-match"],
)
async def test_each_filter_keeps_exactly_its_charges(
    store: Store, filters: SpendFilters, keep: Callable[[Charge], bool]
) -> None:
    await seed(store)
    groups, total = await store.spend(filters, "day", 100, None)
    assert bare(groups) == expected("day", keep)
    assert total.spend == sum(c.amount for c in CHARGES if keep(c))


async def test_pages_resume_after_their_last_group_and_keep_the_whole_total(store: Store) -> None:
    await seed(store)
    seen: list[SpendGroup] = []
    after: str | int | None = None
    while True:
        groups, total = await store.spend(SpendFilters(), "key", 2, after)
        seen.extend(groups)
        assert total.spend == sum(c.amount for c in CHARGES)
        if len(groups) < 2:
            break
        after = groups[-1].value
    assert bare(seen) == expected("key", lambda c: True)


async def test_a_key_group_names_the_key(store: Store) -> None:
    await seed(store)
    await store.add_key(
        "key_a1", account_id="acct_a", key_digest="d", prefix="sk-sluice-abcd", name="ci", now=1
    )
    groups, _ = await store.spend(SpendFilters(key_id="key_a1"), "key", 10, None)
    assert [(g.value, g.prefix, g.label) for g in groups] == [("key_a1", "sk-sluice-abcd", "ci")]


async def test_charges_from_before_schema_8_take_model_and_provider_from_the_log(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER)")
    for version, script in migration_scripts("sqlite"):
        if version < 8:
            for statement in split_statements(script):
                db.execute(statement)
            db.execute("INSERT INTO schema_migrations VALUES (?, 0)", (version,))
    db.execute(
        "INSERT INTO accounts (id, name, metered, is_dev, created_at) VALUES ('a', 'a', 1, 0, 0)"
    )
    db.execute(
        "INSERT INTO ledger (account_id, key_id, request_id, kind, amount, created_at) "
        "VALUES ('a', 'k', 'r1', 'charge', -5, 10), ('a', 'k', 'r2', 'charge', -7, 10)"
    )
    logged = RequestRecord(
        id="r1", account_id="a", key_id="k", created_at=10, served_model="m1", provider="p1"
    )
    db.execute(
        "INSERT INTO request_log (id, account_id, created_at, record) VALUES ('r1', 'a', 10, ?)",
        (msgspec.json.encode(logged).decode(),),
    )
    db.commit()
    db.close()
    store = await open_store(f"sqlite:///{path}")  # migrates to the newest schema
    try:
        by_model, total = await store.spend(SpendFilters(), "model", 10, None)
        by_provider, _ = await store.spend(SpendFilters(), "provider", 10, None)
    finally:
        await store.close()
    assert bare(by_model) == [SpendGroup("", 1, 7), SpendGroup("m1", 1, 5)]  # r2 has no log row
    assert bare(by_provider) == [SpendGroup("", 1, 7), SpendGroup("p1", 1, 5)]
    assert total.spend == 12
