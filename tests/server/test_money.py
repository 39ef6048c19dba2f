"""Money stays exact: racing replicas, cancellations at random points, a crashed process."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

from sluice.core.tokens import estimate_prompt_tokens, prompt_token_ceiling, tokens_for_chars
from sluice.core.usage import Price, TokenUsage
from sluice.frontdoors.chat import decode_chat_request
from sluice.metering.charges import nano_from_pico
from sluice.metering.pricing import cost_pico
from sluice.storage.factory import open_store
from tests.support.accounts import metered_key
from tests.support.databases import fresh_postgres
from tests.support.fake_openai import chunk, text_stream
from tests.support.fake_upstream import FakeUpstream, Pause, Reply, Step, WaitFor
from tests.support.gateway import UPSTREAM_KEY, openai_connection_toml, running_gateway
from tests.support.process import gateway_process
from tests.support.raw_http import RawClient, exchange, get, post

USD = 10**9
UPSTREAM_ENV = {"FAKE_UPSTREAM_KEY": UPSTREAM_KEY}  # the variable the connection names
PRICE = Price.per_million(2.0, 8.0, cache_read=0.5)
MAX_TOKENS = 1000
BODY = json.dumps(
    {
        "model": "test/gpt-fake",
        "stream": True,
        "max_tokens": MAX_TOKENS,
        "messages": [{"role": "user", "content": "count to ten"}],
    }
).encode()
PROMPT = estimate_prompt_tokens(decode_chat_request(BODY))
CEILING = prompt_token_ceiling(decode_chat_request(BODY))  # what a hold counts
HOLD = nano_from_pico(
    cost_pico(TokenUsage(prompt_tokens=CEILING, completion_tokens=MAX_TOKENS), PRICE)
)


async def test_two_replicas_on_postgres_never_overdraw(tmp_path: Path, fake: FakeUpstream) -> None:
    release = asyncio.Event()
    usage = {"prompt_tokens": 40, "completion_tokens": 3, "total_tokens": 43}
    fake.default = Reply.stream(
        chunk(role="assistant", content=""),
        WaitFor(release),
        *text_stream("a", "b", "c", usage=usage)[1:],
    )
    async with fresh_postgres() as dsn:
        store = await open_store(dsn)
        key = await metered_key(store, "team", 50 * HOLD)  # exactly 50 holds
        config = f'[storage]\nurl = "{dsn}"\n[server]\ndev_key = true\nsse_keepalive_interval = 0\n'
        config += (
            f'[limits]\nredis_url = "redis://127.0.0.1:6379/0"\n'
            f'key_prefix = "sluice-test:{os.getpid()}:{id(dsn)}:"\n'
            "key = { requests = 10000 }\n"
        )
        config += openai_connection_toml(fake.base_url)
        async with (
            gateway_process(tmp_path / "a", config, env=UPSTREAM_ENV) as one,
            gateway_process(tmp_path / "b", config, env=UPSTREAM_ENV) as two,
        ):
            request = post("/v1/chat/completions", BODY, key)

            async def send(n: int) -> int:
                gw = one if n % 2 else two
                client = await RawClient.connect(gw.host, gw.port)
                try:
                    await client.send(request)
                    resp = await client.read_response()
                finally:
                    await client.close()
                return resp.status

            tasks = [asyncio.ensure_future(send(n)) for n in range(200)]
            while len(fake.requests) + sum(t.done() for t in tasks) < 200:
                await asyncio.sleep(0.02)  # every request admitted (waiting) or refused
            release.set()
            statuses = await asyncio.gather(*tasks)
        assert statuses.count(200) == 50 and statuses.count(402) == 150
        assert len(fake.requests) == 50
        charge = nano_from_pico(cost_pico(TokenUsage(prompt_tokens=40, completion_tokens=3), PRICE))
        account = await store.get_account("team")
        assert account is not None
        assert (account.balance, account.held) == (50 * HOLD - 50 * charge, 0)
        assert await store.reconcile() == []
        await store.close()


async def test_cancellations_at_random_points_release_holds_and_charge_what_streamed(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    steps: list[Step] = [chunk(role="assistant", content="")]
    for _ in range(60):
        steps += [chunk(content="12345678"), Pause(0.005)]
    fake.default = Reply.stream(*steps)
    rng = random.Random(5)
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        store = gw.gateway.store
        key = await metered_key(store, "team", 100 * HOLD)

        async def cancel_after(pieces: int) -> tuple[str, int]:
            client = await RawClient.connect(gw.host, gw.port)
            await client.send(post("/v1/chat/completions", BODY, key))
            _, headers = await client.read_head()
            received = 0
            while received < pieces:
                piece = await client.read_chunk()
                assert piece is not None
                received += piece.count(b'"content":"12345678"')
            await client.close()
            return headers["x-request-id"], received

        results = await asyncio.gather(*[cancel_after(rng.randint(1, 40)) for _ in range(100)])
        await asyncio.sleep(0.3)
        await gw.gateway.writer.flush()
        # the process's reservation gives back what it holds once unused for
        # [metering] reserve_idle (1 s)
        for _ in range(40):
            found = await store.get_account("team")
            assert found is not None
            account = found
            if account.open_holds == 0:
                break
            await asyncio.sleep(0.1)
        assert (account.held, account.open_holds) == (0, 0)
        total = 0
        for request_id, received in results:
            row = (await exchange(gw.host, gw.port, get(f"/v1/requests/{request_id}", key))).json()
            assert row["status"] == "cancelled"
            streamed = row["completion_tokens"]
            assert tokens_for_chars(8 * received) <= streamed <= tokens_for_chars(8 * 60)
            charged = nano_from_pico(
                cost_pico(TokenUsage(prompt_tokens=PROMPT, completion_tokens=streamed), PRICE)
            )
            assert row["credits_charged"] == charged / USD
            total += charged
        assert account.balance == 100 * HOLD - total
        assert await store.reconcile() == []


async def test_a_killed_process_holds_are_reclaimed_and_the_ledger_reconciles(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    release = asyncio.Event()
    fake.default = Reply.stream(
        chunk(role="assistant", content=""), chunk(content="x"), WaitFor(release)
    )
    home = tmp_path / "home"
    config = "[server]\nsse_keepalive_interval = 0\n[metering]\nhold_ttl = 1\n"
    config += openai_connection_toml(fake.base_url)
    async with gateway_process(home, config, env=UPSTREAM_ENV) as gw:
        store = await open_store(f"sqlite:///{home / 'sluice.db'}")
        key = await metered_key(store, "team", 10 * HOLD)
        client = await RawClient.connect(gw.host, gw.port)
        await client.send(post("/v1/chat/completions", BODY, key))
        await client.read_head()
        await client.read_chunk()  # streaming: the hold is open
        account = await store.get_account("team")
        assert account is not None and account.held == HOLD
        os.kill(gw.pid, signal.SIGKILL)
        await client.close()
    release.set()
    await asyncio.sleep(1.1)  # past the hold's expiry
    cli = await asyncio.to_thread(
        subprocess.run,
        [
            sys.executable,
            "-m",
            "sluice",
            "ledger",
            "reconcile",
            "--config",
            str(home / "sluice.toml"),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "SLUICE_HOME": str(home)},
        timeout=60,
        check=False,
    )
    assert cli.returncode == 0, cli.stderr
    assert "reclaimed 1 expired holds" in cli.stdout
    account = await store.get_account("team")
    assert account is not None
    assert (account.balance, account.held, account.open_holds) == (10 * HOLD, 0, 0)
    assert await store.reconcile() == []
    await store.close()
