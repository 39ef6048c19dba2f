"""``list_accounts`` and ``schema_version`` on both backends (the store fixture)."""

from __future__ import annotations

from sluice.storage.base import Store
from sluice.storage.migrations import migration_scripts
from sluice.storage.sqlite import SqliteStore


async def test_pages_of_accounts_cover_each_once_in_id_order(store: Store) -> None:
    for n in range(7):
        await store.create_account(f"acct_{n:02d}x", f"team-{n}", metered=True, credits=n, now=n)
    pages, after = [], None
    while page := await store.list_accounts(3, after):
        pages.append([a.id for a in page])
        after = page[-1].id
    assert [len(p) for p in pages] == [3, 3, 1]
    assert [i for page in pages for i in page] == [f"acct_{n:02d}x" for n in range(7)]
    first = (await store.list_accounts(1, None))[0]
    assert (first.name, first.balance, first.created_at, first.metered) == ("team-0", 0, 0, True)
    assert await store.list_accounts(5, "acct_99") == []


async def test_an_empty_store_lists_nothing(store: Store) -> None:
    assert await store.list_accounts(50, None) == []


async def test_schema_version_is_the_newest_migration(store: Store) -> None:
    backend = "sqlite" if isinstance(store, SqliteStore) else "postgres"
    assert await store.schema_version() == migration_scripts(backend)[-1][0]
