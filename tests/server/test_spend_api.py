"""``GET /v1/spend`` (an API key: its own account only) and ``GET /admin/spend`` (every
account), on SQLite and on PostgreSQL, after real metered requests: totals equal the
ledger to the nano-dollar, the served model and provider are what the report groups."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import AsyncIterator
from contextlib import nullcontext
from datetime import UTC, datetime
from pathlib import Path

import pytest

from sluice.core.usage import Price, TokenUsage
from sluice.metering.charges import nano_from_pico
from sluice.metering.pricing import cost_pico
from sluice.server.lifecycle import RunningGateway
from tests.support.accounts import metered_key
from tests.support.databases import fresh_postgres
from tests.support.fake_openai import completion
from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.gateway import openai_connection_toml, running_gateway
from tests.support.raw_http import RawResponse, exchange, get, post

USD = 10**9
ADMIN = "admin-" + "s" * 40
PRICE = Price.per_million(2.0, 8.0, cache_read=0.5)  # test/gpt-fake
SPENDS = {"a": [(1000, 500), (3000, 7), (11, 13)], "b": [(400, 400), (9, 1)]}


def charge(prompt: int, completion_tokens: int) -> int:
    usage = TokenUsage(prompt_tokens=prompt, completion_tokens=completion_tokens)
    return nano_from_pico(cost_pico(usage, PRICE))


class Billed:
    def __init__(self, gw: RunningGateway, keys: dict[str, str]) -> None:
        self.gw, self.keys = gw, keys

    async def get(self, target: str, token: str | None) -> RawResponse:
        return await exchange(self.gw.host, self.gw.port, get(target, token))


@pytest.fixture(params=["sqlite", "postgres"])
async def billed(
    request: pytest.FixtureRequest, tmp_path: Path, fake: FakeUpstream
) -> AsyncIterator[Billed]:
    """Accounts ``a`` and ``b``, each charged for the requests of :data:`SPENDS`."""
    async with fresh_postgres() if request.param == "postgres" else nullcontext("") as dsn:
        storage = f'[storage]\nurl = "{dsn}"\n' if dsn else ""
        config = storage + openai_connection_toml(fake.base_url)
        env = {"SLUICE_ADMIN_KEY": ADMIN}
        async with running_gateway(tmp_path, config, env=env) as gw:
            keys = {name: await metered_key(gw.gateway.store, name, USD) for name in SPENDS}
            for name, spends in SPENDS.items():
                for prompt, completion_tokens in spends:
                    usage = {"prompt_tokens": prompt, "completion_tokens": completion_tokens}
                    fake.queue(Reply.json(completion("ok", usage=usage)))
                    payload = {
                        "model": "test/gpt-fake",
                        "messages": [{"role": "user", "content": "hi"}],
                        "max_tokens": 1000,
                    }
                    sent = post("/v1/chat/completions", json.dumps(payload).encode(), keys[name])
                    assert (await exchange(gw.host, gw.port, sent)).status == 200
            yield Billed(gw, keys)


def spent(name: str) -> int:
    return sum(charge(p, c) for p, c in SPENDS[name])


async def test_an_api_keys_report_is_its_own_accounts_and_adds_up_to_the_ledger(
    billed: Billed,
) -> None:
    for name, spends in SPENDS.items():
        doc = (await billed.get("/v1/spend?by=model", billed.keys[name])).json()
        account = await billed.gw.gateway.store.get_account(name)
        assert account is not None
        assert doc["object"] == "spend_report" and doc["by"] == "model"
        assert doc["data"] == [
            {
                "model": "test/gpt-fake",
                "requests": len(spends),
                "spend": spent(name) / USD,
                "spend_nano": spent(name),
            }
        ]
        assert doc["total"]["spend_nano"] == spent(name) == USD - account.balance
    assert await billed.gw.gateway.store.reconcile() == []


async def test_every_grouping_names_what_served_and_when(billed: Billed) -> None:
    key = billed.keys["a"]
    by_key = (await billed.get("/v1/spend?by=key", key)).json()["data"]
    assert [(g["key"], g["prefix"][:10], g["requests"]) for g in by_key] == [
        ("key_a", "sk-sluice-", 3)
    ]
    assert key.startswith(by_key[0]["prefix"])
    by_provider = (await billed.get("/v1/spend?by=provider", key)).json()["data"]
    assert [(g["provider"], g["spend_nano"]) for g in by_provider] == [
        ("openai-compatible", spent("a"))
    ]
    by_day = (await billed.get("/v1/spend?by=day", key)).json()["data"]
    today = datetime.fromtimestamp(billed.gw.gateway.wall_clock(), UTC).strftime("%Y-%m-%d")
    assert [(g["day"], g["spend_nano"]) for g in by_day] == [(today, spent("a"))]


async def test_an_api_key_never_reads_another_accounts_spend(billed: Billed) -> None:
    key_b = billed.keys["b"]
    refused = await billed.get("/v1/spend?by=key&account=a", key_b)
    assert refused.status == 400 and refused.json()["error"]["param"] == "account"
    borrowed = (await billed.get("/v1/spend?by=key&key=key_a", key_b)).json()
    assert borrowed["data"] == [] and borrowed["total"]["spend_nano"] == 0
    for path in ("/admin/spend?by=key", "/admin/spend?by=key&account=a"):
        assert (await billed.get(path, key_b)).status == 401
    assert (await billed.get("/v1/spend?by=key", None)).status == 401
    export = await billed.get("/v1/spend?by=key&format=csv", key_b)
    assert "key_a" not in export.body.decode()


async def test_the_admin_report_spans_accounts_or_picks_one(billed: Billed) -> None:
    both = (await billed.get("/admin/spend?by=key", ADMIN)).json()
    assert [(g["key"], g["spend_nano"]) for g in both["data"]] == [
        ("key_a", spent("a")),
        ("key_b", spent("b")),
    ]
    assert both["total"] == {
        "requests": 5,
        "spend": (spent("a") + spent("b")) / USD,
        "spend_nano": spent("a") + spent("b"),
    }
    one = (await billed.get("/admin/spend?by=model&account=b", ADMIN)).json()
    assert one["total"]["spend_nano"] == spent("b")
    missing = await billed.get("/admin/spend?by=model&account=nobody", ADMIN)
    assert missing.status == 404 and missing.json()["error"]["code"] == "account_not_found"


async def test_pages_resume_with_a_cursor_and_keep_the_whole_total(billed: Billed) -> None:
    first = (await billed.get("/admin/spend?by=key&limit=1", ADMIN)).json()
    assert first["has_more"] and [g["key"] for g in first["data"]] == ["key_a"]
    cursor = first["next_cursor"]
    second = (await billed.get(f"/admin/spend?by=key&limit=1&cursor={cursor}", ADMIN)).json()
    assert [g["key"] for g in second["data"]] == ["key_b"] and not second["has_more"]
    assert first["total"] == second["total"]
    wrong = await billed.get(f"/admin/spend?by=model&cursor={cursor}", ADMIN)
    assert wrong.status == 400 and wrong.json()["error"]["code"] == "invalid_cursor"
    for forged in ("WyJkYXkiLDkyMjMzNzIwMzY4NTQ3NzU4MDhd", "WyJkYXkiLCJhYmMiXQ", "WyJtb2RlbCIsMV0"):
        refused = await billed.get(f"/v1/spend?by=day&cursor={forged}", billed.keys["a"])
        assert refused.status == 400, refused.body  # [day, 2**63] was a 500
        assert refused.json()["error"]["code"] == "invalid_cursor"


async def test_csv_and_jsonl_export_the_groups(billed: Billed) -> None:
    resp = await billed.get("/admin/spend?by=key&format=csv", ADMIN)
    assert resp.headers["content-type"].startswith("text/csv")
    assert resp.headers["x-total-spend-nano"] == str(spent("a") + spent("b"))
    rows = list(csv.DictReader(io.StringIO(resp.body.decode())))
    assert [(r["key"], int(r["spend_nano"])) for r in rows] == [
        ("key_a", spent("a")),
        ("key_b", spent("b")),
    ]
    lines = (await billed.get("/admin/spend?by=model&format=jsonl", ADMIN)).body.splitlines()
    assert [json.loads(line)["spend_nano"] for line in lines] == [spent("a") + spent("b")]


@pytest.mark.parametrize(
    ("query", "param"),
    [
        ("", "by"),
        ("by=team", "by"),
        ("by=key&since=yesterday", "since"),
        ("by=day&limit=0", "limit"),
    ],
)
async def test_a_malformed_report_query_names_its_parameter(
    billed: Billed, query: str, param: str
) -> None:
    resp = await billed.get(f"/admin/spend?{query}", ADMIN)
    assert resp.status == 400 and resp.json()["error"]["param"] == param
