"""``GET /v1/requests`` (an API key: its own account only) and ``GET /admin/requests``
(every account), on SQLite and on PostgreSQL."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import AsyncIterator
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest

from sluice.server.lifecycle import RunningGateway
from sluice.server.request_list import CSV_COLUMNS, csv_cell
from sluice.storage.base import RequestRecord
from tests.support.accounts import metered_key
from tests.support.databases import fresh_postgres
from tests.support.gateway import running_gateway
from tests.support.raw_http import RawResponse, exchange

ADMIN = "admin-" + "z" * 40
ENV = {"SLUICE_ADMIN_KEY": ADMIN}


class Tenants:
    def __init__(self, gw: RunningGateway, key_a: str, key_b: str) -> None:
        self.gw, self.key_a, self.key_b = gw, key_a, key_b


def record(n: int, account: str) -> RequestRecord:
    return RequestRecord(
        id=f"req_{account[-1]}{n:05d}",
        account_id=account,
        key_id=f"key_{account[-1]}",
        created_at=5000 + n // 4,
        requested_model="test/big" if n % 5 == 0 else "test/small",
        served_model="test/served",
        provider="anthropic" if n % 3 == 0 else "openai",
        status="error" if n % 7 == 0 else "complete",
        http_status=200,
        error_code="=cmd" if n == 1 else None,
    )


@pytest.fixture(params=["sqlite", "postgres"])
async def tenants(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Tenants]:
    """Accounts ``a`` (150 logged requests) and ``b`` (40), each with a key."""
    async with (
        fresh_postgres() if request.param == "postgres" else nullcontext("") as dsn,
        running_gateway(tmp_path, f'[storage]\nurl = "{dsn}"\n' if dsn else "", env=ENV) as gw,
    ):
        store = gw.gateway.store
        key_a = await metered_key(store, "a", 10**9)
        key_b = await metered_key(store, "b", 10**9)
        for n in range(150):
            gw.gateway.writer.log(record(n, "acct_a"))  # still queued: a listing flushes
        for n in range(40):
            gw.gateway.writer.log(record(n, "acct_b"))
        yield Tenants(gw, key_a, key_b)


async def get(gw: RunningGateway, target: str, token: str | None) -> RawResponse:
    auth = "" if token is None else f"Authorization: Bearer {token}\r\n"
    request = f"GET {target} HTTP/1.1\r\nHost: x\r\n{auth}Content-Length: 0\r\n\r\n"
    return await exchange(gw.host, gw.port, request.encode())


def expected(account: str, keep: Any = lambda r: True) -> list[str]:
    count = 150 if account == "acct_a" else 40
    rows = [r for r in (record(n, account) for n in range(count)) if keep(r)]
    return [r.id for r in sorted(rows, key=lambda r: (r.created_at, r.id), reverse=True)]


async def every_page(gw: RunningGateway, path: str, query: str, token: str) -> list[str]:
    ids: list[str] = []
    cursor: str | None = None
    while True:
        resp = await get(gw, f"{path}?{query}" + (f"&cursor={cursor}" if cursor else ""), token)
        assert resp.status == 200, resp.body
        doc = resp.json()
        assert doc["object"] == "list" and doc["has_more"] is (doc["next_cursor"] is not None)
        ids += [row["id"] for row in doc["data"]]
        cursor = doc["next_cursor"]
        if cursor is None:
            return ids


async def test_pages_of_150_requests_list_each_once_newest_first(tenants: Tenants) -> None:
    ids = await every_page(tenants.gw, "/v1/requests", "limit=40", tenants.key_a)
    assert ids == expected("acct_a") and len(set(ids)) == 150
    default = (await get(tenants.gw, "/v1/requests", tenants.key_a)).json()
    assert len(default["data"]) == 50 and default["has_more"] is True


FILTERS = [
    ("status=error", lambda r: r.status == "error"),
    ("model=test/big", lambda r: r.requested_model == "test/big"),
    ("model=test/served", lambda r: True),
    ("provider=anthropic", lambda r: r.provider == "anthropic"),
    ("key=key_a", lambda r: r.key_id == "key_a"),
    ("key=key_b", lambda r: r.key_id == "key_b"),
    ("since=5010", lambda r: r.created_at >= 5010),
    ("until=5010", lambda r: r.created_at < 5010),
    (
        "since=5002&until=5030&status=complete",
        lambda r: 5002 <= r.created_at < 5030 and r.status == "complete",
    ),
]


@pytest.mark.parametrize(("query", "keep"), FILTERS, ids=[q for q, _ in FILTERS])
async def test_an_api_key_sees_only_its_accounts_rows_under_every_filter(
    tenants: Tenants, query: str, keep: Any
) -> None:
    for key, account in ((tenants.key_a, "acct_a"), (tenants.key_b, "acct_b")):
        ids = await every_page(tenants.gw, "/v1/requests", f"limit=7&{query}", key)
        assert ids == expected(account, keep), (account, query)


async def test_a_cursor_from_another_account_only_pages_the_callers_rows(
    tenants: Tenants,
) -> None:
    first = (await get(tenants.gw, "/v1/requests?limit=3", tenants.key_a)).json()
    resumed = await get(tenants.gw, f"/v1/requests?cursor={first['next_cursor']}", tenants.key_b)
    rows = resumed.json()["data"]
    assert rows and {row["account_id"] for row in rows} == {"acct_b"}
    forced = await get(tenants.gw, "/v1/requests?account=a", tenants.key_b)
    assert forced.status == 400 and forced.json()["error"]["param"] == "account"


async def test_admin_sees_every_account_and_filters_by_account(tenants: Tenants) -> None:
    everyone = await every_page(tenants.gw, "/admin/requests", "limit=500", ADMIN)
    assert sorted(everyone) == sorted(expected("acct_a") + expected("acct_b"))
    only_b = await every_page(tenants.gw, "/admin/requests", "account=b&status=complete", ADMIN)
    assert only_b == expected("acct_b", lambda r: r.status == "complete")
    missing = await get(tenants.gw, "/admin/requests?account=nobody", ADMIN)
    assert missing.status == 404 and missing.json()["error"]["code"] == "account_not_found"
    api_key = await get(tenants.gw, "/admin/requests", tenants.key_a)
    assert api_key.status == 401 and b"req_" not in api_key.body


async def test_csv_and_jsonl_exports_carry_the_page_and_its_cursor(tenants: Tenants) -> None:
    resp = await get(tenants.gw, "/v1/requests?format=csv&limit=150&until=5001", tenants.key_a)
    assert resp.status == 200 and resp.headers["content-type"] == "text/csv; charset=utf-8"
    rows = list(csv.reader(io.StringIO(resp.body.decode())))
    assert tuple(rows[0]) == CSV_COLUMNS
    assert [row[0] for row in rows[1:]] == expected("acct_a", lambda r: r.created_at < 5001)
    one = dict(zip(CSV_COLUMNS, rows[-2], strict=True))  # req_a00001, newest first
    assert (one["id"], one["stream"], one["error_code"], one["ttft_ms"]) == (
        "req_a00001",
        "false",
        "'=cmd",  # a spreadsheet formula, defused
        "",
    )
    assert "x-next-cursor" not in resp.headers
    lines = await get(tenants.gw, "/admin/requests?format=jsonl&limit=5", ADMIN)
    assert lines.headers["content-type"] == "application/x-ndjson"
    docs = [json.loads(line) for line in lines.body.decode().splitlines()]
    assert len(docs) == 5 and docs[0]["id"] == "req_a00149"
    by_id = await get(tenants.gw, "/v1/requests/req_a00149", tenants.key_a)
    assert docs[0] == by_id.json()
    rest = await get(tenants.gw, f"/admin/requests?cursor={lines.headers['x-next-cursor']}", ADMIN)
    assert rest.json()["data"][0]["id"] == "req_a00144"


@pytest.mark.parametrize(
    ("query", "code", "param"),
    [
        ("limit=0", "invalid_limit", "limit"),
        ("limit=501", "invalid_limit", "limit"),
        ("cursor=bm9wZQ", "invalid_cursor", "cursor"),
        ("cursor=WzEsMiwzXQ", "invalid_cursor", "cursor"),  # [1,2,3]
        (
            "cursor=WzkyMjMzNzIwMzY4NTQ3NzU4MDgsIngiXQ",
            "invalid_cursor",
            "cursor",
        ),  # [2**63,"x"]: once a 500
        ("cursor=Wy0xLCJ4Il0", "invalid_cursor", "cursor"),  # [-1,"x"]
        ("offset=4", None, "offset"),
        ("since=yesterday", None, "since"),
        ("until=-5", None, "until"),
        ("status=", None, "status"),
        ("status=ok", "invalid_status", "status"),
        ("format=xml", "invalid_format", "format"),
    ],
)
async def test_malformed_parameters_are_400(
    tenants: Tenants, query: str, code: str | None, param: str
) -> None:
    for path, token in (("/v1/requests", tenants.key_a), ("/admin/requests", ADMIN)):
        resp = await get(tenants.gw, f"{path}?{query}", token)
        assert resp.status == 400, (path, query)
        error = resp.json()["error"]
        assert error["param"] == param and (code is None or error["code"] == code)


@pytest.mark.parametrize(
    ("value", "cell"),
    [
        ("-2+3", "'-2+3"),  # a model or label a spreadsheet would compute: once let through
        ("=cmd", "'=cmd"),
        ("+1", "'+1"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tx", "'\tx"),
        ("plain", "plain"),
        (-5, "-5"),  # numbers stay numbers
        (-0.25, "-0.25"),
        (True, "true"),
        (None, ""),
    ],
)
def test_a_csv_cell_defuses_formulas_and_keeps_numbers(value: object, cell: str) -> None:
    assert csv_cell(value) == cell
