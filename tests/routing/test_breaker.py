from __future__ import annotations

from sluice.routing.breaker import Breaker, State

A, B, C = ("a", "m"), ("b", "m"), ("c", "m")


def test_opens_after_threshold_then_probes_once_then_closes() -> None:
    b = Breaker(threshold=3, cooldown=10, max_retry_after=300)
    for t in (0, 1):
        assert b.allow(C, t)
        b.failure(C, t)
    assert b.state(C, 2) is State.CLOSED
    b.failure(C, 2)
    assert b.state(C, 2) is State.OPEN and not b.allow(C, 5)
    assert b.reopens_in(C, 5) == 7
    assert b.allow(C, 12)  # half-open: one probe
    assert not b.allow(C, 12)  # ...and only one
    b.success(C)
    assert b.state(C, 12) is State.CLOSED and b.allow(C, 12)


def test_failed_probe_reopens_at_once() -> None:
    b = Breaker(threshold=2, cooldown=10, max_retry_after=300)
    b.failure(C, 0)
    b.failure(C, 0)
    assert b.allow(C, 10)
    b.failure(C, 10)
    assert not b.allow(C, 15) and b.allow(C, 20)


def test_released_probe_can_be_claimed_again() -> None:
    b = Breaker(threshold=1, cooldown=1, max_retry_after=300)
    b.failure(C, 0)
    assert b.allow(C, 1)
    b.release(C)  # the probe was cancelled: no verdict
    assert b.allow(C, 1)


def test_retry_after_opens_immediately_and_is_capped() -> None:
    b = Breaker(threshold=5, cooldown=10, max_retry_after=60)
    b.failure(C, 0, retry_after=30)
    assert not b.allow(C, 29) and b.allow(C, 30)
    b.success(C)
    b.failure(C, 100, retry_after=10_000)
    assert b.reopens_in(C, 100) == 60


def test_success_resets_the_count_and_keys_are_independent() -> None:
    b = Breaker(threshold=2, cooldown=10, max_retry_after=300)
    b.failure(A, 0)
    b.success(A)
    b.failure(A, 1)
    assert b.allow(A, 1)
    b.failure(B, 0)
    b.failure(B, 0)
    assert b.allow(A, 1) and not b.allow(B, 1)


def test_one_failing_model_does_not_cool_its_connections_other_models() -> None:
    b = Breaker(threshold=2, cooldown=10, max_retry_after=300)
    overloaded, fine = ("conn", "big-model"), ("conn", "small-model")
    assert b.failure(overloaded, 0) == 0  # still closed
    assert b.failure(overloaded, 0) == 10  # open, for the cooldown
    assert not b.allow(overloaded, 1) and b.allow(fine, 1)
    assert b.state(fine, 1) is State.CLOSED
    # the connection's view (admin, metrics) is its worst circuit
    assert b.connection_state("conn", 1) is State.OPEN
    assert b.connection_state("conn", 10) is State.HALF_OPEN
    assert b.connection_state("other", 1) is State.CLOSED
