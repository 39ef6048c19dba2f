"""One suite, both backends (SQLite and PostgreSQL): accounts, keys, holds, ledger, log."""

from __future__ import annotations

import asyncio

import pytest

from sluice.accounts.keys import key_digest, key_prefix, new_key
from sluice.core.money import MAX_AMOUNT_USD
from sluice.errors import ConflictError, InvalidRequestError, NotFoundError
from sluice.storage.base import (
    ConstraintViolationError,
    HoldRequest,
    KeySelector,
    RequestRecord,
    Settlement,
    Store,
)
from sluice.storage.factory import open_store
from sluice.storage.postgres import PostgresStore
from sluice.storage.sqlite import SqliteStore

USD = 10**9


async def account(store: Store, name: str = "team", credits: int = 10 * USD) -> str:
    created = await store.create_account(f"acct_{name}", name, metered=True, credits=credits, now=1)
    return created.id


def hold(account_id: str, n: int, amount: int, *, now: int = 10, ttl: int = 60) -> HoldRequest:
    return HoldRequest(f"hold_{n}", account_id, "key_1", f"req_{n}", amount, now, now + ttl)


async def test_migrations_are_idempotent(store: Store) -> None:
    account_id = await account(store)
    await store.migrate()
    await store.migrate()
    kept = await store.get_account("team")
    assert kept is not None and kept.id == account_id and kept.balance == 10 * USD


async def test_accounts_keys_and_principals(store: Store) -> None:
    account_id = await account(store)
    with pytest.raises(ConflictError):
        await store.create_account("acct_x", "team", metered=True, credits=0, now=2)
    key = new_key(bytes(range(32)))
    await store.add_key(
        "key_1",
        account_id=account_id,
        key_digest=key_digest(key),
        prefix=key_prefix(key),
        name="ci",
        now=3,
    )
    principal = await store.find_principal(key_digest(key))
    assert principal is not None
    assert (principal.account_name, principal.key_id, principal.metered) == ("team", "key_1", True)
    assert await store.find_principal("' OR '1'='1") is None
    keys = await store.list_keys(account_id)
    assert [(k.id, k.prefix, k.revoked_at) for k in keys] == [("key_1", key_prefix(key), None)]
    revoked = await store.revoke_keys(KeySelector("prefix", key_prefix(key)[:14]), now=4)
    assert [(k.id, k.prefix, k.revoked_at) for k in revoked] == [("key_1", key_prefix(key), 4)]
    assert await store.find_principal(key_digest(key)) is None
    assert await store.revoke_keys(KeySelector("prefix", key_prefix(key)), now=5) == []
    dev = await store.ensure_account("acct_dev", "dev", metered=False, is_dev=True, now=1)
    assert await store.ensure_account("acct_other", "dev", metered=False, is_dev=True, now=2) == dev


async def test_credits_and_balances(store: Store) -> None:
    await account(store, credits=5 * USD)
    after = await store.add_credits("team", 2 * USD, now=2, note="top-up")
    assert (after.balance, after.held, after.available) == (7 * USD, 0, 7 * USD)
    with pytest.raises(NotFoundError):
        await store.add_credits("nobody", USD, now=2, note="x")
    assert await store.reconcile() == []


async def test_a_balance_never_passes_its_bound(store: Store) -> None:
    """Eleven top-ups of the largest amount would pass int64 on SQLite (stored as a
    float from then on); the one that would pass the bound is refused, nothing written."""
    await account(store, credits=0)
    top = MAX_AMOUNT_USD * USD
    await store.add_credits("team", top, now=2, note="top-up")
    for amount in (1, top):
        with pytest.raises(InvalidRequestError) as refused:
            await store.add_credits("team", amount, now=3, note="too much")
        assert refused.value.code == "balance_out_of_range"
    low = await store.add_credits("team", -2 * top, now=4, note="down")
    with pytest.raises(InvalidRequestError):
        await store.add_credits("team", -1, now=5, note="too little")
    stored = await store.get_account("team")
    assert stored is not None and (low.balance, stored.balance) == (-top, -top)
    assert await store.reconcile() == []


async def test_holds_cover_only_the_available_balance(store: Store) -> None:
    account_id = await account(store, credits=10 * USD)
    assert await store.place_hold(hold(account_id, 1, 6 * USD))
    first = await store.get_account("team")
    assert first is not None and (first.held, first.available, first.open_holds) == (
        6 * USD,
        4 * USD,
        1,
    )
    assert await store.place_hold(hold(account_id, 2, 5 * USD)) is False  # 4 left
    assert await store.place_hold(hold(account_id, 3, 4 * USD)) is True  # exactly enough
    assert await store.place_hold(hold(account_id, 4, 1)) is False
    assert await store.reconcile() == []


async def test_settlement_charges_releases_and_writes_one_ledger_entry(store: Store) -> None:
    account_id = await account(store, credits=10 * USD)
    await store.place_hold(hold(account_id, 1, 3 * USD))
    settle = Settlement("hold_1", account_id, "key_1", "req_1", 123_456_789, now=20)
    await store.settle([settle])
    await store.settle([settle])  # a second settlement of one request changes nothing
    after = await store.get_account("team")
    assert after is not None
    assert (after.balance, after.held, after.open_holds) == (10 * USD - 123_456_789, 0, 0)
    assert await store.reconcile() == []


async def test_expired_holds_are_reclaimed_and_late_settlement_still_charges(
    store: Store,
) -> None:
    account_id = await account(store, credits=10 * USD)
    await store.place_hold(hold(account_id, 1, 4 * USD, now=10, ttl=5))
    await store.place_hold(hold(account_id, 2, 1 * USD, now=10, ttl=100))
    assert await store.reclaim_expired(now=14) == 0
    assert await store.reclaim_expired(now=15) == 1
    after = await store.get_account("team")
    assert after is not None and (after.held, after.open_holds) == (1 * USD, 1)
    await store.settle([Settlement("hold_1", account_id, "key_1", "req_1", 2 * USD, now=30)])
    final = await store.get_account("team")
    assert final is not None and (final.balance, final.held) == (8 * USD, 1 * USD)
    assert await store.reconcile() == []


async def test_concurrent_holds_never_overdraw(store: Store) -> None:
    account_id = await account(store, credits=50 * USD)
    results = await asyncio.gather(
        *[store.place_hold(hold(account_id, n, USD)) for n in range(200)]
    )
    assert sum(results) == 50
    after = await store.get_account("team")
    assert after is not None and (after.held, after.available) == (50 * USD, 0)


async def test_request_log_is_read_by_its_owner_only(store: Store) -> None:
    record = RequestRecord(
        id="req_abc",
        account_id="acct_a",
        key_id="key_1",
        created_at=5,
        requested_model="m",
        status="complete",
        attempts=[{"position": "primary", "outcome": "served"}],
    )
    await store.write_requests([record])
    assert await store.get_request("req_abc", "acct_a") == record
    assert await store.get_request("req_abc", "acct_b") is None
    assert await store.get_request("req_nope", "acct_a") is None


async def test_two_replicas_share_one_postgres() -> None:
    from tests.support.databases import fresh_postgres

    async with fresh_postgres() as dsn:
        one, two = await open_store(dsn), await open_store(dsn)  # both migrate: once
        try:
            account_id = await account(one, credits=20 * USD)
            results = await asyncio.gather(
                *[(one if n % 2 else two).place_hold(hold(account_id, n, USD)) for n in range(100)]
            )
            assert sum(results) == 20
            assert await two.reconcile() == []
        finally:
            await one.close()
            await two.close()


async def test_account_connections_and_prices(store: Store) -> None:
    from sluice.config import PriceConfig
    from sluice.storage.tenants import StoredConnection

    account_id = await account(store)
    other = await account(store, "other")
    spec = StoredConnection(
        "conn_byo_1",
        "openai",
        {"team/gpt": "gpt-4o"},
        base_url="https://api.example.com/v1",
        prices={"team/gpt": PriceConfig(1.0, 2.0)},
    )
    assert await store.save_connection(account_id, spec, "gAAAAencrypted", now=5)
    assert await store.save_connection(account_id, spec, "gAAAAencrypted", now=5)  # replace
    assert not await store.save_connection(other, spec, "stolen", now=6)  # another's id
    assert await store.account_connections(account_id) == [(spec, "gAAAAencrypted")]
    assert await store.account_connections(other) == []
    assert not await store.delete_connection(other, "conn_byo_1")
    assert await store.delete_connection(account_id, "conn_byo_1")
    assert await store.account_connections(account_id) == []
    await store.set_price(account_id, "openai/gpt-4o", PriceConfig(1.5, 6.0, cache_read=0.1))
    assert await store.account_prices(account_id) == {
        "openai/gpt-4o": PriceConfig(1.5, 6.0, cache_read=0.1)
    }
    await store.set_price(account_id, "openai/gpt-4o", None)
    assert await store.account_prices(account_id) == {}


async def test_a_batch_settles_several_accounts_once_each(store: Store) -> None:
    a = await account(store, "a", credits=10 * USD)
    b = await account(store, "b", credits=10 * USD)
    await store.place_hold(hold(a, 1, 2 * USD))
    await store.place_hold(hold(a, 2, 2 * USD))
    await store.place_hold(hold(b, 3, 3 * USD))
    batch = [
        Settlement("hold_1", a, "key_1", "req_1", 100, now=20),
        Settlement("hold_2", a, "key_1", "req_2", 200, now=20),
        Settlement("hold_3", b, "key_1", "req_3", 300, now=20),
        Settlement("hold_1", a, "key_1", "req_1", 100, now=21),
    ]  # the same request again
    await store.settle(batch)
    await store.settle(batch[:1])
    after_a, after_b = await store.get_account("a"), await store.get_account("b")
    assert after_a is not None and after_b is not None
    assert (after_a.balance, after_a.held) == (10 * USD - 300, 0)
    assert (after_b.balance, after_b.held) == (10 * USD - 300, 0)
    assert await store.reconcile() == []


async def raw_write(store: Store, sqlite_sql: str, postgres_sql: str) -> None:
    """A statement straight on the database, past every check of the store (to plant
    rows written before a constraint existed)."""
    if isinstance(store, SqliteStore):
        await store.write(lambda tx: tx.execute(sqlite_sql))
    else:
        assert isinstance(store, PostgresStore)
        await store.pool.execute(postgres_sql)


async def test_the_database_refuses_a_negative_charge_and_writes_nothing(store: Store) -> None:
    account_id = await account(store, credits=1 * USD)
    await store.place_hold(hold(account_id, 1, USD // 2))
    minting = Settlement("hold_1", account_id, "key_1", "req_1", -305 * USD, now=20)
    with pytest.raises(ConstraintViolationError):
        await store.settle([minting])
    await store.place_hold(hold(account_id, 2, USD // 4))
    beyond = Settlement("hold_2", account_id, "key_1", "req_2", USD // 2, now=20)
    with pytest.raises(ConstraintViolationError):
        await store.settle([beyond])  # more than its hold of $0.25
    after = await store.get_account("team")
    assert after is not None and (after.balance, after.held) == (USD, USD // 2 + USD // 4)
    assert await store.reconcile() == []


async def test_reconcile_flags_negative_charges_and_charges_beyond_holds(store: Store) -> None:
    """Rows from before the constraints: the books add up, yet they are wrong."""
    account_id = await account(store, credits=1 * USD)
    for table, guard in (
        ("ledger", "ledger_charge_not_negative"),
        ("holds", "holds_charge_within_hold"),
    ):
        await raw_write(
            store, f"DROP TRIGGER {guard}", f"ALTER TABLE {table} DROP CONSTRAINT {guard}"
        )
    await store.place_hold(hold(account_id, 1, USD // 2))
    await store.settle([Settlement("hold_1", account_id, "key_1", "req_1", -305 * USD, now=20)])
    await store.place_hold(hold(account_id, 2, USD // 4))
    await store.settle([Settlement("hold_2", account_id, "key_1", "req_2", USD // 2, now=20)])
    found = {(m.what, m.stored) for m in await store.reconcile()}
    assert found == {
        ("negative_charges", 305 * USD),
        ("charges_beyond_holds", 305 * USD + USD // 4),
    }


async def test_a_request_row_with_nul_characters_is_stored(store: Store) -> None:
    """PostgreSQL's jsonb holds no NUL: an upstream's error text with one must not cost
    the row (nor, in a batch, the other rows)."""
    account_id = await account(store)
    odd = RequestRecord(
        id="req_nul",
        account_id=account_id,
        key_id="key_1",
        created_at=1,
        requested_model="m",
        error_message="bad \x00 byte, and a literal \\u0000 too",
    )
    plain = RequestRecord(id="req_plain", account_id=account_id, key_id="key_1", created_at=1)
    await store.write_requests([odd, plain])
    found = await store.get_request("req_nul", account_id)
    assert found is not None and found.error_message is not None
    assert found.error_message in (
        "bad \x00 byte, and a literal \\u0000 too",  # SQLite keeps it
        "bad \ufffd byte, and a literal \\u0000 too",  # PostgreSQL: replaced
    )
    assert await store.get_request("req_plain", account_id) is not None
