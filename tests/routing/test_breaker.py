from __future__ import annotations

from sluice.routing.breaker import Breaker, State


def test_opens_after_threshold_then_probes_once_then_closes() -> None:
    b = Breaker(threshold=3, cooldown=10, max_retry_after=300)
    for t in (0, 1):
        assert b.allow("c", t)
        b.failure("c", t)
    assert b.state("c", 2) is State.CLOSED
    b.failure("c", 2)
    assert b.state("c", 2) is State.OPEN and not b.allow("c", 5)
    assert b.reopens_in("c", 5) == 7
    assert b.allow("c", 12)  # half-open: one probe
    assert not b.allow("c", 12)  # ...and only one
    b.success("c")
    assert b.state("c", 12) is State.CLOSED and b.allow("c", 12)


def test_failed_probe_reopens_at_once() -> None:
    b = Breaker(threshold=2, cooldown=10, max_retry_after=300)
    b.failure("c", 0)
    b.failure("c", 0)
    assert b.allow("c", 10)
    b.failure("c", 10)
    assert not b.allow("c", 15) and b.allow("c", 20)


def test_released_probe_can_be_claimed_again() -> None:
    b = Breaker(threshold=1, cooldown=1, max_retry_after=300)
    b.failure("c", 0)
    assert b.allow("c", 1)
    b.release("c")  # the probe was cancelled: no verdict
    assert b.allow("c", 1)


def test_retry_after_opens_immediately_and_is_capped() -> None:
    b = Breaker(threshold=5, cooldown=10, max_retry_after=60)
    b.failure("c", 0, retry_after=30)
    assert not b.allow("c", 29) and b.allow("c", 30)
    b.success("c")
    b.failure("c", 100, retry_after=10_000)
    assert b.reopens_in("c", 100) == 60


def test_success_resets_the_count_and_keys_are_independent() -> None:
    b = Breaker(threshold=2, cooldown=10, max_retry_after=300)
    b.failure("a", 0)
    b.success("a")
    b.failure("a", 1)
    assert b.allow("a", 1)
    b.failure("b", 0)
    b.failure("b", 0)
    assert b.allow("a", 1) and not b.allow("b", 1)
