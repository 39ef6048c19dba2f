"""A key (or an account) whose budget covers 10 holds, 100 requests at once: exactly
10 are admitted, what the key (the account, over all its keys) spends stays within its
budget and the ledger reconciles; on one gateway over SQLite and across two gateway
processes sharing PostgreSQL."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import pytest

from sluice.accounts.keys import key_digest, key_prefix, new_key
from sluice.core.principal import AccountPolicy, KeyPolicy
from sluice.storage.base import Store
from sluice.storage.factory import open_store
from tests.server.test_money import BODY, HOLD, UPSTREAM_ENV, USD
from tests.support.accounts import metered_key
from tests.support.databases import fresh_postgres
from tests.support.fake_openai import chunk, text_stream
from tests.support.fake_upstream import FakeUpstream, Reply, WaitFor
from tests.support.gateway import openai_connection_toml
from tests.support.process import gateway_process
from tests.support.raw_http import RawClient, post

REQUESTS = 100
COVERED = 10


@asynccontextmanager
async def database(kind: str, tmp_path: Path) -> AsyncIterator[str]:
    if kind == "sqlite":
        yield f"sqlite:///{tmp_path / 'shared.db'}"
        return
    async with fresh_postgres() as dsn:
        yield dsn


@pytest.mark.parametrize("whose", ["key", "account"])
@pytest.mark.parametrize(("kind", "replicas"), [("sqlite", 1), ("postgres", 2)])
async def test_a_budget_admits_exactly_what_it_covers(
    tmp_path: Path, fake: FakeUpstream, kind: str, replicas: int, whose: str
) -> None:
    """A key's budget over its requests, or an account's over two keys' requests."""
    release = asyncio.Event()
    usage = {"prompt_tokens": 40, "completion_tokens": 3, "total_tokens": 43}
    fake.default = Reply.stream(
        chunk(role="assistant", content=""), WaitFor(release), *text_stream("a", usage=usage)[1:]
    )
    async with database(kind, tmp_path) as url:
        store: Store = await open_store(url)
        try:
            keys = await budgeted_keys(store, whose)
            config = (
                f'[storage]\nurl = "{url}"\n[server]\ndev_key = true\nsse_keepalive_interval = 0\n'
            )
            statuses = await _race(
                tmp_path,
                config + openai_connection_toml(fake.base_url),
                keys,
                fake,
                release,
                replicas,
            )
            # the gateways have stopped: every settlement is written
            key_spent = await store.key_spent("key_team", 0)
            account = await store.get_account("team")
            mismatches = await store.reconcile()
        finally:
            await store.close()
    assert statuses.count(200) == COVERED and statuses.count(402) == REQUESTS - COVERED
    assert len(fake.requests) == COVERED
    assert account is not None and account.held == 0
    spent = 1000 * USD - account.balance
    assert 0 < spent <= COVERED * HOLD
    if whose == "key":
        assert key_spent == spent
    assert mismatches == []


async def budgeted_keys(store: Store, whose: str) -> list[str]:
    """The key of account ``team`` with the budget, or two keys of ``team`` with it."""
    budget = COVERED * HOLD
    if whose == "key":
        return [await metered_key(store, "team", 1000 * USD, KeyPolicy(budget=budget))]
    keys = [await metered_key(store, "team", 1000 * USD), await second_key(store, "acct_team")]
    await store.change_account(
        "acct_team", lambda _: AccountPolicy(budget=budget, budget_period="daily")
    )
    return keys


async def second_key(store: Store, account_id: str) -> str:
    key = new_key(os.urandom(32))
    digest, prefix = key_digest(key), key_prefix(key)
    await store.add_key(
        "key_two", account_id=account_id, key_digest=digest, prefix=prefix, name=None, now=1
    )
    return key


async def _race(
    tmp_path: Path,
    config: str,
    keys: list[str],
    fake: FakeUpstream,
    release: asyncio.Event,
    replicas: int,
) -> list[int]:
    async with AsyncExitStack() as stack:
        gateways = [
            await stack.enter_async_context(
                gateway_process(tmp_path / f"gw{n}", config, env=UPSTREAM_ENV)
            )
            for n in range(replicas)
        ]

        async def send(n: int) -> int:
            gw = gateways[n % replicas]
            client = await RawClient.connect(gw.host, gw.port)
            try:
                await client.send(post("/v1/chat/completions", BODY, keys[n % len(keys)]))
                return (await client.read_response()).status
            finally:
                await client.close()

        tasks = [asyncio.ensure_future(send(n)) for n in range(REQUESTS)]
        while len(fake.requests) + sum(t.done() for t in tasks) < REQUESTS:
            await asyncio.sleep(0.02)  # every request admitted (waiting) or refused
        release.set()
        return list(await asyncio.gather(*tasks))
