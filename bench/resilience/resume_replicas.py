"""Resumable streams resumed on the other replica (issue 25): two gateway processes on
one PostgreSQL and one Redis behind the real nginx. Each stream is asked through nginx,
cut at a random event, and resumed on the replica that did not serve it (nginx names
the one that did); the cut client's bytes and the reconnect's make the whole stream,
equal (ids and times aside) to an uncut run; the upstream asked once per request; each
charged as one uncut request; the books reconcile."""

from __future__ import annotations

import asyncio
import json
import random
import uuid
from collections.abc import Awaitable
from dataclasses import dataclass
from functools import partial

from bench.resilience.harness import Context, Gateway, Row, gateway, row
from bench.resilience.network_support import USD, books
from bench.resilience.resume import DOORS, ENV, _charges, _events, _gathered, _paced, _read, _row
from sluice.storage.factory import open_store
from tests.support.accounts import metered_key
from tests.support.databases import fresh_postgres
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import openai_connection_toml
from tests.support.nginx import Proxy, nginx_in_front
from tests.support.raw_http import exchange, get, post

REDIS = "redis://127.0.0.1:6379/0"


@dataclass(frozen=True)
class _Replicas:
    """nginx, the replicas behind it by port, and the key the streams are asked with."""

    proxy: Proxy
    by_port: dict[int, Gateway]
    key: str


async def _trial(replicas: _Replicas, door: str, cut: int | None) -> tuple[bytes, bytes, str]:
    """One stream asked through nginx, cut after ``cut`` events (None: read whole), and
    resumed on the other replica; what the client put together, the stream as kept
    (read there too), its request id."""
    path, doc, extra = DOORS[door]
    body = json.dumps({"model": "test/gpt-fake", "stream": True, **doc}).encode()
    key = replicas.key
    client = await replicas.proxy.client()
    await client.send(post(path, body, key, extra=extra))
    _, head = await client.read_head()
    before = await _read(client, cut)
    await client.close()
    served = int(head["x-served-by"].rsplit(":", 1)[1])
    other = next(gw for port, gw in replicas.by_port.items() if port != served)
    url, request_id = head["x-sluice-resume-url"], head["x-request-id"]
    last = _events(before)[-1].split(b"\n", 1)[0].removeprefix(b"id: ").decode()
    resumed = get(url, key, extra=f"Last-Event-ID: {last}\r\n")
    after = await exchange(other.host, other.port, resumed)
    whole = await exchange(other.host, other.port, get(url, key))
    return before + after.body, whole.body, request_id


@row("resumable streams resumed on the other replica")
async def resumed_elsewhere(ctx: Context) -> list[Row]:
    rng = random.Random(ctx.seed + 1)
    trials = ctx.n(20, 500)
    upstream = FakeUpstream()
    await upstream.start()
    upstream.default = _paced()
    prefix = f"sluice-resilience:{uuid.uuid4().hex}:"
    rows = []
    try:
        async with fresh_postgres() as dsn:
            config = (
                f'[storage]\nurl = "{dsn}"\n'
                f'[limits]\nredis_url = "{REDIS}"\nkey_prefix = "{prefix}"\n'
                + openai_connection_toml(upstream.base_url)
            )
            async with (
                gateway(ctx, config, name="replica-a", env=ENV) as a,
                gateway(ctx, config, name="replica-b", env=ENV) as b,
                nginx_in_front(ctx.home("nginx"), a.port, b.port, served_by=True) as proxy,
            ):
                store = await open_store(dsn)
                try:
                    key = await metered_key(store, "resumer", 1000 * USD)
                    replicas = _Replicas(proxy, {a.port: a, b.port: b}, key)
                    for door in DOORS:
                        asked = len(upstream.requests)
                        uncut, _, ref_id = await _trial(replicas, door, None)
                        cuts = [rng.randint(1, len(_events(uncut)) - 1) for _ in range(trials)]
                        runs = await _gathered(trials, partial(_cut_at, replicas, door, cuts))
                        await asyncio.sleep(0.3)
                        charges = await _charges(a, key, [ref_id, *(r[2] for r in runs)])
                        calls = len(upstream.requests) - asked
                        found = _row(
                            door, trials, uncut=uncut, runs=runs, charges=charges, calls=calls
                        )
                        elsewhere = "resumed on the other replica"
                        found.name = found.name.replace("cut and resumed", elsewhere)
                        rows.append(found)
                    account = await books(store, "resumer", settle=3.0)
                finally:
                    await store.close()
    finally:
        await upstream.close()
    rows.append(Row(
        "resumable streams on two replicas: the books",
        f"after {3 * (trials + 1)} streams: {account.describe()}",
        "0 held, 0 open holds, reconcile clean", account.settled,
    ))  # fmt: skip
    return rows


def _cut_at(
    replicas: _Replicas, door: str, cuts: list[int], i: int
) -> Awaitable[tuple[bytes, bytes, str]]:
    return _trial(replicas, door, cuts[i])
