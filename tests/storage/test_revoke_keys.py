"""Revocation in storage, on both backends: by a key's id, by the whole key (its digest)
or by the start of its readable prefix; the keys revoked come back, and nothing live
named is an empty answer. Raced against a rotation, either order is consistent: revoked
first, the rotation is refused; rotated first, the old secret and prefix name nothing,
while the id still names the key."""

from __future__ import annotations

import asyncio
import random
from typing import Literal

import pytest

from sluice.accounts.keys import KEY_PREFIX, key_digest, key_prefix, keys_named, new_key
from sluice.storage.base import KeySelector, Store

Form = Literal["prefix", "key", "id"]
FORMS: tuple[Form, ...] = ("prefix", "key", "id")
ROUNDS = 60
JITTER = (0, 0, 0.001, 0.003, 0.03)
"""Seconds the revocation waits: none (it tends to come first), or enough for the
rotation to come first."""


async def _team(store: Store) -> str:
    account = await store.get_account("team")
    if account is None:
        account = await store.create_account("acct_t", "team", metered=True, credits=0, now=1)
    return account.id


async def _add(store: Store, key_id: str, key: str) -> str:
    await store.add_key(
        key_id,
        account_id=await _team(store),
        key_digest=key_digest(key),
        prefix=key_prefix(key),
        name=f"label {key_id}",
        now=2,
    )
    return key


def _named_by(form: Form, key: str, key_id: str) -> KeySelector:
    """What an operator holding ``key`` (and its id) names it by, in each form."""
    text = {"prefix": key_prefix(key), "key": key, "id": key_id}[form]
    return keys_named(text)


@pytest.mark.parametrize("form", FORMS)
async def test_a_key_is_revoked_by_each_form_and_named_in_the_answer(
    store: Store, form: Form
) -> None:
    key = await _add(store, "key_1", new_key(bytes([1]) * 32))
    bystander = await _add(store, "key_2", new_key(bytes([2]) * 32))
    revoked = await store.revoke_keys(_named_by(form, key, "key_1"), now=7)
    assert [(k.id, k.prefix, k.name, k.revoked_at) for k in revoked] == [
        ("key_1", key_prefix(key), "label key_1", 7)
    ]
    assert await store.find_principal(key_digest(key)) is None
    assert await store.find_principal(key_digest(bystander)) is not None
    assert await store.revoke_keys(_named_by(form, key, "key_1"), now=8) == []


async def test_what_names_no_live_key_revokes_nothing(store: Store) -> None:
    key = await _add(store, "key_1", new_key(bytes([3]) * 32))
    never = new_key(bytes([4]) * 32)
    for which in (
        KeySelector("id", "key_none"),
        KeySelector("digest", key_digest(never)),
        KeySelector("prefix", key_prefix(never)),
        KeySelector("prefix", key[:20]),  # longer than what is kept readable
        KeySelector("digest", "' OR '1'='1"),
        KeySelector("prefix", "%"),
    ):
        assert await store.revoke_keys(which, now=5) == [], which
    assert await store.find_principal(key_digest(key)) is not None


async def test_a_short_prefix_revokes_every_live_key_it_names(store: Store) -> None:
    shared = KEY_PREFIX + "Abcd"
    twins = [shared + suffix * 36 for suffix in ("x", "y")]
    other = KEY_PREFIX + "Abce" + "z" * 36
    for n, key in enumerate([*twins, other]):
        await _add(store, f"key_{n}", key)
    revoked = await store.revoke_keys(KeySelector("prefix", shared), now=9)
    assert sorted(k.id for k in revoked) == ["key_0", "key_1"]
    assert await store.find_principal(key_digest(other)) is not None


async def test_after_a_rotation_only_the_id_still_names_the_key(store: Store) -> None:
    old = await _add(store, "key_1", new_key(bytes([5]) * 32))
    new = new_key(bytes([6]) * 32)
    assert await store.rotate_key(
        "key_1", key_digest=key_digest(new), prefix=key_prefix(new), was=key_prefix(old)
    )
    assert await store.revoke_keys(keys_named(old), now=3) == []
    assert await store.revoke_keys(keys_named(key_prefix(old)), now=3) == []
    assert await store.find_principal(key_digest(new)) is not None
    assert [k.id for k in await store.revoke_keys(keys_named("key_1"), now=4)] == ["key_1"]
    assert await store.find_principal(key_digest(new)) is None


async def _rotate(store: Store, prefix: str, new: str) -> bool:
    """What ``POST /admin/keys/{prefix}/rotate`` does: find the key, then rotate it if
    nothing came first."""
    found = await store.find_key(prefix)
    if found is None:
        return False
    return await store.rotate_key(
        found.id, key_digest=key_digest(new), prefix=key_prefix(new), was=found.prefix
    )


async def _revoke_after(store: Store, which: KeySelector, delay: float) -> list[str]:
    await asyncio.sleep(delay)
    return [k.id for k in await store.revoke_keys(which, now=10)]


async def test_a_revoke_raced_with_a_rotation_never_leaves_the_key_live(store: Store) -> None:
    """Many rounds, each form of revocation against a rotation, started in either order
    with a jitter: a revocation that names the key leaves neither secret working, and
    one that names nothing happened after a rotation took the old secret away."""
    draw = random.Random(20)
    outcomes: dict[str, int] = {"revoked": 0, "rotated first": 0}
    for n in range(ROUNDS):
        form, key_id = FORMS[n % len(FORMS)], f"key_{n}"
        old = await _add(store, key_id, new_key(draw.randbytes(32)))
        new = new_key(draw.randbytes(32))
        rotated, revoked = await asyncio.gather(
            _rotate(store, key_prefix(old), new),
            _revoke_after(store, _named_by(form, old, key_id), draw.choice(JITTER)),
        )
        assert await store.find_principal(key_digest(old)) is None  # revoked or replaced
        if revoked:
            assert revoked == [key_id]
            assert await store.find_principal(key_digest(new)) is None, (n, form, rotated)
            outcomes["revoked"] += 1
        else:
            # named nothing: only because the rotation came first, and never by its id
            assert rotated and form != "id", (n, form)
            assert await store.find_principal(key_digest(new)) is not None
            outcomes["rotated first"] += 1
    assert outcomes["revoked"] > 0 and outcomes["rotated first"] > 0, outcomes
