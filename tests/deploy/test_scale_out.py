"""Two replicas, each ``sluice serve --workers 2``, behind the real nginx running
deploy/nginx/sluice.conf, sharing PostgreSQL and Redis (docs/deploy.md#several-replicas).

Four gateway processes race for an account's last credits and never overdraw; a key's
rate limit is one limit across them; a replica killed with SIGKILL mid-stream leaves
the other serving, its credit reservations are reclaimed after ``hold_ttl`` by the
survivor, and the ledger reconciles.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path

import asyncpg

from sluice.core.tokens import prompt_token_ceiling
from sluice.core.usage import Price, TokenUsage
from sluice.frontdoors.chat import decode_chat_request
from sluice.metering.charges import nano_from_pico
from sluice.metering.pricing import cost_pico
from sluice.storage.factory import open_store
from tests.support.accounts import metered_key
from tests.support.databases import fresh_postgres
from tests.support.fake_openai import chunk, completion, text_stream
from tests.support.fake_upstream import Recorded, Reply, WaitFor, responding
from tests.support.gateway import openai_connection_toml
from tests.support.nginx import Proxy, nginx_in_front
from tests.support.process import GatewayProcess, gateway_process
from tests.support.raw_http import RawClient, RawResponse, post

USD = 10**9
PRICE = Price.per_million(2.0, 8.0, cache_read=0.5)
BODY = json.dumps(
    {
        "model": "test/gpt-fake",
        "stream": True,
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "count to three"}],
    }
).encode()
WHOLE = json.dumps({**json.loads(BODY), "stream": False}).encode()
HOLD = nano_from_pico(
    cost_pico(
        TokenUsage(
            prompt_tokens=prompt_token_ceiling(decode_chat_request(BODY)), completion_tokens=100
        ),
        PRICE,
    )
)
USAGE = {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12}


def _config(dsn: str, *, hold_ttl: float = 3600) -> str:
    prefix = f"sluice-test:{os.getpid()}:{id(dsn)}:"
    return (
        f'[storage]\nurl = "{dsn}"\n'
        "[server]\ndev_key = true\nsse_keepalive_interval = 0\n"
        f"[metering]\nhold_ttl = {hold_ttl}\nreclaim_interval = 0.5\n"
        f'[limits]\nredis_url = "redis://127.0.0.1:6379/0"\nkey_prefix = "{prefix}"\n'
        "accounts = { limited = { requests = 10, window = 60 } }\n"
    )


def _children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


async def _call(proxy: Proxy, body: bytes, key: str) -> RawResponse:
    client = await proxy.client()
    try:
        await client.send(post("/v1/chat/completions", body, key))
        return await client.read_response()
    finally:
        await client.close()


async def test_four_processes_share_the_last_credits_and_one_rate_limit(tmp_path: Path) -> None:
    release = asyncio.Event()

    def answer(request: Recorded) -> Reply:
        if request.json().get("stream"):
            rest = text_stream("a", " b", usage=USAGE)[1:]
            return Reply.stream(chunk(role="assistant", content=""), WaitFor(release), *rest)
        return Reply.json(completion("fine", usage=USAGE))

    (tmp_path / "nginx").mkdir()
    async with responding(answer) as fake, fresh_postgres() as dsn:
        store = await open_store(dsn)
        racers = await metered_key(store, "racers", 10 * HOLD)
        limited = await metered_key(store, "limited", 1 * USD)
        config = _config(dsn) + openai_connection_toml(fake.base_url)
        async with (
            gateway_process(tmp_path / "a", config, args=["--workers", "2"]) as a,
            gateway_process(tmp_path / "b", config, args=["--workers", "2"]) as b,
            nginx_in_front(tmp_path / "nginx", a.port, b.port) as proxy,
        ):
            assert len(_children(a.pid)) == len(_children(b.pid)) == 2
            racing = [asyncio.ensure_future(_call(proxy, BODY, racers)) for _ in range(40)]
            while len(fake.requests) + sum(t.done() for t in racing) < 40:
                await asyncio.sleep(0.02)  # every request admitted (waiting) or refused
            release.set()
            statuses = [r.status for r in await asyncio.gather(*racing)]
            limits = [(await _call(proxy, WHOLE, limited)).status for _ in range(16)]
        account = await store.get_account("racers")
        charged = await _charged(dsn, "acct_racers")
        mismatches = await store.reconcile()
        await store.close()
    served = statuses.count(200)
    # never more than the credits cover; each refused one was refused before any call
    assert 1 <= served <= 10 and statuses.count(402) == 40 - served
    assert len([r for r in fake.requests if r.json().get("stream")]) == served
    assert account is not None and (account.held, account.open_holds) == (0, 0)
    assert account.balance == 10 * HOLD - charged >= 0
    assert mismatches == []
    # one limit of 10 a minute for the account, across four processes
    assert limits.count(200) == 10 and limits.count(429) == 6


async def test_a_replica_killed_mid_stream_leaves_the_other_serving(tmp_path: Path) -> None:
    release = asyncio.Event()

    def answer(request: Recorded) -> Reply:
        if request.json().get("stream"):
            rest = text_stream("late", usage=USAGE)[1:]
            early = [chunk(role="assistant", content=""), chunk(content="early")]
            return Reply.stream(*early, WaitFor(release), *rest)
        return Reply.json(completion("fine", usage=USAGE))

    (tmp_path / "nginx").mkdir()
    async with responding(answer) as fake, fresh_postgres() as dsn:
        store = await open_store(dsn)
        key = await metered_key(store, "team", 1 * USD)
        config = _config(dsn, hold_ttl=2) + openai_connection_toml(fake.base_url)
        async with (
            gateway_process(tmp_path / "a", config, args=["--workers", "2"]) as a,
            gateway_process(tmp_path / "b", config, args=["--workers", "2"]) as b,
            nginx_in_front(tmp_path / "nginx", a.port, b.port) as proxy,
        ):
            streams = []
            for _ in range(8):
                client = await proxy.client()
                await client.send(post("/v1/chat/completions", BODY, key))
                status, _ = await client.read_head()
                assert status == 200
                assert b"early" in (await client.read_chunk() or b"")
                streams.append(client)
            killed = _kill(a)  # the whole replica, supervisor and workers
            dead_by = int(time.time()) + 2  # nothing of the dead one's outlives hold_ttl
            whole = [(await _call(proxy, WHOLE, key)).status for _ in range(6)]
            async with asyncio.timeout(20):  # hold_ttl 2 s, then the survivor reclaims
                reclaimed = await b.log.wait_for("expired credit holds")
                while await _open_until(dsn, dead_by):
                    await asyncio.sleep(0.2)
            release.set()
            endings = [await _rest(client) for client in streams]
        account = await store.get_account("team")
        mismatches = await store.reconcile()
        await store.close()
    assert all(_dead(pid) for pid in killed)
    assert whole == [200] * 6  # the survivor served every new request
    assert "reclaimed" in reclaimed
    finished = sum(1 for e in endings if e.endswith(b"data: [DONE]\n\n"))
    assert 0 < finished < 8  # the survivor's streams ended whole, the killed one's did not
    assert account is not None and (account.held, account.open_holds) == (0, 0)
    assert mismatches == []


def _kill(replica: GatewayProcess) -> list[int]:
    pids = [replica.pid, *_children(replica.pid)]
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    return pids


def _dead(pid: int) -> bool:
    """Gone, or a zombie: an orphaned worker waits for a container's PID 1 to reap it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


async def _rest(client: RawClient) -> bytes:
    """What is left of a stream, to its end or to the connection's."""
    seen = b""
    try:
        async with asyncio.timeout(10):
            while (piece := await client.read_chunk()) is not None and piece:
                seen += piece
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    await client.close()
    return seen


async def _open_until(dsn: str, expiry: int) -> int:
    """How many holds still open expire by ``expiry`` (a dead process's, past it)."""
    conn = await asyncpg.connect(dsn)
    try:
        found = await conn.fetchval(
            "SELECT COUNT(*) FROM holds WHERE released_at IS NULL AND expires_at <= $1", expiry
        )
    finally:
        await conn.close()
    return int(found)


async def _charged(dsn: str, account_id: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        total = await conn.fetchval(
            "SELECT COALESCE(SUM(-amount), 0) FROM ledger "
            "WHERE kind = 'charge' AND account_id = $1",
            account_id,
        )
    finally:
        await conn.close()
    return int(total)
