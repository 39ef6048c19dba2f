"""Rows about money: racing for the last credits, and upstreams that try to mint them."""

from __future__ import annotations

import asyncio
import json
import random
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg

from bench.resilience.harness import Context, Gateway, Row, gateway, row
from sluice.core.tokens import prompt_token_ceiling
from sluice.core.usage import Price, TokenUsage
from sluice.frontdoors.chat import decode_chat_request
from sluice.metering.charges import nano_from_pico
from sluice.metering.pricing import cost_pico
from sluice.storage.base import Store
from sluice.storage.factory import open_store
from tests.support.accounts import metered_key
from tests.support.fake_openai import DONE, completion, text_stream
from tests.support.fake_upstream import FakeUpstream, Reply, WaitFor
from tests.support.gateway import UPSTREAM_KEY, openai_connection_toml
from tests.support.raw_http import RawClient, exchange, post

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
PRICE = Price.per_million(2.0, 8.0, cache_read=0.5)  # test/gpt-fake's price
MAX_TOKENS = 200
BODY = json.dumps(
    {
        "model": "test/gpt-fake",
        "stream": True,
        "max_tokens": MAX_TOKENS,
        "messages": [{"role": "user", "content": "the last credits"}],
    }
).encode()
HOLD = nano_from_pico(
    cost_pico(
        TokenUsage(
            prompt_tokens=prompt_token_ceiling(decode_chat_request(BODY)),
            completion_tokens=MAX_TOKENS,
        ),
        PRICE,
    )
)
ENV = {"FAKE_UPSTREAM_KEY": UPSTREAM_KEY}


@asynccontextmanager
async def postgres_database() -> AsyncIterator[str]:
    """A new, empty PostgreSQL database (dropped afterwards); its DSN."""
    name = f"sluice_resilience_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(PG_ADMIN, timeout=5)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        yield PG_ADMIN.rsplit("/", 1)[0] + "/" + name
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def _race_once(
    gateways: tuple[Gateway, Gateway], store: Store, fake: FakeUpstream, rng: random.Random, n: int
) -> tuple[int, int, bool]:
    """One run: an account whose credits cover ``holds`` holds, ``3 * holds`` requests
    at once over both processes. Returns (holds, admitted, books clean)."""
    holds = rng.randint(3, 12)
    key = await metered_key(store, f"race{n}", holds * HOLD)
    release = asyncio.Event()
    fake.default = Reply.stream(*text_stream("a")[:1], WaitFor(release), *text_stream("a")[1:])
    before = len(fake.requests)

    async def send(i: int) -> int:
        gw = gateways[i % 2]
        client = await RawClient.connect(gw.host, gw.port)
        try:
            await client.send(post("/v1/chat/completions", BODY, key))
            return (await client.read_response()).status
        finally:
            await client.close()

    tasks = [asyncio.ensure_future(send(i)) for i in range(3 * holds)]
    while len(fake.requests) - before + sum(t.done() for t in tasks) < len(tasks):
        await asyncio.sleep(0.01)  # every request is admitted (waiting) or refused
    release.set()
    statuses = await asyncio.gather(*tasks)
    admitted = statuses.count(200)
    await asyncio.sleep(0.3)  # settlements are written behind
    account = await store.get_account(f"race{n}")
    for _ in range(30):  # each process's credit reservation is given back once idle
        if account is None or account.open_holds == 0:
            break
        await asyncio.sleep(0.1)
        account = await store.get_account(f"race{n}")
    clean = (
        account is not None
        and account.balance >= 0
        and account.held == 0
        and statuses.count(402) == len(statuses) - admitted
    )
    return holds, admitted, clean


async def _race(ctx: Context, backend: str, url: str) -> Row:
    rng = random.Random(ctx.seed)
    runs = ctx.n(3, 50)
    fake = FakeUpstream()
    await fake.start()
    config = f'[storage]\nurl = "{url}"\n[server]\nsse_keepalive_interval = 0\n'
    config += openai_connection_toml(fake.base_url)
    overdrafts = unclean = 0
    most = 0.0
    try:
        async with (
            gateway(ctx, config, name=f"race-{backend}-a", env=ENV) as one,
            gateway(ctx, config, name=f"race-{backend}-b", env=ENV) as two,
        ):
            store = await open_store(url)
            try:
                for n in range(runs):
                    holds, admitted, clean = await _race_once((one, two), store, fake, rng, n)
                    overdrafts += admitted > holds
                    unclean += not clean
                    most = max(most, admitted / holds)
                mismatches = await store.reconcile()
            finally:
                await store.close()
    finally:
        await fake.close()
    return Row(
        f"race for the last credits, 2 processes, {backend}",
        f"{overdrafts} overdrafts and {unclean} unsettled runs in {runs} seeded runs "
        f"(3 x the requests the credits cover; at most {most:.0%} of the covered holds "
        f"admitted); reconcile: {len(mismatches)} mismatches",
        "0 overdrafts, every run settled, reconcile clean",
        overdrafts == 0 and unclean == 0 and not mismatches,
    )


@row("race for the last credits")
async def race_for_the_last_credits(ctx: Context) -> list[Row]:
    sqlite = await _race(ctx, "SQLite", f"sqlite:///{ctx.home('race-sqlite-db') / 'shared.db'}")
    async with postgres_database() as dsn:
        postgres = await _race(ctx, "PostgreSQL", dsn)
    return [sqlite, postgres]


HOSTILE_USAGE = (
    b'{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15,"cost":-300}',
    b'{"prompt_tokens":-1000000,"completion_tokens":-1000000,"total_tokens":-2000000}',
    b'{"prompt_tokens":10,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":-900}}',
    b'{"prompt_tokens":1000000000000000,"completion_tokens":1000000000000000,"cost":1e300}',
    b'{"prompt_tokens":10,"completion_tokens":5,"cost":1e999}',
    b'{"prompt_tokens":10,"completion_tokens":5,"cost":"-5"}',
    b'{"prompt_tokens":10.5,"completion_tokens":-0.0}',
    b'{"prompt_tokens":9223372036854775807,"completion_tokens":9223372036854775807}',
)


def _usage_event(usage: bytes) -> bytes:
    return (
        b'data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"m",'
        b'"choices":[],"usage":' + usage + b"}\n\n"
    )


def _hostile_replies(usage: bytes) -> tuple[Reply, Reply]:
    stream = Reply.stream(*text_stream("a", "b")[:-1], _usage_event(usage), DONE)
    doc = json.dumps(completion("ab")).encode()
    whole = doc.replace(json.dumps(completion("ab")["usage"]).encode(), usage)
    return stream, Reply(200, {"content-type": "application/json"}, whole)


async def _mint(gw: Gateway, fake: FakeUpstream, key: str, model: str) -> int:
    """Every hostile usage, streamed and whole; the number of requests sent."""
    sent = 0
    for usage in HOSTILE_USAGE:
        for reply, stream in zip(_hostile_replies(usage), (True, False), strict=True):
            fake.queue(reply)
            doc: dict[str, object] = {
                "model": model,
                "max_tokens": 100,
                "messages": [{"role": "user", "content": "mint"}],
            }
            if stream:
                doc |= {"stream": True, "stream_options": {"include_usage": True}}
            await exchange(
                gw.host, gw.port, post("/v1/chat/completions", json.dumps(doc).encode(), key)
            )
            sent += 1
    return sent


@row("an upstream cannot mint credits")
async def upstream_numbers(ctx: Context) -> list[Row]:
    """Negative, infinite, absurd and mistyped usage, through an operator's connection
    and through an account's own one (which also reports a cost of its own)."""
    fake = FakeUpstream()
    await fake.start()
    admin = "admin-" + "r" * 40
    env = {**ENV, "SLUICE_ADMIN_KEY": admin, "SLUICE_SECRET_KEY": "k" * 43 + "="}
    home = ctx.home("mint")
    url = f"sqlite:///{home / 'sluice.db'}"
    config = f'[storage]\nurl = "{url}"\n[server]\nallow_private_upstreams = true\n'
    config += openai_connection_toml(fake.base_url)
    spec = json.dumps(
        {
            "provider": "openai",
            "base_url": fake.base_url,
            "api_key": "sk-tenant-own-key-0123456789",
            "models": {"openai/gpt-4o-mini": "gpt-4o-mini"},
        }
    ).encode()
    usd = 10**9
    try:
        async with gateway(ctx, config, name="mint", env=env, home=home) as gw:
            store = await open_store(url)
            try:
                operator_key = await metered_key(store, "operator", usd)
                tenant_key = await metered_key(store, "tenant", usd)
                await exchange(
                    gw.host,
                    gw.port,
                    (
                        "PUT /admin/accounts/tenant/connections/conn_own HTTP/1.1\r\nHost: x\r\n"
                        f"Authorization: Bearer {admin}\r\nContent-Length: {len(spec)}\r\n\r\n"
                    ).encode()
                    + spec,
                )
                sent = await _mint(gw, fake, operator_key, "test/gpt-fake")
                sent += await _mint(gw, fake, tenant_key, "openai/gpt-4o-mini")
                await asyncio.sleep(0.5)
                balances = [await store.get_account(n) for n in ("operator", "tenant")]
                mismatches = await store.reconcile()
            finally:
                await store.close()
    finally:
        await fake.close()
    minted = sum(max(0, a.balance - usd) for a in balances if a is not None)
    spent = sum(usd - a.balance for a in balances if a is not None)
    return [
        Row(
            "an upstream cannot mint credits",
            f"{sent} requests with {len(HOSTILE_USAGE)} kinds of hostile usage, streamed and "
            f"whole, on an operator's and an account's own connection: ${minted / usd:.6f} "
            f"minted, ${spent / usd:.6f} charged; reconcile: {len(mismatches)} mismatches",
            "$0 minted, no balance above its credits, reconcile clean",
            minted == 0 and not mismatches and all(a is not None for a in balances),
        )
    ]
