"""Calls refused before their body is read, and refusals in the request log: counted
against the request limit at once, coalesced per key instead of one row each, what a
client sent stored bounded."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from sluice.core.principal import KeyPolicy
from sluice.exchange.record import MAX_CLIENT_TEXT
from tests.server.test_admin import ADMIN, ENV
from tests.support.accounts import metered_key
from tests.support.fake_openai import completion
from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.gateway import openai_connection_toml, running_gateway
from tests.support.raw_http import RawClient, exchange, get, post

CHAT = json.dumps({"model": "test/gpt-fake", "messages": [{"role": "user", "content": "hi"}]})
NOT_JSON = b'{"model": "test/gpt-fake", "messages": [ this is not JSON'


async def _rows(host: str, port: int, account: str) -> list[dict[str, Any]]:
    listing = await exchange(host, port, get(f"/admin/requests?account={account}", ADMIN))
    assert listing.status == 200, listing.body
    rows: list[dict[str, Any]] = listing.json()["data"]
    return rows


def _refusals(metrics: str, reason: str) -> float:
    for family in text_string_to_metric_families(metrics):
        for sample in family.samples:
            if sample.name == "sluice_refusals_total" and sample.labels == {"reason": reason}:
                return float(sample.value)
    return 0.0


async def test_refusals_past_the_limit_share_one_row_that_counts_them(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    """Found by an attacker's pass: a key limited to 10 a minute wrote ~3,400 rows a
    second, one per 429."""
    fake.default = Reply.json(completion("ok"))
    config = openai_connection_toml(fake.base_url)
    async with running_gateway(tmp_path, config, env=ENV) as gw:
        key = await metered_key(gw.gateway.store, "team", 10**9, KeyPolicy(rpm=1))
        served = await exchange(gw.host, gw.port, post("/v1/chat/completions", CHAT.encode(), key))
        refused = [
            await exchange(gw.host, gw.port, post("/v1/chat/completions", CHAT.encode(), key))
            for _ in range(30)
        ]
        await asyncio.sleep(1.3)  # the window's row is written again with its count
        await gw.gateway.writer.flush()
        rows = await _rows(gw.host, gw.port, "team")
        metrics = (await exchange(gw.host, gw.port, get("/metrics", ADMIN))).body.decode()
    assert served.status == 200
    assert {r.status for r in refused} == {429}
    assert len(rows) == 2, [(r["status"], r["http_status"]) for r in rows]
    row = next(r for r in rows if r["http_status"] == 429)
    assert row["error_code"] == "rate_limit_exceeded" and row["coalesced"] == 29
    assert row["id"] == refused[0].headers["x-request-id"]
    assert _refusals(metrics, "rate_limit") == 30


async def test_a_call_past_its_limit_is_refused_before_its_body_is_read(tmp_path: Path) -> None:
    """Found by an attacker's pass: a large body was decoded before the rate limit."""
    async with running_gateway(tmp_path) as gw:
        key = await metered_key(gw.gateway.store, "team", 10**9, KeyPolicy(rpm=1))
        first = await exchange(gw.host, gw.port, post("/v1/chat/completions", NOT_JSON, key))
        second = await exchange(gw.host, gw.port, post("/v1/chat/completions", NOT_JSON, key))
    assert first.status == 400  # read: the body is not JSON
    assert second.status == 429  # never read: the key had no room left
    assert second.json()["error"]["code"] == "rate_limit_exceeded"


async def test_an_empty_account_is_refused_before_its_body_is_read(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    """Found by an attacker's pass: a $0 account's large bodies were decoded, then 402."""
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url), env=ENV) as gw:
        key = await metered_key(gw.gateway.store, "broke", 0)
        first = await exchange(gw.host, gw.port, post("/v1/chat/completions", CHAT.encode(), key))
        second = await exchange(gw.host, gw.port, post("/v1/chat/completions", NOT_JSON, key))
        credit = json.dumps({"amount": "1"}).encode()
        topped = await exchange(
            gw.host, gw.port, post("/admin/accounts/broke/credits", credit, ADMIN)
        )
        fake.default = Reply.json(completion("ok"))
        third = await exchange(gw.host, gw.port, post("/v1/chat/completions", CHAT.encode(), key))
    assert (first.status, second.status, topped.status, third.status) == (402, 402, 200, 200)
    assert second.json()["error"]["code"] == "insufficient_credits"
    assert len(fake.requests) == 1


async def test_every_endpoint_a_key_calls_counts_against_its_request_limit(
    tmp_path: Path,
) -> None:
    async with running_gateway(tmp_path) as gw:
        key = await metered_key(gw.gateway.store, "team", 10**9, KeyPolicy(rpm=3))
        answers = [
            await exchange(gw.host, gw.port, get(path, key))
            for path in ("/v1/models", "/v1/requests", "/v1/spend?by=model", "/v1/requests/req_x")
        ]
    assert [a.status for a in answers] == [200, 200, 200, 429]
    assert answers[0].headers["x-ratelimit-remaining-requests"] == "2"


async def test_what_a_client_sent_is_stored_bounded(tmp_path: Path) -> None:
    """Found by an attacker's pass: `requested_model` was stored as sent, up to 512
    characters, in every refused request's row."""
    long_name = "x" * 512
    body = json.dumps({"model": long_name, "messages": [{"role": "user", "content": "hi"}]})
    async with running_gateway(tmp_path, env=ENV) as gw:
        key = await metered_key(gw.gateway.store, "team", 10**9)
        answer = await exchange(gw.host, gw.port, post("/v1/chat/completions", body.encode(), key))
        await gw.gateway.writer.flush()
        (row,) = await _rows(gw.host, gw.port, "team")
    assert answer.status == 404
    assert len(row["requested_model"]) == MAX_CLIENT_TEXT
    assert row["requested_model"] == long_name[: MAX_CLIENT_TEXT - 1] + "…"
    assert len(row["error_message"]) <= 4 * MAX_CLIENT_TEXT


async def test_a_key_that_keeps_being_refused_is_answered_more_slowly(tmp_path: Path) -> None:
    """Found by the noisy-neighbour suite: 8 connections of a key past its limit sent
    ~14,000 refused requests a second and took the bystander's p50 from 1.6 to 7.8 ms."""
    async with running_gateway(tmp_path) as gw:
        key = await metered_key(gw.gateway.store, "team", 10**9, KeyPolicy(rpm=1))
        client = await RawClient.connect(gw.host, gw.port)
        request = post("/v1/chat/completions", NOT_JSON, key)
        took = []
        for _ in range(25):
            started = time.monotonic()
            await client.send(request)
            answer = await client.read_response()
            took.append(time.monotonic() - started)
        await client.close()
    assert answer.status == 429
    assert max(took[:20]) < 0.5  # its burst: at full speed
    assert max(took[20:]) >= 0.9  # then held


def _large_chat(size: int = 2 * 1024 * 1024) -> bytes:
    return json.dumps(
        {"model": "test/gpt-fake", "messages": [{"role": "user", "content": "x" * size}]}
    ).encode()


async def test_a_large_body_from_a_key_held_by_the_tarpit_is_refused_before_it_is_read(
    tmp_path: Path,
) -> None:
    async with running_gateway(tmp_path) as gw:
        key = await metered_key(gw.gateway.store, "team", 10**9, KeyPolicy(rpm=1))
        client = await RawClient.connect(gw.host, gw.port)
        request = post("/v1/chat/completions", NOT_JSON, key)
        while not gw.gateway.services.tarpit.holding("key_team"):
            await client.send(request)
            await client.read_response()
        await client.close()
        started = time.monotonic()
        refused = await exchange(gw.host, gw.port, post("/v1/chat/completions", _large_chat(), key))
        took = time.monotonic() - started
    assert refused.status == 429 and refused.headers["connection"] == "close"
    assert refused.json()["error"]["code"] == "rate_limit_exceeded"
    assert took < 0.5  # answered on its head, not held like a refusal it had read


async def test_a_large_body_of_an_empty_account_is_refused_before_it_is_read(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        key = await metered_key(gw.gateway.store, "broke", 0)
        first = await exchange(gw.host, gw.port, post("/v1/chat/completions", CHAT.encode(), key))
        large = await exchange(gw.host, gw.port, post("/v1/chat/completions", _large_chat(), key))
    assert first.status == 402
    assert large.status == 402 and large.headers["connection"] == "close"  # on its head
    assert large.json()["error"]["code"] == "insufficient_credits"
