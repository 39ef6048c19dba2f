"""Rows about a bad network: client disconnects, upstream resets, failover, stalls."""

from __future__ import annotations

import asyncio
import random
import re
from collections import Counter
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import TypeVar

from bench.resilience.harness import Context, Gateway, Row, gateway, percentile, row
from bench.resilience.network_support import (
    CASES,
    DEADLINE_FIRST,
    ENV_KEY,
    FAILURES,
    PRIMARY,
    STALLS,
    USD,
    SlowUpstream,
    books,
    connections_of,
    content_of,
    ending,
    errors_of,
    nano,
    pair_toml,
    request_record,
    response_events,
    stream_body,
)
from sluice.storage.factory import open_store
from tests.support.accounts import metered_key
from tests.support.fake_openai import chunk, text_stream
from tests.support.fake_upstream import Cut, FakeUpstream, Pause, Reply, Step
from tests.support.gateway import UPSTREAM_KEY, openai_connection_toml
from tests.support.raw_http import exchange, post

ENV = {ENV_KEY: UPSTREAM_KEY}
CREDITS = 1000 * USD
BASE = "[server]\nsse_keepalive_interval = 0\n[routing]\nbreaker_failures = 1000000000\n"
CLOSE_BUDGET_MS = 250.0
T = TypeVar("T")
POINTS = ("early", "before head", "after head", "after events")
"""Where a client leaves: 0-15 ms after sending (often before the upstream call), while
the upstream holds back its head, after the response head, after 1-40 content events."""


def _storage(ctx: Context, name: str) -> tuple[Path, str]:
    """A home for a gateway, and the URL of the SQLite database in it (shared with us)."""
    home = ctx.home(name)
    return home, f"sqlite:///{home / 'sluice.db'}"


async def _gathered(count: int, width: int, one: Callable[[int], Awaitable[T]]) -> list[T]:
    """``one(0)`` … ``one(count - 1)``, at most ``width`` at a time; their results."""
    gate = asyncio.Semaphore(width)

    async def guarded(i: int) -> T:
        async with gate:
            return await one(i)

    return list(await asyncio.gather(*(guarded(i) for i in range(count))))


# -- 1. the client disconnects at a random point ------------------------------------------


async def _disconnect(
    gw: Gateway, key: str, upstream: SlowUpstream, i: int, plan: tuple[str, int, float, bool]
) -> tuple[str, float]:
    """One trial: send, wait for its point, close (FIN, or RST when ``rst``); the user
    name and the loop time of the close."""
    point, k, delay, rst = plan
    user = f"t{i}-mute" if point == "before head" else f"t{i}"
    reader, writer = await asyncio.open_connection(gw.host, gw.port)
    writer.write(post("/v1/chat/completions", stream_body("test/gpt-fake", user), key))
    await writer.drain()
    if point == "early":
        await asyncio.sleep(delay)
    elif point == "before head":
        await asyncio.wait_for(upstream.arrival(user).wait(), 10)
        await asyncio.sleep(delay)
    elif point == "after head":
        await reader.readuntil(b"\r\n\r\n")
    else:
        seen = b""
        while seen.count(b'"content":"<') < k:
            data = await reader.read(65536)
            if not data:
                break
            seen += data
    closed_at = asyncio.get_running_loop().time()
    if rst:
        writer.transport.abort()
    else:
        writer.close()
    arrived = upstream.arrival(user)
    try:
        await asyncio.wait_for(arrived.wait(), 0.3)
        await asyncio.wait_for(upstream.seen[user].closed.wait(), 5)
    except TimeoutError:
        pass  # never reached the upstream, or left open (counted at the end)
    return user, closed_at


@row("disconnect at random points")
async def disconnect_at_random_points(ctx: Context) -> list[Row]:
    rng = random.Random(ctx.seed)
    trials = ctx.n(30, 500)
    plans = [
        (rng.choice(POINTS), rng.randint(1, 40), rng.uniform(0, 0.015), rng.random() < 0.3)
        for _ in range(trials)
    ]
    upstream = SlowUpstream(ctx.seed)
    await upstream.start()
    home, url = _storage(ctx, "disconnect")
    config = f'[storage]\nurl = "{url}"\n' + BASE + openai_connection_toml(upstream.base_url)
    try:
        async with gateway(ctx, config, name="disconnect", env=ENV, home=home) as gw:
            store = await open_store(url)
            try:
                key = await metered_key(store, "leaver", CREDITS)
                closes = dict(
                    await _gathered(
                        trials, 8, lambda i: _disconnect(gw, key, upstream, i, plans[i])
                    )
                )
                await asyncio.sleep(0.5)
                account = await books(store, "leaver", settle=2.0)
            finally:
                await store.close()
    finally:
        await upstream.close()
    reached = {u: s for u, s in upstream.seen.items() if u in closes}
    open_ = [u for u, s in reached.items() if s.hung_up is None]
    waits = [(s.hung_up - closes[u]) * 1000 for u, s in reached.items() if s.hung_up is not None]
    p50, p99, most = percentile(waits, 50), percentile(waits, 99), max(waits, default=0.0)
    points = Counter(p for p, *_ in plans)
    at_points = ", ".join(f"{points[p]} {p}" for p in POINTS)
    return [
        Row(
            "client disconnects at random points: the upstream call closes",
            f"{trials} trials ({at_points}; 30% RST, else FIN), {len(reached)} reached the "
            f"upstream, {len(open_)} left open; client close to upstream close: "
            f"p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {most:.1f} ms",
            f"upstream closed in every trial that reached it, p99 < {CLOSE_BUDGET_MS:.0f} ms",
            bool(reached) and not open_ and p99 < CLOSE_BUDGET_MS,
        ),
        Row(
            "client disconnects at random points: no hold left behind",
            f"after {trials} disconnects and a settle wait: {account.describe()}",
            "0 held, 0 open holds, reconcile clean",
            account.settled,
        ),
    ]


# -- 2. the upstream resets mid-stream ------------------------------------------------------


def _cut_stream(rng: random.Random, n: int) -> tuple[list[str], list[Step]]:
    """k numbered pieces, then an abrupt close (sometimes inside the next event)."""
    pieces = [f"[{j}:{n}]" for j in range(rng.randint(1, 30))]
    steps: list[Step] = [chunk(role="assistant", content="")]
    paced = rng.random() < 0.5
    for piece in pieces:
        steps.append(chunk(content=piece))
        if paced:
            steps.append(Pause(rng.uniform(0.0005, 0.003)))
    if rng.random() < 0.33:
        torn = chunk(content=f"[{len(pieces)}:{n}]")
        steps.append(torn[: rng.randint(1, len(torn) - 1)])
    steps.append(Cut())
    return pieces, steps


@row("reset mid-stream")
async def reset_mid_stream(ctx: Context) -> list[Row]:
    rng = random.Random(ctx.seed + 1)
    trials = ctx.n(20, 600)
    fake = FakeUpstream()
    await fake.start()
    home, url = _storage(ctx, "reset")
    config = f'[storage]\nurl = "{url}"\n' + BASE + openai_connection_toml(fake.base_url)
    bad = Counter[str]()
    codes = Counter[str]()
    try:
        async with gateway(ctx, config, name="reset", env=ENV, home=home) as gw:
            store = await open_store(url)
            try:
                key = await metered_key(store, "reset", CREDITS)
                for n in range(trials):
                    pieces, steps = _cut_stream(rng, n)
                    fake.queue(Reply.stream(*steps))
                    body = stream_body("test/gpt-fake", f"r{n}")
                    resp = await exchange(gw.host, gw.port, post("/v1/chat/completions", body, key))
                    found = response_events(resp)
                    got = re.findall(r"\[(\d+):\d+\]", content := content_of(found))
                    errors = errors_of(found)
                    bad["status"] += resp.status != 200
                    bad["content"] += content != "".join(pieces)
                    bad["duplicated"] += len(got) != len(set(got))
                    bad["done"] += "[DONE]" in found
                    bad["error"] += not (
                        len(errors) == 1
                        and isinstance(found[-1], dict)
                        and "error" in found[-1]
                        and errors[0].get("type") == "upstream_error"
                    )
                    codes.update(str(e.get("code")) for e in errors)
                account = await books(store, "reset", settle=2.0)
            finally:
                await store.close()
    finally:
        await fake.close()
    return [
        Row(
            "upstream reset mid-stream",
            f"{trials} streams cut after 1-30 numbered pieces (a third inside the next event): "
            f"{bad['content']} with content other than the pieces sent, {bad['duplicated']} "
            f"duplicated, {bad['done']} with [DONE], {bad['error']} without exactly one final "
            f"upstream_error event (codes: {dict(codes)}), {bad['status']} not 200; "
            f"{account.describe()}",
            "exactly the pieces sent, in order, then one upstream_error event, no [DONE]; "
            "holds settled, reconcile clean",
            not any(bad.values()) and account.settled,
        )
    ]


# -- 3. the primary fails before its first content event: failover --------------------------


async def _failover_once(gw: Gateway, key: str, route: str, i: int) -> tuple[bool, str, int, int]:
    """One request: (served by the standby, the primary's "outcome/code", attempts, charged)."""
    resp = await exchange(
        gw.host, gw.port, post("/v1/chat/completions", stream_body(route, f"{route}{i}"), key)
    )
    found = response_events(resp)
    record = await request_record(gw.host, gw.port, key, resp.headers.get("x-request-id", ""))
    tries = record.get("attempts") or [{}]
    served = (
        resp.status == 200
        and connections_of(found) == {"conn_b"}
        and content_of(found) == "from b"
        and found[-1:] == ["[DONE]"]
    )
    first = f"{tries[0].get('outcome')}/{tries[0].get('code')}"
    return served, first, len(tries), nano(record.get("credits_charged"))


@row("reset before the first byte, with failover")
async def failover_before_the_first_event(ctx: Context) -> list[Row]:
    per_mode = max(1, ctx.n(20, 300) // len(FAILURES))
    a, b = FakeUpstream(), FakeUpstream()
    await a.start()
    await b.start()
    b.default = Reply.stream(*text_stream("from", " b"))
    home, url = _storage(ctx, "failover")
    config = f'[storage]\nurl = "{url}"\n' + BASE
    config += pair_toml(a.base_url, b.base_url, a_timeouts=PRIMARY, c_timeouts=DEADLINE_FIRST)
    served = Counter[str]()
    firsts: dict[str, Counter[str]] = {mode: Counter() for mode in FAILURES}
    bad = Counter[str]()
    charged = 0
    try:
        async with gateway(ctx, config, name="failover", env=ENV, home=home) as gw:
            store = await open_store(url)
            try:
                key = await metered_key(store, "failover", CREDITS)
                for mode, (route, reply, expected) in FAILURES.items():
                    a.default = reply
                    results = await _gathered(per_mode, 10, partial(_failover_once, gw, key, route))
                    for ok, first, tries, cost in results:
                        served[mode] += ok
                        firsts[mode][first] += 1
                        bad["not served by the standby"] += not ok
                        bad["more than 2 attempts"] += tries > 2
                        bad["unexpected primary failure"] += not first.startswith(expected)
                        bad["not charged"] += cost <= 0
                        charged += cost
                account = await books(store, "failover", settle=2.0)
            finally:
                await store.close()
    finally:
        await a.close()
        await b.close()
    total = per_mode * len(FAILURES)
    drop = CREDITS - account.balance
    modes = "; ".join(
        f"{mode} {served[mode]}/{per_mode} ({', '.join(firsts[mode])})" for mode in FAILURES
    )
    problems = ", ".join(f"{n} {what}" for what, n in bad.items() if n) or "no other problems"
    return [
        Row(
            "primary fails before its first event: the standby serves",
            f"{total} requests, {len(FAILURES)} failure modes, served by conn_b: {modes}; "
            f"{problems}; conn_a saw {len(a.requests)} requests",
            "every request served by the standby (conn_b, [DONE]), at most 2 attempts, "
            "the primary's failure as expected",
            sum(served.values()) == total and not any(bad.values()),
        ),
        Row(
            "primary fails before its first event: charged once",
            f"{total} requests: balance down {drop} nano, sum of credits_charged {charged} "
            f"nano, {bad['not charged']} not charged; {account.describe()}",
            "each request charged (> 0), balance drop = sum charged, holds settled, "
            "reconcile clean",
            drop == charged and bad["not charged"] == 0 and account.settled,
        ),
    ]


# -- 4. stalls: each ends with its code, on time -------------------------------------------


async def _stall_once(gw: Gateway, key: str, model: str, i: int) -> tuple[str, float]:
    """One request: how it ended (:func:`ending`), and after how many seconds."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    resp = await exchange(
        gw.host, gw.port, post("/v1/chat/completions", stream_body(model, f"stall{i}"), key)
    )
    took = loop.time() - started
    record = await request_record(gw.host, gw.port, key, resp.headers.get("x-request-id", ""))
    return ending(resp, record), took


@row("stalls")
async def stalls(ctx: Context) -> list[Row]:
    runs = ctx.n(1, 10)
    a, b = FakeUpstream(), FakeUpstream()
    await a.start()
    await b.start()
    b.default = Reply.stream(*text_stream("from", " b"))
    home, url = _storage(ctx, "stalls")
    config = f'[storage]\nurl = "{url}"\n' + BASE
    config += pair_toml(a.base_url, b.base_url, a_timeouts=STALLS, c_timeouts=STALLS)
    out = []
    try:
        async with gateway(ctx, config, name="stalls", env=ENV, home=home) as gw:
            store = await open_store(url)
            try:
                key = await metered_key(store, "stalls", CREDITS)
                for case, model, reply, expected, earliest, latest in CASES:
                    a.default = reply
                    results = await _gathered(runs, runs, partial(_stall_once, gw, key, model))
                    endings = Counter(end for end, _ in results)
                    times = [took for _, took in results]
                    ended = "; ".join(f"{n} x {end}" for end, n in endings.items())
                    out.append(
                        Row(
                            f"stalls: {case}",
                            f"{runs} runs ended: {ended}, in {min(times):.3f}-{max(times):.3f} s",
                            f"{expected}, in {earliest:g}-{latest:g} s",
                            endings == Counter({expected: runs})
                            and all(earliest - 0.02 <= t <= latest for t in times),
                        )
                    )
            finally:
                await store.close()
    finally:
        await a.close()
        await b.close()
    return out
