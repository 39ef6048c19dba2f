"""``GET /v1/requests`` and ``GET /admin/requests`` read at most 10,000 rows a page
(issue 20): a page its filters leave short says ``has_more`` with a cursor after the
last row read, and paging on finds every row. SQLite and PostgreSQL."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import AsyncIterator
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest

from sluice.server.lifecycle import RunningGateway
from sluice.storage.base import RequestRecord
from tests.support.accounts import metered_key
from tests.support.databases import fresh_postgres
from tests.support.gateway import running_gateway
from tests.support.raw_http import exchange

ADMIN = "admin-" + "b" * 40
BOUND = 10_000
"""Rows one page reads at most (docs/api.md, "Listing bounds")."""
BUSY = BOUND + 10
"""The account's errors served by openai, newer than its three served by anthropic."""
START = int(time.time()) - 20_000  # recent: well inside the request log's retention


def record(n: int, provider: str) -> RequestRecord:
    return RequestRecord(
        id=f"req_{n:06d}",
        account_id="acct_a",
        key_id="key_a",
        created_at=START + n,
        provider=provider,
        status="error",
    )


@pytest.fixture(params=["sqlite", "postgres"])
async def gateway(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[RunningGateway, str]]:
    async with (
        fresh_postgres() if request.param == "postgres" else nullcontext("") as dsn,
        running_gateway(
            tmp_path,
            f'[storage]\nurl = "{dsn}"\n' if dsn else "",
            env={"SLUICE_ADMIN_KEY": ADMIN},
        ) as gw,
    ):
        key = await metered_key(gw.gateway.store, "a", 10**9)
        rare = [record(n, "anthropic") for n in range(3)]
        await gw.gateway.store.write_requests(
            rare + [record(n, "openai") for n in range(3, 3 + BUSY)]
        )
        yield gw, key


async def page(gw: RunningGateway, target: str, token: str) -> dict[str, Any]:
    request = f"GET {target} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n"
    answer = await exchange(gw.host, gw.port, request.encode())
    assert answer.status == 200, answer.body
    doc: dict[str, Any] = answer.json()
    return doc


@pytest.mark.parametrize("path", ["/v1/requests", "/admin/requests"])
async def test_a_page_short_of_its_bound_says_where_to_resume(
    gateway: tuple[RunningGateway, str], path: str
) -> None:
    gw, key = gateway
    token = key if path == "/v1/requests" else ADMIN
    query = f"{path}?status=error&provider=anthropic&limit=10"
    first = await page(gw, query, token)
    assert first["data"] == [] and first["has_more"] is True
    padded = first["next_cursor"] + "=" * (-len(first["next_cursor"]) % 4)
    position = json.loads(base64.urlsafe_b64decode(padded))
    oldest_read = 3 + BUSY - BOUND  # the 10,000 newest, newest first
    assert position == [START + oldest_read, f"req_{oldest_read:06d}"]
    second = await page(gw, f"{query}&cursor={first['next_cursor']}", token)
    assert [r["id"] for r in second["data"]] == ["req_000002", "req_000001", "req_000000"]
    assert second["has_more"] is False and second["next_cursor"] is None


async def test_a_filter_its_index_serves_fills_its_pages(
    gateway: tuple[RunningGateway, str],
) -> None:
    gw, key = gateway
    first = await page(gw, "/v1/requests?provider=anthropic&limit=2", key)
    assert [r["id"] for r in first["data"]] == ["req_000002", "req_000001"]
    rest = await page(gw, f"/v1/requests?provider=anthropic&cursor={first['next_cursor']}", key)
    assert [r["id"] for r in rest["data"]] == ["req_000000"] and rest["has_more"] is False
