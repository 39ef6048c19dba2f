"""The admin API: accounts, credits, keys, an account's own connections and prices."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from sluice.server.lifecycle import RunningGateway
from tests.support.fake_openai import text_stream
from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.gateway import openai_connection_toml, running_gateway
from tests.support.raw_http import RawResponse, exchange, get, post

ADMIN = "admin-" + "x" * 40
SECRET = Fernet.generate_key().decode()
ENV = {"SLUICE_ADMIN_KEY": ADMIN, "SLUICE_SECRET_KEY": SECRET}
BYO_KEY = "sk-byo-provider-key-0123456789"


async def admin(
    gw: RunningGateway, method: str, path: str, doc: object | None = None, token: str = ADMIN
) -> RawResponse:
    body = b"" if doc is None else json.dumps(doc).encode()
    request = (
        f"{method} {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    return await exchange(gw.host, gw.port, request)


async def test_admin_api_is_off_without_a_key_and_refuses_wrong_keys(tmp_path: Path) -> None:
    async with running_gateway(tmp_path / "off") as gw:
        off = await admin(gw, "GET", "/admin/accounts/dev")
    async with running_gateway(tmp_path / "on", env=ENV) as gw:
        wrong = await admin(gw, "GET", "/admin/accounts/dev", token="nope" * 10)
        assert gw.dev_key is not None
        dev_key = await admin(gw, "GET", "/admin/accounts/dev", token=gw.dev_key.key)
        ok = await admin(gw, "GET", "/admin/accounts/dev")
    assert off.status == 404
    assert wrong.status == 401 and wrong.json()["error"]["code"] == "invalid_admin_key"
    assert dev_key.status == 401  # an API key is not an admin key
    assert ok.status == 200 and ok.json()["name"] == "dev"


async def test_accounts_credits_and_keys(tmp_path: Path) -> None:
    async with running_gateway(tmp_path, env=ENV) as gw:
        created = await admin(gw, "POST", "/admin/accounts", {"name": "team", "credits": "12.5"})
        again = await admin(gw, "POST", "/admin/accounts", {"name": "team"})
        topped = await admin(gw, "POST", "/admin/accounts/team/credits", {"amount": 2.5})
        bad = await admin(gw, "POST", "/admin/accounts/team/credits", {"amount": "1e-12"})
        typo = await admin(gw, "POST", "/admin/accounts", {"name": "x", "credit": 1})
        new = (await admin(gw, "POST", "/admin/accounts/team/keys", {"name": "ci"})).json()
        works = await exchange(gw.host, gw.port, get("/v1/models", new["key"]))
        listed = await admin(gw, "GET", "/admin/accounts/team/keys")
        revoked = await admin(gw, "POST", "/admin/keys/revoke", {"prefix": new["prefix"]})
        stopped = await exchange(gw.host, gw.port, get("/v1/models", new["key"]))
        unknown = await admin(gw, "GET", "/admin/accounts/nobody")
        assert await gw.gateway.store.reconcile() == []
    assert created.status == 201 and created.json()["balance"] == 12.5
    assert again.status == 409 and again.json()["error"]["code"] == "conflict"
    assert topped.json()["balance"] == 15.0
    assert bad.status == 400 and bad.json()["error"]["param"] == "amount"
    assert typo.status == 400
    assert works.status == 200
    assert new["key"] not in listed.body.decode()
    assert new["id"].startswith("key_")
    assert listed.json()["data"] == [
        {
            "id": new["id"],
            "prefix": new["prefix"],
            "name": "ci",
            "created_at": listed.json()["data"][0]["created_at"],
            "revoked": False,
            "models": None,
            "expires_at": None,
            "resumable": False,
            "cache_read": True,
            "cache_fill": True,
            "rpm": None,
            "tpm": None,
            "budget": None,
            "budget_period": "never",
            "spent": 0.0,
            "metadata": {},
        }
    ]
    assert revoked.json() == {
        "revoked": 1,
        "keys": [{"id": new["id"], "prefix": new["prefix"], "name": "ci"}],
    }
    assert stopped.status == 401  # revoked here takes effect at once
    assert unknown.status == 404


async def test_an_accounts_own_connection_serves_only_that_account(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.default = Reply.stream(
        *text_stream(
            "byo", usage={"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}
        )
    )
    config = "[server]\nport = 0\nallow_private_upstreams = true\n"
    async with running_gateway(tmp_path, config, env=ENV) as gw:
        await admin(gw, "POST", "/admin/accounts", {"name": "team", "credits": 1})
        key = (await admin(gw, "POST", "/admin/accounts/team/keys")).json()["key"]
        saved = await admin(
            gw,
            "PUT",
            "/admin/accounts/team/connections/conn_team_openai",
            {
                "provider": "openai",
                "base_url": fake.base_url,
                "api_key": BYO_KEY,
                "models": {"openai/gpt-4o-mini": "gpt-4o-mini-byo"},
                "prices": {"openai/gpt-4o-mini": {"input": 1.0, "output": 1.0}},
            },
        )
        listed = await admin(gw, "GET", "/admin/accounts/team/connections")
        body = json.dumps(
            {
                "model": "openai/gpt-4o-mini",
                "stream": True,
                "stream_options": {"include_usage": True},
                "messages": [{"role": "user", "content": "hi"}],
            }
        ).encode()
        mine = await exchange(gw.host, gw.port, post("/v1/chat/completions", body, key))
        assert gw.dev_key is not None
        theirs = await exchange(
            gw.host, gw.port, post("/v1/chat/completions", body, gw.dev_key.key)
        )
        team = await gw.gateway.store.get_account("team")
        assert team is not None
        raw_rows = await gw.gateway.store.account_connections(team.id)
        metrics = (await admin(gw, "GET", "/metrics")).body
    # an account's own connection is not named in /metrics
    assert b"conn_team_openai" not in metrics
    assert b'connection="account-owned",outcome="served"} 1.0' in metrics
    assert saved.status == 200 and saved.json()["has_api_key"] is True
    assert BYO_KEY not in saved.body.decode() and BYO_KEY not in listed.body.decode()
    assert listed.json()["object"] == "list"  # shaped like every other listing
    assert [c["id"] for c in listed.json()["data"]] == ["conn_team_openai"]
    assert raw_rows and raw_rows[0][1] is not None and BYO_KEY not in raw_rows[0][1]
    assert mine.status == 200
    first = json.loads(mine.body.split(b"\n\n")[0].removeprefix(b"data: "))
    assert (first["connection"], first["route"]) == ("conn_team_openai", "primary")
    usage = json.loads(mine.body.split(b"\n\n")[-3].removeprefix(b"data: "))["usage"]
    assert usage["price_source"] == "custom_provider" and usage["cost"] == 2e-5
    assert fake.requests[0].headers["authorization"] == f"Bearer {BYO_KEY}"
    assert fake.requests[0].json()["model"] == "gpt-4o-mini-byo"
    assert theirs.status == 404  # the dev account has no connection serving that model


async def test_an_accounts_own_price(tmp_path: Path, fake: FakeUpstream) -> None:
    fake.default = Reply.stream(
        *text_stream(
            "x", usage={"prompt_tokens": 1000, "completion_tokens": 0, "total_tokens": 1000}
        )
    )
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url), env=ENV) as gw:
        await admin(gw, "POST", "/admin/accounts", {"name": "team", "credits": 1})
        key = (await admin(gw, "POST", "/admin/accounts/team/keys")).json()["key"]
        priced = await admin(
            gw, "PUT", "/admin/accounts/team/prices/test/gpt-fake", {"input": 0.5, "output": 0.5}
        )
        body = json.dumps(
            {
                "model": "test/gpt-fake",
                "stream": True,
                "stream_options": {"include_usage": True},
                "messages": [{"role": "user", "content": "hi"}],
            }
        ).encode()
        resp = await exchange(gw.host, gw.port, post("/v1/chat/completions", body, key))
        unknown = await admin(
            gw, "PUT", "/admin/accounts/team/prices/no/such", {"input": 1, "output": 1}
        )
    assert priced.status == 200
    usage = json.loads(resp.body.split(b"\n\n")[-3].removeprefix(b"data: "))["usage"]
    assert (usage["cost"], usage["price_source"]) == (0.0005, "custom")
    assert unknown.status == 404


async def test_connection_validation(tmp_path: Path) -> None:
    async with running_gateway(tmp_path, env=ENV) as gw:
        await admin(gw, "POST", "/admin/accounts", {"name": "team"})
        cases = {
            "bad-id": (
                "/admin/accounts/team/connections/evil",
                {"provider": "openai", "models": {}},
            ),
            "operator-id": (
                "/admin/accounts/team/connections/conn_demo",
                {"provider": "openai", "models": {}},
            ),
            "kind": ("/admin/accounts/team/connections/conn_x", {"provider": "nope", "models": {}}),
            "model": (
                "/admin/accounts/team/connections/conn_x",
                {"provider": "openai", "models": {"no/such": "x"}},
            ),
            "scheme": (
                "/admin/accounts/team/connections/conn_x",
                {"provider": "openai", "base_url": "file:///etc/passwd", "models": {}},
            ),
            "demo": ("/admin/accounts/team/connections/conn_x", {"provider": "demo", "models": {}}),
            "no-region": (
                "/admin/accounts/team/connections/conn_x",
                {"provider": "aws-bedrock", "api_key": "k", "models": {}},
            ),
        }
        results = {name: await admin(gw, "PUT", path, doc) for name, (path, doc) in cases.items()}
    for name, resp in results.items():
        assert resp.status == 400, name
    assert results["no-region"].json()["error"]["param"] == "region"


async def test_a_connection_id_another_account_holds_is_refused(tmp_path: Path) -> None:
    config = "[server]\nport = 0\nallow_private_upstreams = true\n"
    async with running_gateway(tmp_path, config, env=ENV) as gw:
        for name in ("team", "rival"):
            await admin(gw, "POST", "/admin/accounts", {"name": name})
        doc = {
            "provider": "openai-compatible",
            "base_url": "http://127.0.0.1:9/v1",
            "models": {"openai/gpt-4o-mini": "gpt-4o-mini"},
        }
        first = await admin(gw, "PUT", "/admin/accounts/team/connections/conn_shared", doc)
        again = await admin(gw, "PUT", "/admin/accounts/team/connections/conn_shared", doc)
        taken = await admin(
            gw, "PUT", "/admin/accounts/rival/connections/conn_shared", {**doc, "models": {}}
        )
        theirs = await admin(gw, "GET", "/admin/accounts/rival/connections")
        mine = await admin(gw, "GET", "/admin/accounts/team/connections")
    assert first.status == 200 and again.status == 200
    assert taken.status == 409
    assert taken.json()["error"]["code"] == "connection_id_taken"
    assert taken.json()["error"]["param"] == "id"
    assert theirs.json()["data"] == []
    assert mine.json()["data"][0]["models"] == doc["models"]


async def test_an_accounts_connection_may_not_point_inside(tmp_path: Path) -> None:
    async with running_gateway(tmp_path, env=ENV) as gw:
        await admin(gw, "POST", "/admin/accounts", {"name": "team"})
        results = [
            await admin(
                gw,
                "PUT",
                "/admin/accounts/team/connections/conn_x",
                {"provider": "openai-compatible", "base_url": url, "models": {}},
            )
            for url in (
                "http://127.0.0.1:9/v1",
                "http://169.254.169.254/latest",
                "http://[::ffff:127.0.0.1]/v1",
                "http://2130706433/v1",
                "http://localhost:8787/v1",
                "http://good.com@10.0.0.1/v1",
            )
        ]
    for resp in results:
        assert resp.status == 400
        assert resp.json()["error"]["param"] == "base_url"
        assert resp.json()["error"]["code"] in ("base_url_not_allowed", "invalid_base_url")


async def test_amounts_names_and_prices_out_of_range_are_400s_not_500s(tmp_path: Path) -> None:
    """Found by the resilience suite: int64 overflow, NULs PostgreSQL refuses, negatives."""
    async with running_gateway(tmp_path, env=ENV) as gw:
        await admin(gw, "POST", "/admin/accounts", {"name": "team", "credits": 1})
        cases = {
            "credits": ("POST", "/admin/accounts", {"name": "big", "credits": 1e10}),
            "credits-text": ("POST", "/admin/accounts", {"name": "big", "credits": "1e30"}),
            "negative": ("POST", "/admin/accounts", {"name": "neg", "credits": -5}),
            "top-up": ("POST", "/admin/accounts/team/credits", {"amount": "9300000000"}),
            "key-name": ("POST", "/admin/accounts/team/keys", {"name": "a\u0000b"}),
            "prefix": ("POST", "/admin/keys/revoke", {"prefix": "sk-sluice-\u0000x"}),
            "short-prefix": ("POST", "/admin/keys/revoke", {"prefix": "sk-sluice-abc"}),
            "account-name": ("POST", "/admin/accounts", {"name": "-team"}),
            "long-name": ("POST", "/admin/accounts", {"name": "t" * 65}),
            "price": ("PUT", "/admin/accounts/team/prices/sluice/demo", {"input": -1, "output": 1}),
            "huge-price": (
                "PUT",
                "/admin/accounts/team/prices/sluice/demo",
                {"input": 1e300, "output": 1},
            ),
        }
        answers = {name: await admin(gw, *case) for name, case in cases.items()}
        assert await gw.gateway.store.reconcile() == []
    for name, resp in answers.items():
        assert resp.status == 400, (name, resp.body)
        assert resp.json()["error"]["type"] == "invalid_request_error"
    for name, param in (
        ("short-prefix", "prefix"),
        ("account-name", "name"),
        ("long-name", "name"),
    ):
        assert answers[name].json()["error"]["param"] == param, answers[name].body


async def test_an_accounts_keys_are_listed_a_page_at_a_time(tmp_path: Path) -> None:
    async with running_gateway(tmp_path, env=ENV) as gw:
        await admin(gw, "POST", "/admin/accounts", {"name": "team"})
        made = [(await admin(gw, "POST", "/admin/accounts/team/keys")).json() for _ in range(5)]
        pages, cursor = [], ""
        while True:
            page = (await admin(gw, "GET", f"/admin/accounts/team/keys?limit=2{cursor}")).json()
            pages.append([k["id"] for k in page["data"]])
            if not page["has_more"]:
                break
            cursor = f"&cursor={page['next_cursor']}"
        huge = await admin(
            gw, "GET", "/admin/accounts/team/keys?cursor=WzkyMjMzNzIwMzY4NTQ3NzU4MDgsIngiXQ"
        )
        assert huge.status == 400 and huge.json()["error"]["code"] == "invalid_cursor"
        bad = await admin(gw, "GET", "/admin/accounts/team/keys?cursor=abc")
    listed = [key_id for page in pages for key_id in page]
    assert [len(p) for p in pages] == [2, 2, 1]
    assert sorted(listed) == sorted(k["id"] for k in made) and len(set(listed)) == 5
    assert bad.status == 400 and bad.json()["error"]["code"] == "invalid_cursor"


async def test_the_access_log_says_the_status_an_admin_call_answered(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "sluice.access")
    async with running_gateway(tmp_path, env=ENV) as gw:
        made = await admin(gw, "POST", "/admin/accounts", {"name": "team"})
        again = await admin(gw, "POST", "/admin/accounts", {"name": "team"})
    lines = [r.getMessage() for r in caplog.records if r.name == "sluice.access"]
    assert (made.status, again.status) == (201, 409)
    assert [line.split()[1:4] for line in lines] == [
        ["POST", "/admin/accounts", "201"],
        ["POST", "/admin/accounts", "409"],
    ]


@pytest.mark.parametrize(
    ("method", "path", "status", "allowed"),
    [
        ("GET", "/admin/accounts/team/bogus", 404, None),  # once a 405
        ("GET", "/admin/keys/x/y/z", 404, None),
        ("GET", "/admin/accounts/team/keys/", 404, None),
        ("GET", "/admin/nothing", 404, None),
        ("DELETE", "/admin/accounts/team", 405, "GET, PATCH"),
        ("GET", "/admin/keys/revoke", 405, "POST"),
        ("POST", "/admin/accounts/team/connections", 405, "GET"),
        ("GET", "/admin/accounts/team/prices/openai/gpt-4o", 405, "PUT, DELETE"),
    ],
)
async def test_an_unknown_admin_path_is_404_and_a_known_one_names_its_methods(
    tmp_path: Path, method: str, path: str, status: int, allowed: str | None
) -> None:
    async with running_gateway(tmp_path, env=ENV) as gw:
        await admin(gw, "POST", "/admin/accounts", {"name": "team"})
        answer = await admin(gw, method, path)
    assert answer.status == status, answer.body
    if allowed is not None:
        assert answer.json()["error"]["message"].endswith(f"use {allowed}.")
