"""``completed_at`` is when the response completed, by the door's wall clock, streamed
and whole; without a clock (or with one behind the start) it is ``created_at``."""

from __future__ import annotations

import json

import msgspec

from sluice.core.tally import Tally
from sluice.frontdoors.responses.decode import decode_responses_request
from sluice.frontdoors.responses.echo import Echo
from sluice.frontdoors.responses.encode import ResponsesStreamEncoder
from sluice.frontdoors.responses.whole import response_body
from sluice.wire.chunks import (
    Choice,
    CompletionChoice,
    CompletionTokensDetails,
    Delta,
    PromptTokensDetails,
    ResponseMessage,
    Usage,
)
from sluice.wire.encode import StreamIdentity

IDENTITY = StreamIdentity("req_clock", 1000, "test/model", "fixture", "conn", "primary", None)
REQUEST = decode_responses_request(json.dumps({"model": "m", "input": "Hi"}).encode())
TALLY = Tally(Usage(3, 1, 4, PromptTokensDetails(), CompletionTokensDetails()))


def streamed(clock: float | None) -> dict[str, object]:
    encoder = ResponsesStreamEncoder(
        IDENTITY, Echo(REQUEST), clock=None if clock is None else (lambda: clock)
    )
    encoder.events([[Choice(0, Delta(content="Hello"), "stop")]])
    last = encoder.ending(TALLY).rsplit(b"data: ", 1)[1]
    response: dict[str, object] = msgspec.json.decode(last)["response"]
    return response


def whole(clock: float | None) -> dict[str, object]:
    choice = CompletionChoice(0, ResponseMessage(content="Hello"), "stop")
    body = response_body(
        IDENTITY, Echo(REQUEST), choice, TALLY, clock=None if clock is None else (lambda: clock)
    )
    response: dict[str, object] = msgspec.json.decode(body)
    return response


def test_completed_at_is_the_wall_clock_at_the_end() -> None:
    for answer in (streamed, whole):
        assert answer(1042.7)["completed_at"] == 1042
        assert answer(1042.7)["created_at"] == 1000
        assert answer(None)["completed_at"] == 1000
        assert answer(990.0)["completed_at"] == 1000  # never before it was created
