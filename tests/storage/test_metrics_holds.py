"""``Store.open_holds``, read by every ``/metrics`` scrape: the count and the sum of the
holds still open, over every account, on both backends."""

from __future__ import annotations

from sluice.storage.base import Settlement, Store
from tests.storage.test_store import USD, account, hold


async def test_open_holds_count_and_sum_only_what_is_still_held(store: Store) -> None:
    assert await store.open_holds() == (0, 0)
    team, other = await account(store, "team"), await account(store, "other")
    for n, (account_id, amount) in enumerate(((team, 2 * USD), (team, 3), (other, USD))):
        assert await store.place_hold(hold(account_id, n, amount, now=10, ttl=60))
    assert await store.open_holds() == (3, 3 * USD + 3)
    await store.settle([Settlement("hold_0", team, "key_1", "req_0", USD, now=20)])
    assert await store.open_holds() == (2, USD + 3)
    assert await store.reclaim_expired(now=1000) == 2
    assert await store.open_holds() == (0, 0)
