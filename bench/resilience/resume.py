"""Resumable streams cut at a random event and resumed (issue 25): on each door, the
cut client's bytes and the reconnect's make the whole stream, equal (ids and times
aside) to an uncut run of the same upstream stream; the upstream asked once per
request; each charged as one uncut request; the books reconcile."""

from __future__ import annotations

import asyncio
import json
import random
import re
from collections.abc import Awaitable, Callable
from functools import partial

from bench.resilience.harness import Context, Gateway, Row, gateway, row
from bench.resilience.network_support import ENV_KEY, USD, books
from sluice.storage.factory import open_store
from tests.support.accounts import metered_key
from tests.support.fake_openai import text_stream
from tests.support.fake_upstream import FakeUpstream, Pause, Reply, Step
from tests.support.gateway import UPSTREAM_KEY, openai_connection_toml
from tests.support.raw_http import RawClient, exchange, get, post

ENV = {ENV_KEY: UPSTREAM_KEY}
PIECES = tuple(f"piece {i:02d}; " for i in range(24))
USAGE = {"prompt_tokens": 11, "completion_tokens": 24, "total_tokens": 35}
DOORS: dict[str, tuple[str, dict[str, object], str]] = {
    "chat": ("/v1/chat/completions", {"stream_options": {"resumable": True},
              "messages": [{"role": "user", "content": "hi"}]}, ""),
    "messages": ("/v1/messages", {"max_tokens": 100,
                  "messages": [{"role": "user", "content": "hi"}]}, "X-Sluice-Resumable: true\r\n"),
    "responses": ("/v1/responses", {"input": "hi", "store": False}, "X-Sluice-Resumable: true\r\n"),
}  # fmt: skip
_VARYING = re.compile(
    rb'req_[0-9A-Za-z]+|"(created|created_at|completed_at)":\s*\d+|msg_[0-9A-Za-z]+|resp_[0-9A-Za-z]+'
)
"""What differs between two runs of one upstream stream: ids and times."""


def _paced() -> Reply:
    steps: list[Step] = []
    for step in text_stream(*PIECES, usage=USAGE):
        steps += [step, Pause(0.002)]
    return Reply.stream(*steps)


def _events(raw: bytes) -> list[bytes]:
    return [e for e in raw.split(b"\n\n") if e]


def _same(raw: bytes) -> bytes:
    return _VARYING.sub(b"~", raw)


async def _read(client: RawClient, count: int | None) -> bytes:
    """The body until ``count`` whole events came (None: to its end)."""
    got = b""
    while count is None or len(_events(got)) < count or not got.endswith(b"\n\n"):
        chunk = await client.read_chunk()
        if chunk is None:
            break
        got += chunk
    return got


async def _trial(gw: Gateway, key: str, door: str, cut: int | None) -> tuple[bytes, bytes, str]:
    """One stream cut after ``cut`` events (None: read whole) and resumed after the last
    event read; what the client put together, the stream as kept, its request id."""
    path, doc, extra = DOORS[door]
    body = json.dumps({"model": "test/gpt-fake", "stream": True, **doc}).encode()
    client = await RawClient.connect(gw.host, gw.port)
    await client.send(post(path, body, key, extra=extra))
    _, head = await client.read_head()
    before = await _read(client, cut)
    await client.close()
    url, request_id = head["x-sluice-resume-url"], head["x-request-id"]
    last = _events(before)[-1].split(b"\n", 1)[0].removeprefix(b"id: ").decode()
    after = await exchange(gw.host, gw.port, get(url, key, extra=f"Last-Event-ID: {last}\r\n"))
    whole = await exchange(gw.host, gw.port, get(url, key))
    return before + after.body, whole.body, request_id


def _cut_at(
    gw: Gateway, key: str, door: str, cuts: list[int], i: int
) -> Awaitable[tuple[bytes, bytes, str]]:
    return _trial(gw, key, door, cuts[i])


async def _gathered(
    count: int, one: Callable[[int], Awaitable[tuple[bytes, bytes, str]]]
) -> list[tuple[bytes, bytes, str]]:
    gate = asyncio.Semaphore(8)

    async def guarded(i: int) -> tuple[bytes, bytes, str]:
        async with gate:
            return await one(i)

    return list(await asyncio.gather(*(guarded(i) for i in range(count))))


@row("resumable streams cut and resumed")
async def cut_and_resumed(ctx: Context) -> list[Row]:
    rng = random.Random(ctx.seed)
    trials = ctx.n(20, 500)
    upstream = FakeUpstream()
    await upstream.start()
    upstream.default = _paced()
    home = ctx.home("resume")
    url = f"sqlite:///{home / 'sluice.db'}"
    config = f'[storage]\nurl = "{url}"\n' + openai_connection_toml(upstream.base_url)
    rows = []
    try:
        async with gateway(ctx, config, name="resume", env=ENV, home=home) as gw:
            store = await open_store(url)
            try:
                key = await metered_key(store, "resumer", 1000 * USD)
                for door in DOORS:
                    asked = len(upstream.requests)
                    uncut, _, ref_id = await _trial(gw, key, door, None)
                    cuts = [rng.randint(1, len(_events(uncut)) - 1) for _ in range(trials)]
                    runs = await _gathered(trials, partial(_cut_at, gw, key, door, cuts))
                    await asyncio.sleep(0.2)
                    charges = await _charges(gw, key, [ref_id, *(r[2] for r in runs)])
                    calls = len(upstream.requests) - asked
                    rows.append(
                        _row(door, trials, uncut=uncut, runs=runs, charges=charges, calls=calls)
                    )
                account = await books(store, "resumer", settle=3.0)
            finally:
                await store.close()
    finally:
        await upstream.close()
    rows.append(Row(
        "resumable streams: the books", f"after {3 * (trials + 1)} streams: {account.describe()}",
        "0 held, 0 open holds, reconcile clean", account.settled,
    ))  # fmt: skip
    return rows


async def _charges(gw: Gateway, key: str, ids: list[str]) -> list[int]:
    charged = []
    for request_id in ids:
        found = await exchange(gw.host, gw.port, get(f"/v1/requests/{request_id}", key))
        charged.append(round(found.json()["credits_charged"] * USD) if found.status == 200 else -1)
    return charged


def _row(
    door: str,
    trials: int,
    *,
    uncut: bytes,
    runs: list[tuple[bytes, bytes, str]],
    charges: list[int],
    calls: int,
) -> Row:
    torn = sum(1 for joined, whole, _ in runs if joined != whole)
    differ = sum(1 for joined, _, _ in runs if _same(joined) != _same(uncut))
    overcharged = sum(1 for c in charges[1:] if c != charges[0])
    return Row(
        f"resumable streams cut and resumed: {door}",
        f"{trials} streams cut at a random event of {len(_events(uncut))} and resumed: "
        f"{torn} with a gap or a repeat, {differ} differing from an uncut run (ids and times "
        f"aside); upstream asked {calls} times for {trials + 1} streams; {overcharged} "
        f"charged other than the uncut run's {charges[0]} nano",
        "no gap, no repeat, each equal to an uncut run; the upstream asked once per stream; "
        "each charged as one uncut stream",
        torn == 0 and differ == 0 and calls == trials + 1 and overcharged == 0,
    )
