"""A key's own policy on the request path: allowed models, expiry, its own rate limits,
set through the admin API and effective on the key's next request, without a restart."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from sluice.server.lifecycle import RunningGateway
from tests.server.test_admin import ENV, admin
from tests.support.fake_openai import text_stream
from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.gateway import openai_connection_toml, running_gateway
from tests.support.raw_http import RawResponse, exchange, get, post


def chat(model: str, models: list[str] | None = None) -> bytes:
    doc: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
    if models is not None:
        doc["models"] = models
    return json.dumps(doc).encode()


async def ask(gw: RunningGateway, key: str, body: bytes) -> RawResponse:
    return await exchange(gw.host, gw.port, post("/v1/chat/completions", body, key))


async def new_key(gw: RunningGateway, **fields: object) -> dict[str, Any]:
    if (await admin(gw, "GET", "/admin/accounts/team")).status == 404:
        await admin(gw, "POST", "/admin/accounts", {"name": "team", "metered": False})
    made = await admin(gw, "POST", "/admin/accounts/team/keys", fields)
    assert made.status == 201, made.body
    doc: dict[str, Any] = made.json()
    return doc


@pytest.mark.parametrize(
    ("globs", "model", "models", "allowed"),
    [
        (["test/*"], "test/gpt-fake", None, True),
        (["test/gpt-fake"], "test/gpt-fake", None, True),
        (["openai/*"], "test/gpt-fake", None, False),
        (["test/*"], "test/gpt-fake", ["other/model"], False),
        ([], "test/gpt-fake", None, False),
    ],
    ids=["glob", "exact", "outside", "a-fallback-outside", "none-allowed"],
)
async def test_the_allow_list_is_checked_before_any_upstream_call(
    tmp_path: Path,
    fake: FakeUpstream,
    globs: list[str],
    model: str,
    models: list[str] | None,
    allowed: bool,
) -> None:
    fake.queue(Reply.json(_completion()))
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url), env=ENV) as gw:
        key = await new_key(gw, models=globs, label="scoped")
        answer = await ask(gw, key["key"], chat(model, models))
    assert key["models"] == globs and key["name"] == "scoped"
    if allowed:
        assert answer.status == 200
        assert len(fake.requests) == 1
        return
    assert answer.status == 403
    error = answer.json()["error"]
    assert (error["type"], error["code"], error["param"]) == (
        "permission_error",
        "model_not_allowed",
        "model",
    )
    assert fake.requests == []


def _completion() -> dict[str, Any]:
    return {
        "id": "x",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-fake",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }


async def test_an_expired_key_is_refused_and_a_patch_revives_it(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.queue(Reply.json(_completion()))
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url), env=ENV) as gw:
        key = await new_key(gw, expires_at="2001-01-01T00:00:00Z")
        refused = await ask(gw, key["key"], chat("test/gpt-fake"))
        patched = await admin(gw, "PATCH", f"/admin/keys/{key['prefix']}", {"expires_at": None})
        served = await ask(gw, key["key"], chat("test/gpt-fake"))
        later = await admin(
            gw, "PATCH", f"/admin/keys/{key['prefix']}", {"expires_at": "2099-06-30T12:00:00+02:00"}
        )
    assert key["expires_at"] == "2001-01-01T00:00:00Z"
    assert refused.status == 401
    assert refused.json()["error"]["type"] == "authentication_error"
    assert refused.json()["error"]["code"] == "key_expired"
    assert patched.status == 200 and patched.json()["expires_at"] is None
    assert served.status == 200
    assert later.json()["expires_at"] == "2099-06-30T10:00:00Z"


async def test_a_keys_own_rate_limit_takes_effect_on_its_next_request(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    for _ in range(4):
        fake.queue(Reply.stream(*text_stream("ok")))
    body = json.dumps(
        {"model": "test/gpt-fake", "stream": True, "messages": [{"role": "user", "content": "x"}]}
    ).encode()
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url), env=ENV) as gw:
        key = await new_key(gw)
        first = await ask(gw, key["key"], body)
        limited = await admin(gw, "PATCH", f"/admin/keys/{key['prefix']}", {"rpm": 1})
        second = await ask(gw, key["key"], body)
        third = await ask(gw, key["key"], body)
        await admin(gw, "PATCH", f"/admin/keys/{key['prefix']}", {"rpm": None})
        fourth = await ask(gw, key["key"], body)
    assert first.status == 200 and "x-ratelimit-limit-requests" not in first.headers
    assert limited.json()["rpm"] == 1
    assert second.status == 200 and second.headers["x-ratelimit-limit-requests"] == "1"
    assert third.status == 429 and third.json()["error"]["code"] == "rate_limit_exceeded"
    # the limit itself is stated (it read "Rate limit reached for key:requests.")
    assert third.json()["error"]["message"].startswith(
        "Rate limit reached for key:requests: this API key's limit of 1 request a minute; retry in "
    ), third.json()["error"]["message"]
    assert fourth.status == 200


async def test_a_key_budget_is_held_against_and_refused_with_402(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.queue(Reply.json(_completion()))
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url), env=ENV) as gw:
        await admin(gw, "POST", "/admin/accounts", {"name": "team", "credits": 5})
        key = await new_key(gw, budget="0.000001", budget_period="daily")
        refused = await ask(gw, key["key"], chat("test/gpt-fake"))
        raised = await admin(gw, "PATCH", f"/admin/keys/{key['prefix']}", {"budget": 2})
        served = await ask(gw, key["key"], chat("test/gpt-fake"))
        await gw.gateway.writer.flush()
        account = (await admin(gw, "GET", "/admin/accounts/team")).json()
        listed = (await admin(gw, "GET", "/admin/accounts/team/keys")).json()["data"][0]
        assert await gw.gateway.store.reconcile() == []
    assert (key["budget"], key["budget_period"]) == (0.000001, "daily")
    assert refused.status == 402
    error = refused.json()["error"]
    assert (error["type"], error["code"]) == ("budget_exceeded", "key_budget_exceeded")
    # the budget as set (it read "$0.00 this period"), what was used, and the hold
    assert error["message"].startswith(
        "This API key's budget ($0.000001 this period) does not cover this request: "
        "$0.00 is already charged or held, and this request holds up to $0.0"
    ), error["message"]
    assert raised.json()["budget"] == 2.0
    assert served.status == 200 and len(fake.requests) == 1
    assert account["balance"] < 5  # the served request was charged to the account
    assert 0 < listed["spent"] == round(5 - account["balance"], 9)


@pytest.mark.parametrize(
    ("path", "doc", "status", "param"),
    [
        ("/admin/keys/{prefix}", {"expires_at": "tomorrow"}, 400, "expires_at"),
        ("/admin/keys/{prefix}", {"expires_at": "2030-01-01T00:00:00"}, 400, "expires_at"),
        ("/admin/keys/{prefix}", {"expires_at": "9999-12-31T23:59:59-01:00"}, 400, "expires_at"),
        ("/admin/keys/{prefix}", {"expires_at": "0001-01-01T00:00:00+01:00"}, 400, "expires_at"),
        ("/admin/keys/{prefix}", {"rpm": 0}, 400, None),
        ("/admin/keys/{prefix}", {"models": "test/*"}, 400, None),
        ("/admin/keys/{prefix}", {"colour": "red"}, 400, None),
        ("/admin/keys/{prefix}", {"budget": "-1"}, 400, "budget"),
        ("/admin/keys/{prefix}", {"budget": "lots"}, 400, "budget"),
        ("/admin/keys/{prefix}", {"budget_period": "hourly"}, 400, None),
        ("/admin/keys/sk-sluice-zzzzzz", {"rpm": 5}, 404, None),
        ("/admin/keys/sk-s", {"rpm": 5}, 400, None),
    ],
    ids=[
        "not-iso",
        "no-zone",
        "past-9999",
        "before-1970",
        "rpm-zero",
        "models-not-a-list",
        "unknown",
        "budget-negative",
        "budget-not-usd",
        "period-unknown",
        "no-key",
        "short",
    ],
)
async def test_bad_patches_are_refused_and_change_nothing(
    tmp_path: Path, path: str, doc: object, status: int, param: str | None
) -> None:
    async with running_gateway(tmp_path, env=ENV) as gw:
        key = await new_key(gw, rpm=7)
        answer = await admin(gw, "PATCH", path.format(prefix=key["prefix"]), doc)
        listed = await admin(gw, "GET", "/admin/accounts/team/keys")
    assert answer.status == status, answer.body
    if param is not None:
        assert answer.json()["error"]["param"] == param
    assert [k["rpm"] for k in listed.json()["data"]] == [7]


async def test_rotate_gives_the_same_key_record_a_new_secret(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.queue(Reply.json(_completion()))
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url), env=ENV) as gw:
        old = await new_key(gw, models=["test/*"], rpm=9, label="ci")
        assert (await ask(gw, old["key"], chat("openai/x"))).status == 403  # cached, policy on
        rotated = await admin(gw, "POST", f"/admin/keys/{old['prefix']}/rotate")
        new = rotated.json()
        stale = await ask(gw, old["key"], chat("test/gpt-fake"))
        fresh = await ask(gw, new["key"], chat("test/gpt-fake"))
        listed = (await admin(gw, "GET", "/admin/accounts/team/keys")).json()["data"]
    assert rotated.status == 200 and new["key"] != old["key"]
    assert (new["models"], new["rpm"], new["name"]) == (["test/*"], 9, "ci")
    assert stale.status == 401 and stale.json()["error"]["code"] == "invalid_api_key"
    assert fresh.status == 200
    assert [k["prefix"] for k in listed] == [new["prefix"]]
    assert old["key"] not in rotated.body.decode()


async def test_the_model_list_shows_a_key_only_what_it_may_ask_for(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url), env=ENV) as gw:
        narrow = await new_key(gw, models=["sluice/demo-*"])
        wide = await new_key(gw)
        shown = {}
        for name, key in (("narrow", narrow), ("wide", wide)):
            answer = await exchange(gw.host, gw.port, get("/v1/models", key["key"]))
            shown[name] = [entry["id"] for entry in answer.json()["data"]]
    assert shown["narrow"] == ["sluice/demo-fast", "sluice/demo-embed"]
    assert set(shown["wide"]) >= {"sluice/demo", "sluice/demo-fast", "test/gpt-fake"}


async def test_concurrent_patches_and_rotations_lose_nothing(tmp_path: Path) -> None:
    """Found by an adversarial pass: seven PATCHes at once lost an allow-list and an
    expiry; ten rotations at once each answered 200 with a secret, and only one worked."""
    async with running_gateway(tmp_path, env=ENV) as gw:
        key = await new_key(gw)
        path = f"/admin/keys/{key['prefix']}"
        fields: dict[str, object] = {
            "rpm": 5, "tpm": 500, "budget": 2, "models": ["a/*"],
            "expires_at": "2099-01-01T00:00:00Z", "metadata": {"team": "x"},
            "budget_period": "monthly",
        }  # fmt: skip
        patched = await asyncio.gather(
            *(admin(gw, "PATCH", path, {name: value}) for name, value in fields.items())
        )
        shown = (await admin(gw, "GET", "/admin/accounts/team/keys")).json()["data"][0]
        rotations = await asyncio.gather(*(admin(gw, "POST", f"{path}/rotate") for _ in range(10)))
        made = [r for r in rotations if r.status == 200]
        works = await ask(gw, made[0].json()["key"], chat("a/model")) if made else None
    assert all(p.status == 200 for p in patched)
    assert {name: shown[name] for name in fields} == {**fields, "budget": 2.0}
    assert len(made) == 1, [r.status for r in rotations]
    refused = {(r.status, r.json()["error"]["code"]) for r in rotations if r.status != 200}
    # too late to find the old prefix, or found it but another rotation came first
    assert refused <= {(404, "key_not_found"), (409, "key_changed")}
    assert works is not None and works.status != 401  # the secret that was answered works


def fallback_config(primary: FakeUpstream, backup: FakeUpstream) -> str:
    return f"""
[[connections]]
id = "conn_a"
provider = "openai-compatible"
base_url = "{primary.base_url}"
api_key_env = "FAKE_UPSTREAM_KEY"

[[connections]]
id = "conn_b"
provider = "openai-compatible"
base_url = "{backup.base_url}"
api_key_env = "FAKE_UPSTREAM_KEY"

[[models]]
id = "acme/fast"
providers = {{ conn_a = "fast" }}
fallbacks = ["backup/small"]

[[models]]
id = "backup/small"
providers = {{ conn_b = "small" }}
"""


async def test_a_fallback_the_key_may_not_use_is_skipped(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    """Found by an attacker's pass: a key allowed `acme/*` was served `backup/small`
    through a configured fallback."""
    backup = FakeUpstream()
    await backup.start()
    try:
        backup.default = Reply.stream(*text_stream("from backup"))
        fake.default = Reply.json({"error": {"message": "down"}}, status=500)
        body = json.loads(chat("acme/fast"))
        body["stream"] = True
        streamed = json.dumps(body).encode()
        async with running_gateway(tmp_path, fallback_config(fake, backup), env=ENV) as gw:
            scoped = (await new_key(gw, models=["acme/*"]))["key"]
            anyone = (await new_key(gw))["key"]
            refused = await ask(gw, scoped, streamed)
            backups = len(backup.requests)
            served = await ask(gw, anyone, streamed)
    finally:
        await backup.close()
    assert refused.status == 502 and backups == 0
    assert served.status == 200 and b"from backup" in served.body


async def test_a_keys_cache_permissions_are_set_and_cleared_through_the_admin_api(
    tmp_path: Path,
) -> None:
    async with running_gateway(tmp_path, env=ENV) as gw:
        key = await new_key(gw, cache_fill=False)
        read_too = await admin(gw, "PATCH", f"/admin/keys/{key['prefix']}", {"cache_read": False})
        cleared = await admin(
            gw, "PATCH", f"/admin/keys/{key['prefix']}", {"cache_read": None, "cache_fill": None}
        )
        wrong = await admin(gw, "PATCH", f"/admin/keys/{key['prefix']}", {"cache_read": "no"})
    assert (key["cache_read"], key["cache_fill"]) == (True, False)
    assert (read_too.json()["cache_read"], read_too.json()["cache_fill"]) == (False, False)
    assert (cleared.json()["cache_read"], cleared.json()["cache_fill"]) == (True, True)
    assert wrong.status == 400
