"""The same behaviour from every store: scenarios on a test clock, and exact admission
under concurrency (500 at once against a limit of 100)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from sluice.config import LimitSpec
from sluice.limits.base import Limiter
from sluice.limits.decision import Decision, Subject, Ticket
from sluice.limits.stores.memory import MemoryLimiter
from tests.limits.conftest import Clock


@dataclass(frozen=True)
class Admit:
    at: float
    tokens: int
    want: tuple[bool, float, int | None, int | None]
    """allowed, retry_after, remaining requests, remaining tokens"""
    key: str = "key_1"


@dataclass(frozen=True)
class Finish:
    """Ends the last admitted request with this many tokens."""

    at: float
    tokens: int


Step = Admit | Finish
KEY_3_PER_MINUTE = (LimitSpec(requests=3), None)
TOKENS_1000 = (LimitSpec(tokens=1000), None)

SCENARIOS: dict[str, tuple[tuple[LimitSpec | None, LimitSpec | None], list[Step]]] = {
    "burst-then-one-per-interval": (
        KEY_3_PER_MINUTE,
        [
            Admit(0, 0, (True, 0, 2, None)),
            Admit(0, 0, (True, 0, 1, None)),
            Admit(0, 0, (True, 0, 0, None)),
            Admit(0, 0, (False, 20.0, 0, None)),
            Admit(19.999, 0, (False, 0.001, 0, None)),
            Admit(20, 0, (True, 0, 0, None)),
        ],
    ),
    "full-again-after-one-window": (
        KEY_3_PER_MINUTE,
        [
            Admit(0, 0, (True, 0, 2, None)),
            Admit(0, 0, (True, 0, 1, None)),
            Admit(0, 0, (True, 0, 0, None)),
            Admit(60, 0, (True, 0, 2, None)),
        ],
    ),
    "estimate-charged-then-refunded": (
        TOKENS_1000,
        [
            Admit(0, 800, (True, 0, None, 200)),
            Admit(0, 300, (False, 6.0, None, 200)),  # 100 over: 6 s to drain
            Finish(0, 500),  # 300 fewer than estimated
            Admit(0, 300, (True, 0, None, 200)),
        ],
    ),
    "overrun-puts-the-bucket-in-debt": (
        TOKENS_1000,
        [
            Admit(0, 100, (True, 0, None, 900)),
            Finish(0, 2500),  # 2.5 windows' worth
            Admit(0, 0, (False, 90.0, None, 0)),
            Admit(90, 0, (True, 0, None, 0)),
            Admit(96, 100, (True, 0, None, 0)),
        ],
    ),
    "estimate-above-the-limit-needs-an-empty-bucket": (
        TOKENS_1000,
        [
            Admit(0, 1500, (True, 0, None, 0)),
            Admit(0, 1, (False, 30.06, None, 0)),
            Admit(60, 1500, (False, 30.0, None, 500)),
            Admit(90, 1500, (True, 0, None, 0)),
        ],
    ),
    "cancelled-stream-still-counts-as-one-request": (
        (LimitSpec(requests=1, tokens=1000), None),
        [
            Admit(0, 400, (True, 0, 0, 600)),
            Finish(0, 0),
            Admit(0, 0, (False, 60.0, 0, 1000)),
        ],
    ),
    "denied-requests-charge-nothing": (
        (LimitSpec(requests=2, tokens=100), None),
        [
            Admit(0, 90, (True, 0, 1, 10)),
            Admit(0, 20, (False, 6.0, 1, 10)),
            Admit(0, 10, (True, 0, 0, 0)),
        ],
    ),
    "account-limit-spans-its-keys": (
        (LimitSpec(requests=10), LimitSpec(requests=2, window=10)),
        [
            Admit(0, 0, (True, 0, 1, None)),
            Admit(0, 0, (True, 0, 0, None), key="key_2"),
            Admit(0, 0, (False, 5.0, 0, None), key="key_3"),
            Admit(5, 0, (True, 0, 0, None), key="key_3"),
        ],
    ),
    "no-limits": ((None, None), [Admit(0, 10**9, (True, 0, None, None))]),
}


def summary(decision: Decision) -> tuple[bool, float, int | None, int | None]:
    requests = None if decision.requests is None else decision.requests.remaining
    tokens = None if decision.tokens is None else decision.tokens.remaining
    return decision.allowed, decision.retry_after, requests, tokens


@pytest.mark.parametrize("name", SCENARIOS)
async def test_scenario(name: str, limiter: Limiter, clock: Clock) -> None:
    (key_spec, account_spec), steps = SCENARIOS[name]
    start = clock.now
    last: Ticket | None = None
    for i, step in enumerate(steps):
        clock.now = start + step.at
        if isinstance(step, Finish):
            assert last is not None
            await limiter.finish(last, step.tokens)
            continue
        subject = Subject(step.key, "acct_1", key=key_spec, account=account_spec)
        decision = await limiter.admit(subject, step.tokens)
        assert summary(decision) == step.want, f"step {i}: {step}"
        assert (decision.ticket is not None) == decision.allowed
        last = decision.ticket or last


async def test_exceeded_names_the_limits(limiter: Limiter) -> None:
    subject = Subject("k", "a", key=LimitSpec(tokens=10), account=LimitSpec(requests=1))
    assert (await limiter.admit(subject, 5)).allowed
    decision = await limiter.admit(subject, 6)
    assert decision.exceeded == ("account:requests", "key:tokens")


@pytest.mark.parametrize("dimension", ["requests", "tokens"])
async def test_500_concurrent_admissions_admit_exactly_100(
    limiter: Limiter, dimension: str
) -> None:
    spec = LimitSpec(requests=100) if dimension == "requests" else LimitSpec(tokens=1000)
    subject = Subject("k", "a", account=spec)
    decisions = await asyncio.gather(*(limiter.admit(subject, 10) for _ in range(500)))
    assert sum(d.allowed for d in decisions) == 100


async def test_memory_store_forgets_drained_buckets(clock: Clock) -> None:
    limiter = MemoryLimiter(clock)
    spec = LimitSpec(requests=5, window=1)
    for i in range(10_000):
        clock.now += 0.5
        assert (await limiter.admit(Subject(f"key_{i}", "a", key=spec), 0)).allowed
        assert len(limiter) <= 1024  # each bucket drains 200 ms after its one request
    await limiter.close()
    assert len(limiter) == 0
