"""``POST /admin/keys/revoke``: a key is revoked by its id, by the whole key (matched by
its digest, a whole key given as ``prefix`` too) or by the start of its prefix; the
answer names what was revoked and the key stops at once. What names no live key is a
404 ``key_not_found`` whatever the form, never ``200 {"revoked": 0}``; raced against a
rotation, a revocation that answers 200 leaves no secret of the key working.

Found by an outside pass (issue 20): a leaked key pasted whole answered
``200 {"revoked": 0}`` and kept working, and a revocation racing a rotation answered
200 with nothing revoked while the key lived on with its new secret."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from sluice.accounts.keys import KEY_PREFIX, key_digest, key_prefix
from sluice.server.lifecycle import RunningGateway
from tests.server.test_admin import ENV, admin
from tests.support.databases import fresh_postgres
from tests.support.gateway import running_gateway
from tests.support.raw_http import RawResponse, exchange, get

FORMS = ("prefix", "key", "id")
ROUNDS = 24
"""Race rounds per backend (each form a third of them)."""
JITTER = (0, 0, 0.002, 0.005, 0.05)
"""Seconds the revocation waits: none (it tends to come first), or enough for the
rotation to come first."""


@asynccontextmanager
async def gateway(tmp_path: Path, backend: str = "sqlite") -> AsyncIterator[RunningGateway]:
    """A gateway with the admin API on and an account ``team``, over ``backend``."""
    if backend == "sqlite":
        async with running_gateway(tmp_path, env=ENV) as gw:
            await admin(gw, "POST", "/admin/accounts", {"name": "team", "credits": 1})
            yield gw
        return
    async with fresh_postgres() as dsn:
        async with running_gateway(tmp_path, f'[storage]\nurl = "{dsn}"\n', env=ENV) as gw:
            await admin(gw, "POST", "/admin/accounts", {"name": "team", "credits": 1})
            yield gw


async def made_key(gw: RunningGateway, label: str = "ci") -> dict[str, Any]:
    answer = await admin(gw, "POST", "/admin/accounts/team/keys", {"label": label})
    assert answer.status == 201, answer.body
    made: dict[str, Any] = answer.json()
    return made


async def status_of(gw: RunningGateway, key: str) -> int:
    """What a request with ``key`` gets: 200 while it lives, 401 once revoked."""
    return (await exchange(gw.host, gw.port, get("/v1/models", key))).status


def revoked_ids(answer: RawResponse) -> list[str]:
    return [k["id"] for k in answer.json()["keys"]]


def assert_not_found(answer: RawResponse, *secrets: str) -> None:
    assert answer.status == 404, answer.body
    error = answer.json()["error"]
    assert (error["type"], error["code"]) == ("invalid_request_error", "key_not_found")
    for secret in secrets:
        assert secret not in answer.body.decode()


@pytest.mark.parametrize("field", ["key", "prefix"])
async def test_a_key_pasted_whole_is_revoked_and_stops_at_once(tmp_path: Path, field: str) -> None:
    async with gateway(tmp_path) as gw:
        made, bystander = await made_key(gw), await made_key(gw, "other")
        before = await status_of(gw, made["key"])
        answer = await admin(gw, "POST", "/admin/keys/revoke", {field: made["key"]})
        after = await status_of(gw, made["key"])
        other = await status_of(gw, bystander["key"])
    assert before == 200
    assert answer.status == 200, answer.body
    assert answer.json() == {
        "revoked": 1,
        "keys": [{"id": made["id"], "prefix": made["prefix"], "name": "ci"}],
    }
    assert made["key"] not in answer.body.decode()
    assert after == 401 and other == 200


async def test_a_key_is_revoked_by_its_id_whatever_rotated_it(tmp_path: Path) -> None:
    async with gateway(tmp_path) as gw:
        made = await made_key(gw)
        rotated = await admin(gw, "POST", f"/admin/keys/{made['prefix']}/rotate")
        new = rotated.json()["key"]
        works = await status_of(gw, new)
        answer = await admin(gw, "POST", "/admin/keys/revoke", {"id": made["id"]})
        after = await status_of(gw, new)
        listed = await admin(gw, "GET", "/admin/accounts/team/keys")
    assert rotated.status == 200 and works == 200
    assert answer.status == 200 and answer.json()["revoked"] == 1
    assert revoked_ids(answer) == [made["id"]]
    assert answer.json()["keys"][0]["prefix"] == key_prefix(new)
    assert after == 401
    assert [k["revoked"] for k in listed.json()["data"]] == [True]


async def test_a_short_prefix_revokes_every_live_key_it_names_and_names_them(
    tmp_path: Path,
) -> None:
    async with gateway(tmp_path) as gw:
        store = gw.gateway.store
        account = await store.get_account("team")
        assert account is not None
        twins = [KEY_PREFIX + "Abcd" + c * 36 for c in "xy"]
        for n, key in enumerate(twins):
            await store.add_key(
                f"key_twin{n}",
                account_id=account.id,
                key_digest=key_digest(key),
                prefix=key_prefix(key),
                name=None,
                now=1,
            )
        answer = await admin(gw, "POST", "/admin/keys/revoke", {"prefix": KEY_PREFIX + "Abcd"})
        statuses = [await status_of(gw, key) for key in twins]
    assert answer.status == 200 and answer.json()["revoked"] == 2
    assert sorted(revoked_ids(answer)) == ["key_twin0", "key_twin1"]
    assert statuses == [401, 401]


@pytest.mark.parametrize(
    "named",
    [
        "unknown prefix",
        "unknown key",
        "unknown key as prefix",
        "unknown id",
        "old key after a rotation",
        "old prefix after a rotation",
        "id of a revoked key",
        "revoked key",
        "prefix longer than kept",
    ],
)
async def test_what_names_no_live_key_is_404_key_not_found(tmp_path: Path, named: str) -> None:
    never = KEY_PREFIX + "Q" * 40
    async with gateway(tmp_path) as gw:
        made, revoked = await made_key(gw), await made_key(gw, "gone")
        rotated = await admin(gw, "POST", f"/admin/keys/{made['prefix']}/rotate")
        first = await admin(gw, "POST", "/admin/keys/revoke", {"prefix": revoked["prefix"]})
        body = {
            "unknown prefix": {"prefix": KEY_PREFIX + "QQQQ"},
            "unknown key": {"key": never},
            "unknown key as prefix": {"prefix": never},
            "unknown id": {"id": "key_nosuchkey"},
            "old key after a rotation": {"key": made["key"]},
            "old prefix after a rotation": {"prefix": made["prefix"]},
            "id of a revoked key": {"id": revoked["id"]},
            "revoked key": {"key": revoked["key"]},
            "prefix longer than kept": {"prefix": rotated.json()["key"][:30]},
        }[named]
        answer = await admin(gw, "POST", "/admin/keys/revoke", body)
        still = await status_of(gw, rotated.json()["key"])
    assert rotated.status == 200 and first.status == 200
    assert_not_found(answer, never, made["key"], revoked["key"], rotated.json()["key"][:30])
    assert still == 200


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({}, "prefix"),
        ({"prefix": KEY_PREFIX + "abcd", "id": "key_x"}, "id"),
        ({"key": KEY_PREFIX + "Q" * 40, "prefix": KEY_PREFIX + "abcd"}, "key"),
        ({"key": KEY_PREFIX + "short"}, "key"),
        ({"key": KEY_PREFIX + "Q" * 40 + "\n"}, "key"),
        ({"id": "acct_x"}, "id"),
        ({"id": "key_"}, "id"),
        ({"prefix": "sk-sluice-abc"}, "prefix"),
    ],
    ids=[
        "none",
        "prefix and id",
        "key and prefix",
        "short key",
        "key with a newline",
        "not a key id",
        "empty id",
        "short prefix",
    ],
)
async def test_a_revoke_body_names_one_key_form_or_is_a_400_naming_the_field(
    tmp_path: Path, body: dict[str, str], param: str
) -> None:
    async with gateway(tmp_path) as gw:
        answer = await admin(gw, "POST", "/admin/keys/revoke", body)
    assert answer.status == 400, answer.body
    error = answer.json()["error"]
    assert (error["type"], error["param"]) == ("invalid_request_error", param)
    assert "Q" * 40 not in answer.body.decode()


async def _revoke_after(gw: RunningGateway, body: dict[str, str], delay: float) -> RawResponse:
    await asyncio.sleep(delay)
    return await admin(gw, "POST", "/admin/keys/revoke", body)


def _wrongs(
    rotate: RawResponse, revoke: RawResponse, key_id: str, works: dict[str, bool]
) -> list[str]:
    """What one round got wrong: ``works`` says which of the key's secrets (``old``,
    ``new``) still authenticate after both answered."""
    body = revoke.json()
    # a rotation that lost: 409 when the revocation landed while it was making the new
    # secret, 404 key_not_found when it had already landed as the rotation looked the key up
    lost = rotate.status == 409 or (
        rotate.status == 404 and rotate.json()["error"]["code"] == "key_not_found"
    )
    wrongs = (
        []
        if rotate.status == 200 or (lost and revoke.status == 200)
        else [f"rotate answered {rotate.status}"]
    )
    if works["old"]:
        wrongs.append("the old secret still works")
    if revoke.status == 200:
        if body.get("revoked", 0) < 1 or [k["id"] for k in body.get("keys", [])] != [key_id]:
            wrongs.append(f"200 not naming the key: {body}")
        if works["new"]:
            wrongs.append("200, but the new secret works")
    elif revoke.status == 404:
        if body["error"]["code"] != "key_not_found" or rotate.status != 200:
            wrongs.append(f"404 {body['error']['code']} without a rotation first")
    else:
        wrongs.append(f"revoke answered {revoke.status}: {body}")
    return wrongs


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_revoke_raced_with_a_rotation_answers_truly(tmp_path: Path, backend: str) -> None:
    """Each round: a new key, rotated by its prefix while it is revoked (by prefix,
    whole key or id, after a jitter). A 200 names the key and leaves neither secret
    working (a rotation that lost is a 409, or a 404 when the revocation landed before it
    looked the key up); a 404 ``key_not_found`` only follows a
    rotation that took the old secret away, so never a revocation by id."""
    draw = random.Random(20)
    wrong: list[tuple[int, str, str]] = []
    seen = {"revoked": 0, "rotated first": 0}
    async with gateway(tmp_path, backend) as gw:
        for n in range(ROUNDS):
            made, form = await made_key(gw), FORMS[n % len(FORMS)]
            rotate, revoke = await asyncio.gather(
                admin(gw, "POST", f"/admin/keys/{made['prefix']}/rotate"),
                _revoke_after(gw, {form: made[form]}, draw.choice(JITTER)),
            )
            new = rotate.json()["key"] if rotate.status == 200 else None
            works = {
                "old": await status_of(gw, made["key"]) == 200,
                "new": new is not None and await status_of(gw, new) == 200,
            }
            wrong += [(n, form, w) for w in _wrongs(rotate, revoke, made["id"], works)]
            seen["revoked" if revoke.status == 200 else "rotated first"] += 1
            assert made["key"] not in revoke.body.decode()
    assert wrong == []
    assert seen["revoked"] > 0 and seen["rotated first"] > 0, seen
