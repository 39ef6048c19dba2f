"""A key's policy is stored with it, read back with its principal, found by prefix and
replaced in place; on both backends."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import msgspec
import pytest

from sluice.accounts.keys import key_digest, key_prefix, new_key
from sluice.core.principal import NO_POLICY, KeyPolicy
from sluice.errors import ConflictError
from sluice.storage.base import KeySelector, Store

POLICY = KeyPolicy(
    models=("openai/*", "test/gpt-fake"),
    expires_at=1_900_000_000,
    rpm=60,
    tpm=None,
    metadata={"team": "search", "user": "ana"},
)


async def _key(store: Store, seed: int, policy: KeyPolicy = NO_POLICY) -> str:
    account = await store.get_account("team")
    if account is None:
        account = await store.create_account("acct_t", "team", metered=True, credits=0, now=1)
    key = new_key(bytes([seed]) * 32)
    await store.add_key(
        f"key_{seed}",
        account_id=account.id,
        key_digest=key_digest(key),
        prefix=key_prefix(key),
        name="ci",
        now=2,
        policy=policy,
    )
    return key


async def test_a_policy_round_trips_with_its_principal(store: Store) -> None:
    key = await _key(store, 1, POLICY)
    plain = await _key(store, 2)
    principal = await store.find_principal(key_digest(key))
    other = await store.find_principal(key_digest(plain))
    assert principal is not None and other is not None
    assert principal.policy == POLICY
    assert other.policy == NO_POLICY
    listed = {k.id: k.policy for k in await store.list_keys(principal.account_id)}
    assert listed == {"key_1": POLICY, "key_2": NO_POLICY}


async def test_find_key_by_prefix_and_replace_its_policy(store: Store) -> None:
    key = await _key(store, 3)
    found = await store.find_key(key_prefix(key))
    assert found is not None and found.id == "key_3" and found.policy == NO_POLICY
    assert await store.change_key("key_3", lambda _n, _p: ("renamed", POLICY)) == (
        "renamed",
        POLICY,
    )
    again = await store.find_key(key_prefix(key)[:14])
    principal = await store.find_principal(key_digest(key))
    assert again is not None and (again.name, again.policy) == ("renamed", POLICY)
    assert principal is not None and principal.policy == POLICY
    assert await store.find_key("sk-sluice-zzzz") is None


async def test_a_prefix_two_live_keys_share_is_ambiguous(store: Store) -> None:
    await _key(store, 4)
    await _key(store, 5)
    with pytest.raises(ConflictError) as info:
        await store.find_key("sk-sluice-")
    assert info.value.code == "ambiguous_key_prefix"


async def test_a_revoked_key_is_not_found(store: Store) -> None:
    key = await _key(store, 6)
    assert len(await store.revoke_keys(KeySelector("prefix", key_prefix(key)), now=3)) == 1
    assert await store.find_key(key_prefix(key)) is None


async def test_keys_are_listed_oldest_first_a_page_at_a_time(store: Store) -> None:
    await store.create_account("acct_t", "team", metered=True, credits=0, now=1)
    await store.create_account("acct_o", "other", metered=True, credits=0, now=1)
    for n, (account, created) in enumerate([("acct_t", 5), ("acct_t", 3), ("acct_o", 1)] * 3):
        await store.add_key(
            f"key_{n}",
            account_id=account,
            key_digest=f"d{n}",
            prefix=f"p{n}",
            name=None,
            now=created,
        )
    everything = [k.id for k in await store.list_keys("acct_t")]
    assert everything == ["key_1", "key_4", "key_7", "key_0", "key_3", "key_6"]
    pages, after = [], None
    while True:
        page = await store.list_keys("acct_t", 4, after)
        pages.append([k.id for k in page])
        if len(page) < 4:
            break
        after = (page[-1].created_at, page[-1].id)
    assert pages == [everything[:4], everything[4:]]


async def test_concurrent_changes_each_build_on_the_one_before(store: Store) -> None:
    """Found by an adversarial pass: seven PATCHes at once, each setting one field, left
    four of them unset (each wrote what it had read before the others)."""
    await _key(store, 5)
    fields = {
        "rpm": 5,
        "tpm": 500,
        "budget": 10**9,
        "models": ("a/*",),
        "expires_at": 2_000_000_000,
    }

    def setting(
        name: str, value: object
    ) -> Callable[[str | None, KeyPolicy], tuple[str | None, KeyPolicy]]:
        def change(label: str | None, policy: KeyPolicy) -> tuple[str | None, KeyPolicy]:
            return label, msgspec.structs.replace(policy, **{name: value})

        return change

    await asyncio.gather(*(store.change_key("key_5", setting(k, v)) for k, v in fields.items()))
    found = await store.find_key("sk-sluice-")
    assert found is not None
    assert {k: getattr(found.policy, k) for k in fields} == fields
    assert await store.change_key("key_none", setting("rpm", 1)) is None


async def test_of_concurrent_rotations_exactly_one_is_made(store: Store) -> None:
    key = await _key(store, 6)
    was = key_prefix(key)
    fresh = [new_key(bytes([n]) * 32) for n in range(10, 20)]
    made = await asyncio.gather(
        *(
            store.rotate_key("key_6", key_digest=key_digest(k), prefix=key_prefix(k), was=was)
            for k in fresh
        )
    )
    assert made.count(True) == 1
    winner = fresh[made.index(True)]
    assert await store.find_principal(key_digest(winner)) is not None
    for loser in (k for k in fresh if k != winner):
        assert await store.find_principal(key_digest(loser)) is None
    assert await store.find_principal(key_digest(key)) is None
