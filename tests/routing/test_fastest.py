"""``balance = "fastest"`` (issue 25): a model's connections tried quickest first by a
moving estimate of time to first event from live traffic, with a small share of
streams explored; the estimates in ``/metrics`` and the operator's model view."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from random import Random

import pytest

from sluice.routing.speeds import EXPLORE, Speeds
from tests.server.test_admin import ADMIN, ENV
from tests.server.test_metrics_mix import samples
from tests.support.accounts import metered_key
from tests.support.fake_openai import text_stream
from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.gateway import running_gateway
from tests.support.raw_http import exchange, get, post

DELAYS = {"a": 0.05, "b": 0.2, "c": 0.8}


def test_unmeasured_first_then_quickest_then_explored_now_and_then() -> None:
    speeds = Speeds()
    circuits = [("a", "m"), ("b", "m"), ("c", "m")]
    speeds.opened(("a", "m"), 0.3)
    speeds.opened(("b", "m"), 0.1)
    rng = Random(1)
    orders = [speeds.fastest_first(["a", "b", "c"], circuits, rng) for _ in range(2000)]
    assert orders.count(["c", "b", "a"]) > 1800  # c never measured: tried to be measured
    speeds.opened(("c", "m"), 0.5)
    orders = [speeds.fastest_first(["a", "b", "c"], circuits, rng) for _ in range(2000)]
    settled = orders.count(["b", "a", "c"]) / len(orders)
    assert 1 - 2 * EXPLORE < settled < 1  # explored on about EXPLORE of calls
    for _ in range(3):  # b degrades: the moving average follows within a few
        speeds.opened(("b", "m"), 1.0)
    assert speeds.fastest_first(["a", "b", "c"], circuits, Random(3))[0] == "a"


def test_a_connection_that_stopped_answering_loses_its_place() -> None:
    """Failures and lost hedges count as a lower bound: a connection that only ever
    fails after 5 s is not kept first by its old 0.1 s estimate."""
    speeds = Speeds()
    speeds.opened(("a", "m"), 0.1)
    speeds.opened(("b", "m"), 0.3)
    speeds.no_sooner_than(("a", "m"), 0.05)  # ended sooner than its estimate: no news
    assert speeds.estimate(("a", "m")) == 0.1
    for _ in range(3):
        speeds.no_sooner_than(("a", "m"), 5.0)
    order = speeds.fastest_first(["a", "b"], [("a", "m"), ("b", "m")], Random(3))
    assert order == ["b", "a"]


@pytest.fixture
async def three() -> AsyncIterator[dict[str, FakeUpstream]]:
    fakes = {name: FakeUpstream() for name in DELAYS}
    for name, fake in fakes.items():
        await fake.start()
        fake.default = Reply.stream(*text_stream("hi"), delay=DELAYS[name])
    yield fakes
    for fake in fakes.values():
        await fake.close()


def config(fakes: dict[str, FakeUpstream]) -> str:
    connections = "".join(
        f'[[connections]]\nid = "conn_{name}"\nprovider = "openai-compatible"\n'
        f'base_url = "{fake.base_url}"\n'
        for name, fake in fakes.items()
    )
    serving = ", ".join(f'conn_{name} = "m"' for name in fakes)
    return (
        f"[server]\nport = 0\n{connections}"
        f'[[models]]\nid = "test/m"\nproviders = {{ {serving} }}\nbalance = "fastest"\n'
        "price = { input = 1.0, output = 2.0 }\n"
    )


async def test_traffic_goes_to_the_fastest_and_moves_when_it_slows(
    tmp_path: Path, three: dict[str, FakeUpstream]
) -> None:
    body = json.dumps({"model": "test/m", "stream": True,
                       "messages": [{"role": "user", "content": "x"}]}).encode()  # fmt: skip
    async with running_gateway(tmp_path, config(three), env=ENV) as gw:
        key = await metered_key(gw.gateway.store, "team", 10**9)

        async def ask(times: int) -> None:
            for _ in range(times):
                answer = await exchange(gw.host, gw.port, post("/v1/chat/completions", body, key))
                assert answer.body.endswith(b"data: [DONE]\n\n")

        await ask(3)  # warm-up: each measured once
        before = {n: len(f.requests) for n, f in three.items()}
        await ask(60)
        steady = {n: len(f.requests) - before[n] for n, f in three.items()}
        three["a"].default = Reply.stream(*text_stream("hi"), delay=1.0)
        moved_at = {n: len(f.requests) for n, f in three.items()}
        await ask(12)
        after = {n: len(f.requests) - moved_at[n] for n, f in three.items()}
        metrics = samples((await exchange(gw.host, gw.port, get("/metrics", ADMIN))).body.decode())
        view = (await exchange(gw.host, gw.port, get("/admin/models", ADMIN))).json()
    assert steady["a"] >= 0.9 * 60, steady
    assert after["a"] <= 2 and after["b"] >= 9, after  # moved within a request or two
    estimate = metrics[
        ("sluice_ttft_estimate_seconds", (("connection", "conn_b"), ("model", "test/m")))
    ]
    assert 0.15 < estimate < 0.4
    (model,) = [m for m in view["data"] if m["id"] == "test/m"]
    targets = {t["connection"]: t for t in model["targets"]}
    assert targets["conn_c"]["ttft_estimate_ms"] > 700
