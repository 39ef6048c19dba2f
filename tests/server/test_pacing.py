"""A key's quick calls are paced to a share of the event loop (the clock handed in)."""

from __future__ import annotations

import asyncio

import pytest

from sluice.server.pacing import CALL_COST, Pacer
from tests.support.fake_transport import FakeClock


async def test_a_key_within_its_share_is_never_held() -> None:
    clock = FakeClock(100.0)
    pacer = Pacer(clock, share=0.1, burst=0.1)
    for _ in range(20):
        async with pacer.paced("key_a"):
            clock.advance(0.001)  # 1 ms of work
        clock.advance(0.05)  # then 50 ms of nothing: ~2% of the time
    assert clock.now < 102.1  # no waiting beyond the calls' own time


async def test_a_key_past_its_share_waits_until_it_is_back_within_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = FakeClock(100.0)
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.advance(seconds)

    monkeypatch.setattr(asyncio, "sleep", sleep)
    pacer = Pacer(clock, share=0.1, burst=0.1)
    for _ in range(10):
        async with pacer.paced("key_a"):
            clock.advance(0.02 - CALL_COST)  # 20 ms each, back to back: 0.2 s in all
    async with pacer.paced("key_b"):  # another key has its own share
        pass
    elapsed = clock.now - 100.0
    # past its burst (0.1 s and what it earns meanwhile), each call waits until the key
    # is back within 10% of the time: 0.02 / 0.1 s, less what it earned while it ran
    assert len(slept) == 4 and all(0.1 <= wait <= 0.2 for wait in slept)
    assert 0.5 <= elapsed - 0.2 <= 0.8
