"""An account's own budget and per-minute limits, over all its keys: set through the
admin API (at creation or with ``PATCH /admin/accounts/{name}``) and effective on the
next request of any of its keys, without a restart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sluice.server.lifecycle import RunningGateway
from tests.server.test_admin import ENV, admin
from tests.server.test_key_policy import _completion, ask, chat
from tests.support.fake_openai import text_stream
from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.gateway import openai_connection_toml, running_gateway

STREAM = json.dumps(
    {"model": "test/gpt-fake", "stream": True, "messages": [{"role": "user", "content": "x"}]}
).encode()


async def two_keys(gw: RunningGateway, **account: object) -> list[str]:
    made = await admin(gw, "POST", "/admin/accounts", {"name": "team", "credits": 5, **account})
    assert made.status == 201, made.body
    keys = [await admin(gw, "POST", "/admin/accounts/team/keys", {}) for _ in range(2)]
    return [k.json()["key"] for k in keys]


async def test_an_account_budget_binds_every_key_and_a_patch_lifts_it(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.queue(Reply.json(_completion()))
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url), env=ENV) as gw:
        first, second = await two_keys(gw, budget="0.000001", budget_period="monthly")
        refused = [await ask(gw, key, chat("test/gpt-fake")) for key in (first, second)]
        raised = await admin(gw, "PATCH", "/admin/accounts/team", {"budget": 3})
        served = await ask(gw, second, chat("test/gpt-fake"))
        await gw.gateway.writer.flush()
        shown = (await admin(gw, "GET", "/admin/accounts/team")).json()
        await admin(gw, "POST", "/admin/accounts", {"name": "plain", "credits": 1})
        listed = {a["name"]: a for a in (await admin(gw, "GET", "/admin/accounts")).json()["data"]}
        assert await gw.gateway.store.reconcile() == []
    assert listed["team"]["spent"] == shown["spent"]  # a listing shows a budget's use too
    assert "spent" not in listed["plain"]  # no budget: no period to count, no query
    for answer in refused:
        error = answer.json()["error"]
        assert answer.status == 402
        assert (error["type"], error["code"]) == ("budget_exceeded", "account_budget_exceeded")
    assert raised.status == 200
    assert (raised.json()["budget"], raised.json()["budget_period"]) == (3.0, "monthly")
    assert served.status == 200 and len(fake.requests) == 1
    assert 0 < shown["spent"] == round(5 - shown["balance"], 9)


async def test_an_account_rate_limit_counts_all_its_keys_from_the_next_request(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    for _ in range(4):
        fake.queue(Reply.stream(*text_stream("ok")))
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url), env=ENV) as gw:
        first, second = await two_keys(gw)
        before = await ask(gw, first, STREAM)
        limited = await admin(gw, "PATCH", "/admin/accounts/team", {"rpm": 2})
        counted = [await ask(gw, key, STREAM) for key in (first, second, first)]
        await admin(gw, "PATCH", "/admin/accounts/team", {"rpm": None})
        after = await ask(gw, second, STREAM)
    assert before.status == 200 and "x-ratelimit-limit-requests" not in before.headers
    assert limited.json()["rpm"] == 2
    assert [r.status for r in counted] == [200, 200, 429]
    assert counted[0].headers["x-ratelimit-limit-requests"] == "2"
    assert counted[2].json()["error"]["code"] == "rate_limit_exceeded"
    assert after.status == 200


async def test_a_new_account_carries_its_policy_and_listings_show_it(tmp_path: Path) -> None:
    async with running_gateway(tmp_path, env=ENV) as gw:
        fields = {"tpm": 900, "metadata": {"team": "search"}, "budget": "12.5"}
        made = (await admin(gw, "POST", "/admin/accounts", {"name": "team", **fields})).json()
        listed = (await admin(gw, "GET", "/admin/accounts")).json()["data"]
    assert {k: made[k] for k in ("tpm", "rpm", "budget", "budget_period", "metadata")} == {
        "tpm": 900,
        "rpm": None,
        "budget": 12.5,
        "budget_period": "never",
        "metadata": {"team": "search"},
    }
    assert made["spent"] == 0
    assert [(a["tpm"], a["budget"]) for a in listed if a["name"] == "team"] == [(900, 12.5)]


@pytest.mark.parametrize(
    ("path", "doc", "status", "param"),
    [
        ("/admin/accounts/team", {"rpm": 0}, 400, None),
        ("/admin/accounts/team", {"budget": "-1"}, 400, "budget"),
        ("/admin/accounts/team", {"budget_period": "hourly"}, 400, None),
        ("/admin/accounts/team", {"models": ["x"]}, 400, None),
        ("/admin/accounts/nobody", {"rpm": 5}, 404, None),
    ],
    ids=["rpm-zero", "negative-budget", "unknown-period", "key-only-field", "no-account"],
)
async def test_bad_patches_are_refused_and_change_nothing(
    tmp_path: Path, path: str, doc: dict[str, Any], status: int, param: str | None
) -> None:
    async with running_gateway(tmp_path, env=ENV) as gw:
        await admin(gw, "POST", "/admin/accounts", {"name": "team", "rpm": 7})
        answer = await admin(gw, "PATCH", path, doc)
        shown = (await admin(gw, "GET", "/admin/accounts/team")).json()
    assert answer.status == status, answer.body
    if param is not None:
        assert answer.json()["error"]["param"] == param
    assert shown["rpm"] == 7 and shown["budget"] is None


async def test_an_api_key_cannot_change_an_account(tmp_path: Path) -> None:
    async with running_gateway(tmp_path, env=ENV) as gw:
        key, _ = await two_keys(gw)
        answer = await admin(gw, "PATCH", "/admin/accounts/team", {"rpm": 1}, token=key)
        shown = (await admin(gw, "GET", "/admin/accounts/team")).json()
    assert answer.status == 401 and shown["rpm"] is None
