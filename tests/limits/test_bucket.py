"""The bucket arithmetic, table by table (integers: unit-milliseconds, milliseconds)."""

from __future__ import annotations

import msgspec
import pytest

from sluice.config import MAX_CAPACITY, LimitSpec
from sluice.limits.bucket import Bucket

PER_MINUTE = Bucket(limit=100, window_ms=60_000)  # one unit drains every 600 ms
UNIT = PER_MINUTE.window_ms
FULL = PER_MINUTE.limit * UNIT


@pytest.mark.parametrize(
    ("debt", "elapsed", "expected"),
    [
        (0, 0, 0),
        (UNIT, 0, UNIT),
        (UNIT, 599, UNIT - 599 * 100),
        (UNIT, 600, 0),  # one unit drains in window / limit
        (UNIT, 10_000, 0),  # never below empty
        (FULL, 60_000, 0),  # a full bucket drains in one window
        (FULL, 30_000, FULL // 2),
        (UNIT, -5, UNIT),  # a clock going backwards drains nothing
    ],
    ids=["empty", "now", "just-before", "one-unit", "floor", "window", "half", "backwards"],
)
def test_drained(debt: int, elapsed: int, expected: int) -> None:
    assert PER_MINUTE.drained(debt, elapsed) == expected


@pytest.mark.parametrize(
    ("debt", "cost", "expected"),
    [
        (0, 1, 0),
        (FULL - UNIT, 1, 0),  # the 100th request fits exactly
        (FULL, 1, 600),  # the 101st waits for one unit to drain
        (FULL - UNIT + 1, 1, 1),  # a sliver over: 1 ms, rounded up
        (FULL, 0, 0),  # nothing to charge fits a full bucket
        (FULL + 100, 0, 1),  # ...but not a bucket in debt
        (FULL, 100, 60_000),  # the whole limit waits for an empty bucket
        (0, 100, 0),
        (0, 250, 0),  # above the limit: fits an empty bucket...
        (1, 250, 1),  # ...only
        (3 * FULL, 250, 180_000),
        (FULL, 40, 24_000),  # 40 units drain in 40 * 600 ms
    ],
    ids=[
        "empty",
        "last-fits",
        "one-over",
        "sliver",
        "zero-cost-full",
        "zero-cost-debt",
        "whole-limit",
        "whole-limit-empty",
        "oversize-empty",
        "oversize-not-empty",
        "oversize-debt",
        "partial",
    ],
)
def test_wait(debt: int, cost: int, expected: int) -> None:
    assert PER_MINUTE.wait_ms(debt, cost) == expected


@pytest.mark.parametrize(
    ("debt", "amount", "expected"),
    [
        (0, 1, UNIT),
        (UNIT, 99, FULL),
        (FULL, 50, FULL + 50 * UNIT),  # settling above the estimate: debt past capacity
        (FULL, -30, FULL - 30 * UNIT),  # settling below it: a refund
        (UNIT, -5, 0),  # a refund never fills past empty
        (UNIT, 0, UNIT),
    ],
    ids=["charge", "to-full", "overrun", "refund", "refund-floor", "nothing"],
)
def test_charge(debt: int, amount: int, expected: int) -> None:
    assert PER_MINUTE.charge(debt, amount) == expected


@pytest.mark.parametrize(
    ("debt", "remaining", "reset"),
    [
        (0, 100, 0),
        (UNIT, 99, 600),
        (UNIT + 1, 98, 601),  # a started unit is not remaining; reset rounds up
        (FULL - 1, 0, 60_000),
        (FULL, 0, 60_000),
        (2 * FULL, 0, 120_000),  # in debt: nothing remaining, reset past one window
    ],
    ids=["empty", "one", "sliver", "almost-full", "full", "debt"],
)
def test_remaining_and_reset(debt: int, remaining: int, reset: int) -> None:
    assert (PER_MINUTE.remaining(debt), PER_MINUTE.reset_ms(debt)) == (remaining, reset)


def test_limit_spec_decodes_and_validates() -> None:
    spec = msgspec.json.decode(b'{"requests": 60, "window": 0.5}', type=LimitSpec)
    assert spec == LimitSpec(requests=60, tokens=None, window=0.5) and spec.window_ms == 500
    assert LimitSpec().window_ms == 60_000
    for bad in (
        b'{"requests": 0}',
        b'{"tokens": -1}',
        b'{"window": 0}',
        b'{"tokens": %d}' % (MAX_CAPACITY // 60_000 + 1),
        b'{"request": 5}',
    ):
        with pytest.raises(msgspec.ValidationError):
            msgspec.json.decode(bad, type=LimitSpec)
    with pytest.raises(ValueError, match="out of range"):
        LimitSpec(requests=0)
