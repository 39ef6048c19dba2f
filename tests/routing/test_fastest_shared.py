"""``balance = "fastest"`` estimates shared through Redis (``[limits] redis_url``, issue
25): a gateway that never sent a request to a connection orders by what another one
measured; a process that died drops out; a payload that is not ours, or a number that
is not a time, is ignored; Redis down, each process orders by its own."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from pathlib import Path

import msgspec
import pytest
from redis.asyncio import Redis

from sluice.routing.speed_share import SpeedShare
from sluice.routing.speeds import Estimate, Speeds
from tests.routing.test_fastest import config, three
from tests.server.test_admin import ADMIN, ENV
from tests.support.accounts import metered_key
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import running_gateway
from tests.support.raw_http import exchange, get, post

__all__ = ["three"]
REDIS = "redis://127.0.0.1:6379/0"


def _limits(prefix: str) -> str:
    return f'[limits]\nredis_url = "{REDIS}"\nkey_prefix = "{prefix}"\n'


async def _estimates(gw: object) -> dict[str, float | None]:
    view = (await exchange(gw.host, gw.port, get("/admin/models", ADMIN))).json()  # type: ignore[attr-defined]
    (model,) = [m for m in view["data"] if m["id"] == "test/m"]
    return {t["connection"]: t["ttft_estimate_ms"] for t in model["targets"]}


async def test_a_gateway_orders_by_what_another_one_measured(
    tmp_path: Path, three: dict[str, FakeUpstream]
) -> None:
    prefix = f"sluice-test:{uuid.uuid4().hex}:"
    shared = config(three, _limits(prefix))
    body = json.dumps({"model": "test/m", "stream": True,
                       "messages": [{"role": "user", "content": "x"}]}).encode()  # fmt: skip
    async with (
        running_gateway(tmp_path / "a", shared, env=ENV) as a,
        running_gateway(tmp_path / "b", shared, env=ENV) as b,
    ):
        key_a = await metered_key(a.gateway.store, "team", 10**9)
        key_b = await metered_key(b.gateway.store, "team", 10**9)
        async with asyncio.timeout(10):  # a measures all three; b sends nothing yet
            while None in (await _estimates(a)).values():
                await exchange(a.host, a.port, post("/v1/chat/completions", body, key_a))
            while None in (seen := await _estimates(b)).values():
                await asyncio.sleep(0.1)
        assert seen["conn_a"] < seen["conn_b"] < seen["conn_c"]  # type: ignore[operator]
        before = {n: len(f.requests) for n, f in three.items()}
        for _ in range(10):
            await exchange(b.host, b.port, post("/v1/chat/completions", body, key_b))
        sent = {n: len(f.requests) - before[n] for n, f in three.items()}
    # without a's estimates b would try conn_b and conn_c first, once each, to measure them
    assert sent["a"] >= 9, sent


async def test_a_process_gone_drops_out_and_what_is_not_ours_is_ignored() -> None:
    prefix = f"sluice-test:{uuid.uuid4().hex}:"
    client = Redis.from_url(REDIS)
    mine, theirs = Speeds(), Speeds()
    here = SpeedShare.from_url(REDIS, prefix, mine)
    there = SpeedShare.from_url(REDIS, prefix, theirs)
    try:
        theirs.opened(("conn", "m"), 0.4)
        theirs.streamed(("conn", "m"), 100, 0.5)
        await there.exchange()
        await client.set(f"{prefix}speeds:stranger", b"not msgpack")
        bogus = [[["conn", "m", [float("nan"), -5.0]]], {"m": float("inf")}]
        await client.set(f"{prefix}speeds:bogus", msgspec.msgpack.encode(bogus))
        await client.sadd(f"{prefix}speeds", "stranger", "bogus", "dead")
        await here.exchange()
        assert mine.estimate(("conn", "m")) == 0.4
        assert mine.rate(("conn", "m")) == 200.0
        assert mine.length("m") == 100.0
        await there.close()  # its averages go with it
        await here.exchange()
        assert mine.estimates() == {}
        listed: set[bytes] = await client.smembers(f"{prefix}speeds")  # type: ignore[assignment]
        members = {m.decode() for m in listed}
        assert members == {"stranger", "bogus", here._origin}  # "dead" had no averages
    finally:
        await here.close()
        async for name in client.scan_iter(match=prefix + "*"):
            await client.delete(name)
        await client.aclose()


async def test_redis_down_each_process_orders_by_its_own(
    caplog: pytest.LogCaptureFixture,
) -> None:
    speeds = Speeds()
    speeds.share({("conn", "m"): (Estimate(9.0),)})
    speeds.opened(("conn", "m"), 0.1)
    share = SpeedShare.from_url("redis://127.0.0.1:1/0", "p:", speeds)
    with caplog.at_level(logging.WARNING, "sluice.routing"):
        await share.start()
        async with asyncio.timeout(5):
            while speeds.estimate(("conn", "m")) != 0.1:
                await asyncio.sleep(0.05)
        await share.close()
    warned = [r for r in caplog.records if "not shared while Redis fails" in r.message]
    assert len(warned) == 1


async def test_closing_ends_the_exchanges_though_a_cancel_is_lost() -> None:
    """On Python 3.11 a cancel landing just as a Redis command's send finished is lost
    (redis-py sends through ``asyncio.wait_for``): the exchanges run on, and a close that
    cancelled them once waited for them forever (a test's gateway stop hung so)."""
    share = SpeedShare.from_url(REDIS, f"sluice-test:{uuid.uuid4().hex}:", Speeds())
    lost: list[bool] = []

    async def exchange_losing_a_cancel() -> None:
        try:
            await asyncio.sleep(0.05)
        except asyncio.CancelledError:
            lost.append(True)  # as wait_for returns a finished send's result

    share.exchange = exchange_losing_a_cancel  # type: ignore[method-assign]
    await share.start()
    await asyncio.sleep(0.01)
    closing = asyncio.ensure_future(share.close())
    done, _ = await asyncio.wait({closing}, timeout=3)
    if not done:  # the old close: cut it so the test ends
        closing.cancel()
        await asyncio.wait({closing})
    assert lost == [True] and done
