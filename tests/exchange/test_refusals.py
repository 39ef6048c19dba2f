"""What a refusal costs: coalesced rows in the request log, and a tarpit for a key that
keeps being refused (pure, the clock handed in)."""

from __future__ import annotations

from sluice.exchange.refusals import Tarpit
from tests.support.fake_transport import FakeClock


def test_a_key_is_refused_at_full_speed_up_to_its_burst_then_held() -> None:
    clock = FakeClock(100.0)
    tarpit = Tarpit(clock, burst=3, per_second=2, hold=1.0)
    assert [tarpit.hold("key_a", None) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert tarpit.hold("key_a", None) == 1.0  # the fourth at once: held
    assert tarpit.hold("key_a", 0.25) == 0.25  # never past its own Retry-After
    assert tarpit.hold("key_b", None) == 0.0  # another key is not
    clock.advance(0.5)  # room for one more (2 a second), but the held ones count too
    assert tarpit.hold("key_a", None) == 1.0
    clock.advance(2.0)  # out of its debt: room for two
    assert [tarpit.hold("key_a", None) for _ in range(3)] == [0.0, 0.0, 1.0]


def test_a_key_that_stops_gets_its_whole_burst_back() -> None:
    clock = FakeClock(100.0)
    tarpit = Tarpit(clock, burst=2, per_second=1, hold=1.0)
    for _ in range(10):
        tarpit.hold("key_a", None)
    clock.advance(60)
    assert [tarpit.hold("key_a", None) for _ in range(3)] == [0.0, 0.0, 1.0]


def test_the_keys_remembered_are_bounded() -> None:
    clock = FakeClock(100.0)
    tarpit = Tarpit(clock, burst=1, per_second=1, hold=1.0, most_keys=10)
    for i in range(25):
        assert tarpit.hold(f"key_{i}", None) == 0.0
    assert len(tarpit._room) <= 10


def test_a_refused_large_body_weighs_what_it_cost_to_read() -> None:
    clock = FakeClock(100.0)
    tarpit = Tarpit(clock, burst=20, per_second=10, hold=1.0)
    mib = 1024 * 1024  # weighs 1 + 4 (one more per 256 KiB read)
    assert [tarpit.hold("key_a", None, body_bytes=mib) for _ in range(5)] == [0.0] * 4 + [1.0]
    assert tarpit.holding("key_a")  # its next large body is refused on its head
    clock.advance(0.9)  # 9 back, but the held one went into debt (5): still held
    assert tarpit.hold("key_a", None, body_bytes=mib) == 1.0
    clock.advance(1.5)  # out of it: 15 of room, enough for one more at full speed
    assert tarpit.hold("key_a", None, body_bytes=mib) == 0.0
