"""``balance = "fastest"`` (issue 25): a model's connections tried soonest expected end
first by moving estimates of time to first event and, for long answers, output tokens
per second, from live traffic, with a small share of calls explored; the estimates in
``/metrics`` and the operator's model view."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from random import Random

import pytest

from sluice.routing.breaker import Circuit
from sluice.routing.speeds import EXPLORE, FAILED, RATE_TOKENS, Estimate, Speeds
from tests.server.test_admin import ADMIN, ENV
from tests.server.test_metrics_mix import samples
from tests.support.accounts import metered_key
from tests.support.fake_openai import DONE, chunk, text_stream
from tests.support.fake_upstream import FakeUpstream, Pause, Reply, Step
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


def test_a_connection_that_fails_fast_does_not_look_fast() -> None:
    """A 20 ms 503 is not a 20 ms first token: a failure counts as FAILED seconds."""
    speeds = Speeds()
    speeds.failed(("a", "m"), 0.02)
    speeds.opened(("b", "m"), 0.3)
    assert speeds.estimate(("a", "m")) == FAILED
    assert speeds.fastest_first(["a", "b"], [("a", "m"), ("b", "m")], Random(3)) == ["b", "a"]
    speeds.opened(("c", "m"), 0.1)
    for _ in range(3):  # c starts failing at once: it loses its place within a few
        speeds.failed(("c", "m"), 0.01)
    assert (speeds.estimate(("c", "m")) or 0) > 0.3


def test_long_answers_go_to_the_quickest_to_finish_short_ones_to_the_quickest_to_open() -> None:
    """``a`` opens in 0.1 s and writes 50 tokens/s, ``b`` opens in 0.5 s and writes
    1,000: a 500-token answer ends sooner on ``b`` (1.0 s against 10.1 s), a 10-token
    one sooner on ``a`` (0.3 s against 0.51 s)."""
    speeds, circuits, no_explore = Speeds(), [("a", "m"), ("b", "m")], Random(3)
    speeds.opened(("a", "m"), 0.1)
    speeds.opened(("b", "m"), 0.5)
    speeds.streamed(("a", "m"), 500, 10.0)
    assert speeds.fastest_first("ab", circuits, no_explore) == ["a", "b"]  # b: no rate yet
    speeds.streamed(("b", "m"), 500, 0.5)
    assert speeds.rate(("b", "m")) == 1000
    assert speeds.fastest_first("ab", circuits, no_explore) == ["b", "a"]
    assert speeds.fastest_first("ab", circuits, no_explore, ceiling=10) == ["a", "b"]
    for _ in range(20):  # the answers turn short: the expected length follows
        speeds.streamed(("b", "m"), RATE_TOKENS - 1, 0.01)
    assert speeds.rate(("b", "m")) == 1000  # too few tokens to say anything of a rate
    assert speeds.fastest_first("ab", circuits, no_explore) == ["a", "b"]


def test_other_processes_estimates_are_averaged_in() -> None:
    speeds = Speeds()
    speeds.opened(("a", "m"), 0.2)
    elsewhere: dict[Circuit, tuple[Estimate, ...]] = {
        ("a", "m"): (Estimate(0.4, 100.0),),
        ("b", "m"): (Estimate(0.05),),
    }
    speeds.share(elsewhere, {"m": (300.0,)})
    assert speeds.length("m") == 300.0
    assert speeds.estimate(("a", "m")) == pytest.approx(0.3)
    assert speeds.rate(("a", "m")) == 100.0
    assert speeds.own() == ({("a", "m"): Estimate(0.2)}, {})  # what it shares: its own
    # b was measured elsewhere: known here, not tried first as never measured
    order = speeds.fastest_first("ab", [("a", "m"), ("b", "m")], Random(3))
    assert order == ["b", "a"]
    speeds.share({})
    assert speeds.estimate(("b", "m")) is None


@pytest.fixture
async def three() -> AsyncIterator[dict[str, FakeUpstream]]:
    fakes = {name: FakeUpstream() for name in DELAYS}
    for name, fake in fakes.items():
        await fake.start()
        fake.default = Reply.stream(*text_stream("hi"), delay=DELAYS[name])
    yield fakes
    for fake in fakes.values():
        await fake.close()


def config(fakes: dict[str, FakeUpstream], extra: str = "") -> str:
    connections = "".join(
        f'[[connections]]\nid = "conn_{name}"\nprovider = "openai-compatible"\n'
        f'base_url = "{fake.base_url}"\n'
        for name, fake in fakes.items()
    )
    serving = ", ".join(f'conn_{name} = "m"' for name in fakes)
    return (
        f"[server]\nport = 0\n{extra}{connections}"
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


def _paced(delay: float, pause: float) -> Reply:
    """Opens after ``delay``, then writes 200 output tokens over ``pause`` seconds."""
    steps: list[Step] = [chunk(role="assistant", content=""), chunk(content="x"), Pause(pause)]
    usage = {"prompt_tokens": 5, "completion_tokens": 200, "total_tokens": 205}
    ending = [chunk(finish="stop"), chunk(usage=usage, choices=False), DONE]
    return Reply.stream(*steps, *ending, delay=delay)


async def test_long_answers_go_where_they_end_soonest_short_ones_where_they_open_soonest(
    tmp_path: Path,
) -> None:
    """``opens`` answers in 20 ms and then writes 200 tokens in 0.3 s; ``finishes``
    answers in 0.25 s, all at once. The model's answers are 200 tokens long, so a request
    with no cap ends sooner on ``finishes``; one capped at 5 tokens on ``opens``."""
    fakes = {"opens": FakeUpstream(), "finishes": FakeUpstream()}
    for fake in fakes.values():
        await fake.start()
    fakes["opens"].default = _paced(0.02, 0.3)
    fakes["finishes"].default = _paced(0.25, 0.0)
    doc = {"model": "test/m", "stream": True, "messages": [{"role": "user", "content": "x"}]}
    try:
        async with running_gateway(tmp_path, config(fakes), env=ENV) as gw:
            key = await metered_key(gw.gateway.store, "team", 10**9)

            async def ask(times: int, **extra: int) -> dict[str, int]:
                before = {n: len(f.requests) for n, f in fakes.items()}
                body = json.dumps({**doc, **extra}).encode()
                for _ in range(times):
                    path = "/v1/chat/completions"
                    answer = await exchange(gw.host, gw.port, post(path, body, key))
                    assert answer.body.endswith(b"data: [DONE]\n\n")
                return {n: len(f.requests) - before[n] for n, f in fakes.items()}

            await ask(2)  # warm-up: each measured once
            long = await ask(12)
            short = await ask(12, max_tokens=5)
            metrics = samples(
                (await exchange(gw.host, gw.port, get("/metrics", ADMIN))).body.decode()
            )
            view = (await exchange(gw.host, gw.port, get("/admin/models", ADMIN))).json()
    finally:
        for fake in fakes.values():
            await fake.close()
    assert long["finishes"] >= 10, long
    assert short["opens"] >= 10, short
    labels = (("connection", "conn_opens"), ("model", "test/m"))
    assert 300 < metrics["sluice_tokens_per_second_estimate", labels] < 700  # 200 in 0.3 s
    (model,) = [m for m in view["data"] if m["id"] == "test/m"]
    targets = {t["connection"]: t for t in model["targets"]}
    assert targets["conn_finishes"]["tokens_per_second_estimate"] > 2000
