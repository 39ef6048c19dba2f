"""``GET /admin/accounts`` (cursor pagination) and ``GET /admin/accounts/{name}``, on
SQLite and on PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from sluice.server.lifecycle import RunningGateway
from tests.support.databases import fresh_postgres
from tests.support.gateway import running_gateway
from tests.support.raw_http import RawResponse, exchange

ADMIN = "admin-" + "y" * 40
ENV = {"SLUICE_ADMIN_KEY": ADMIN}


@pytest.fixture(params=["sqlite", "postgres"])
async def gateway(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[RunningGateway]:
    """A gateway with the admin API on, over each backend."""
    if request.param == "sqlite":
        async with running_gateway(tmp_path, env=ENV) as gw:
            yield gw
        return
    async with (
        fresh_postgres() as dsn,
        running_gateway(
            tmp_path, f'[server]\nport = 0\ndev_key = true\n[storage]\nurl = "{dsn}"\n', env=ENV
        ) as gw,
    ):
        yield gw


async def get(gw: RunningGateway, target: str, token: str | None = ADMIN) -> RawResponse:
    auth = "" if token is None else f"Authorization: Bearer {token}\r\n"
    request = f"GET {target} HTTP/1.1\r\nHost: x\r\n{auth}Content-Length: 0\r\n\r\n"
    return await exchange(gw.host, gw.port, request.encode())


async def test_pages_of_120_accounts_list_each_once_in_order(gateway: RunningGateway) -> None:
    store = gateway.gateway.store
    for n in range(120):
        await store.create_account(f"acct_t{n:03d}", f"team-{n}", metered=True, credits=n, now=n)
    pages: list[list[dict[str, Any]]] = []
    cursor: str | None = None
    while True:
        query = "?limit=50" + (f"&cursor={cursor}" if cursor else "")
        resp = await get(gateway, "/admin/accounts" + query)
        assert resp.status == 200, resp.body
        doc = resp.json()
        pages.append(doc["data"])
        cursor = doc["next_cursor"]
        assert doc["has_more"] is (cursor is not None)
        if cursor is None:
            break
    everything = (await get(gateway, "/admin/accounts?limit=500")).json()
    ids = [a["id"] for page in pages for a in page]
    assert [len(p) for p in pages] == [50, 50, 21]  # 120 and the development account
    assert len(set(ids)) == len(ids) == 121
    assert ids == [a["id"] for a in everything["data"]] and everything["next_cursor"] is None
    assert ids == sorted(ids)  # account-id order (the test databases collate bytewise)
    team_7 = next(a for page in pages for a in page if a["name"] == "team-7")
    assert (team_7["id"], team_7["balance"], team_7["metered"]) == ("acct_t007", 7e-9, True)


async def test_the_default_page_is_50_and_a_cursor_resumes_after_it(
    gateway: RunningGateway,
) -> None:
    store = gateway.gateway.store
    for n in range(60):
        await store.create_account(f"acct_d{n:02d}", f"d-{n}", metered=True, credits=0, now=n)
    first = (await get(gateway, "/admin/accounts")).json()
    rest = (await get(gateway, f"/admin/accounts?cursor={first['next_cursor']}")).json()
    assert (len(first["data"]), first["has_more"], first["object"]) == (50, True, "list")
    assert (len(rest["data"]), rest["has_more"], rest["next_cursor"]) == (11, False, None)
    assert first["data"][-1]["id"] < rest["data"][0]["id"]


async def test_bad_cursors_limits_and_parameters_are_400(gateway: RunningGateway) -> None:
    cases = {
        "?cursor=bm9wZQ": "invalid_cursor",
        "?cursor=": "invalid_cursor",
        "?limit=0": "invalid_limit",
        "?limit=501": "invalid_limit",
        "?limit=ten": "invalid_limit",
    }
    for query, code in cases.items():
        resp = await get(gateway, "/admin/accounts" + query)
        assert resp.status == 400, query
        assert resp.json()["error"]["code"] == code, query
    unknown = await get(gateway, "/admin/accounts?offset=5")
    assert unknown.status == 400 and unknown.json()["error"]["param"] == "offset"


async def test_listing_needs_the_admin_key(gateway: RunningGateway) -> None:
    missing = await get(gateway, "/admin/accounts", token=None)
    wrong = await get(gateway, "/admin/accounts", token="nope" * 10)
    assert gateway.dev_key is not None
    api_key = await get(gateway, "/admin/accounts", token=gateway.dev_key.key)
    for resp in (missing, wrong, api_key):
        assert resp.status == 401 and resp.json()["error"]["code"] == "invalid_admin_key"
        assert b"acct_" not in resp.body


async def test_show_one_account_by_name(gateway: RunningGateway) -> None:
    await gateway.gateway.store.create_account(
        "acct_s1", "shown", metered=True, credits=10**9, now=1
    )
    shown = await get(gateway, "/admin/accounts/shown")
    missing = await get(gateway, "/admin/accounts/nobody")
    assert shown.status == 200
    assert {k: shown.json()[k] for k in ("id", "name", "balance", "available")} == {
        "id": "acct_s1",
        "name": "shown",
        "balance": 1.0,
        "available": 1.0,
    }
    assert missing.status == 404 and missing.json()["error"]["code"] == "account_not_found"
