"""A flight's record and who may join it (sluice/cache/flight.py)."""

from __future__ import annotations

from sluice.cache.flight import Flight, Flights
from sluice.core.batch import ChunkBatch
from sluice.wire.chunks import Choice, Delta

RULES = ("no-forty",)


def batch(text: str, finish: str | None = None) -> ChunkBatch:
    return [[Choice(index=0, delta=Delta(content=text), finish_reason=finish)]]


def flight(most: int = 100, rules: object = RULES) -> Flight:
    return Flight("req_1", "acct_1", rules, clock=lambda: 0.0, most=most)


def test_a_flight_is_joined_only_by_a_request_with_the_same_output_guardrails() -> None:
    flights, led = Flights(lambda: 0.0), flight()
    flights.lead("k", led)
    assert flights.joinable("k", RULES) is led
    assert flights.joinable("k", ("other",)) is None
    assert flights.joinable("other-key", RULES) is None


def test_another_flight_does_not_replace_one_that_takes_joiners() -> None:
    flights, led, fresh = Flights(lambda: 0.0), flight(), flight()
    flights.lead("k", led)
    flights.lead("k", fresh)
    flights.landed("k", fresh)  # not the registered one: nothing happens
    assert flights.joinable("k", RULES) is led
    flights.landed("k", led)
    assert flights.joinable("k", RULES) is None


def test_past_the_bound_a_flight_takes_no_joiners_and_unread_stops_recording() -> None:
    led = flight(most=8)
    led.record(batch("12345"))
    led.record(batch("67890"))
    assert not led.joinable and not led.keepable
    assert led.batches == []  # nobody reads it: the record is dropped


def test_a_read_flight_keeps_recording_past_the_bound() -> None:
    led = flight(most=8)
    led.readers = 1
    for text in ("12345", "67890", "abc"):
        led.record(batch(text))
    assert not led.joinable and len(led.batches) == 3


def test_a_cut_choice_is_recorded_but_not_kept() -> None:
    led = flight()
    led.readers = 1
    led.record(batch("partial", finish="length"))
    assert not led.keepable and len(led.batches) == 1


def test_a_leader_that_left_fails_its_flight_once() -> None:
    led = flight()
    led.abandoned()
    assert led.left and led.error is not None and led.error.code == "stream_incomplete"
    first = led.error
    led.abandoned()
    led.failed(first)
    assert led.error is first and not led.joinable
