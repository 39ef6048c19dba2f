"""The event-stream decoder: every header type, any split, damage never crashes, and it
agrees with botocore's parser on frames from the test encoder."""

from __future__ import annotations

import struct
import zlib
from typing import Any

import pytest
from botocore.eventstream import ChecksumMismatch, EventStreamBuffer
from hypothesis import given
from hypothesis import strategies as st

from sluice.wire.bounds import EventTooLargeError
from sluice.wire.eventstream import (
    MAX_HEADERS_BYTES,
    MAX_PAYLOAD_BYTES,
    EventStreamDecoder,
    EventStreamError,
    EventStreamMessage,
)
from tests.support.fake_bedrock import Typed, event, exception, frame

UUID = bytes(range(16))
EVERY_TYPE: dict[str, Any] = {
    "true": True,
    "false": False,
    "byte": Typed(2, -7),
    "short": Typed(3, -30000),
    "int": 2_000_000_000,
    "long": Typed(5, -(2**62)),
    "bytes": b"\x00\xffraw",
    "string": "héllo ✓",
    "timestamp": Typed(8, 1_787_481_600_123),
    "uuid": Typed(9, UUID),
}
EVERY_TYPE_DECODED = {
    "true": True,
    "false": False,
    "byte": -7,
    "short": -30000,
    "int": 2_000_000_000,
    "long": -(2**62),
    "bytes": b"\x00\xffraw",
    "string": "héllo ✓",
    "timestamp": 1_787_481_600_123,
    "uuid": UUID,
}
STREAM = b"".join(
    [
        frame(EVERY_TYPE, b'{"x": 1}'),
        event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hi ✓"}}),
        frame({}, b""),
        exception("throttlingException", "Too many requests"),
    ]
)


def decode_all(pieces: list[bytes]) -> list[EventStreamMessage]:
    decoder = EventStreamDecoder()
    out = []
    for piece in pieces:
        decoder.feed(piece)
        while (message := decoder.next_message()) is not None:
            out.append(message)
    assert not decoder.pending
    return out


def botocore_messages(data: bytes) -> list[tuple[dict[str, Any], bytes]]:
    buffer = EventStreamBuffer()
    buffer.add_data(data)
    messages: list[Any] = list(buffer)  # the stubs mistype the message
    return [(m.headers, m.payload) for m in messages]


def test_every_header_type_decodes() -> None:
    (message,) = decode_all([frame(EVERY_TYPE, b"payload")])
    assert message.headers == EVERY_TYPE_DECODED
    assert message.payload == b"payload"


def test_agrees_with_botocore() -> None:
    ours = [(m.headers, m.payload) for m in decode_all([STREAM])]
    assert ours == botocore_messages(STREAM)
    assert len(ours) == 4


def test_any_split_gives_the_same_messages() -> None:
    whole = decode_all([STREAM])
    assert decode_all([STREAM[i : i + 1] for i in range(len(STREAM))]) == whole
    for cut in range(len(STREAM) + 1):
        assert decode_all([STREAM[:cut], STREAM[cut:]]) == whole


HEADER_VALUES = st.one_of(
    st.booleans(),
    st.integers(-(2**31), 2**31 - 1),
    st.binary(max_size=40),
    st.text(max_size=40),
    st.builds(Typed, st.just(2), st.integers(-128, 127)),
    st.builds(Typed, st.just(3), st.integers(-(2**15), 2**15 - 1)),
    st.builds(Typed, st.sampled_from([5, 8]), st.integers(-(2**63), 2**63 - 1)),
    st.builds(Typed, st.just(9), st.binary(min_size=16, max_size=16)),
)


@given(
    messages=st.lists(
        st.tuples(
            st.dictionaries(st.text(min_size=1, max_size=20), HEADER_VALUES, max_size=6),
            st.binary(max_size=200),
        ),
        min_size=1,
        max_size=4,
    ),
    cut=st.integers(min_value=0),
)
def test_random_frames_agree_with_botocore(
    messages: list[tuple[dict[str, Any], bytes]], cut: int
) -> None:
    data = b"".join(frame(headers, payload) for headers, payload in messages)
    cut %= len(data) + 1
    ours = [(m.headers, m.payload) for m in decode_all([data[:cut], data[cut:]])]
    assert ours == botocore_messages(data)


def flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1 :]


def with_prelude(total: int, headers: int) -> bytes:
    prelude = struct.pack("!II", total, headers)
    return prelude + struct.pack("!I", zlib.crc32(prelude))


def reframe(headers: bytes, payload: bytes = b"") -> bytes:
    """A frame with correct lengths and CRCs around arbitrary header bytes."""
    body = with_prelude(12 + len(headers) + len(payload) + 4, len(headers)) + headers + payload
    return body + struct.pack("!I", zlib.crc32(body))


GOOD = frame({":event-type": "messageStart"}, b'{"role": "assistant"}')
DAMAGED = [
    ("prelude-crc", flip(GOOD, 9)),
    ("total-length", flip(GOOD, 3)),
    ("message-crc", flip(GOOD, len(GOOD) - 1)),
    ("payload", flip(GOOD, len(GOOD) - 6)),
    ("header-bytes", flip(GOOD, 14)),
    ("headers-too-long", with_prelude(MAX_HEADERS_BYTES + 17, MAX_HEADERS_BYTES + 1)),
    ("payload-too-long", with_prelude(MAX_PAYLOAD_BYTES + 17, 0)),
    ("total-shorter-than-parts", with_prelude(20, 10) + bytes(8)),
    ("unknown-header-type", reframe(b"\x01a\x0a")),
    ("header-overruns", reframe(b"\x01a\x07\x00\x09abc")),
    ("name-overruns", reframe(b"\x09ab")),
    ("duplicate-header", reframe(b"\x01a\x00\x01a\x01")),
    ("invalid-utf8", reframe(b"\x01a\x07\x00\x02\xc3\x28")),
]


@pytest.mark.parametrize("data", [d for _, d in DAMAGED], ids=[n for n, _ in DAMAGED])
def test_damage_raises_a_decode_error_after_the_good_messages(data: bytes) -> None:
    decoder = EventStreamDecoder()
    decoder.feed(GOOD + data)
    assert decoder.next_message() == EventStreamMessage(
        {":event-type": "messageStart"}, b'{"role": "assistant"}'
    )
    with pytest.raises(EventStreamError):
        decoder.next_message()
    with pytest.raises(EventStreamError):  # it stays broken
        decoder.next_message()


@pytest.mark.parametrize("at", [9, len(GOOD) - 1], ids=["prelude", "message"])
def test_botocore_also_rejects_our_crc_damage(at: int) -> None:
    with pytest.raises(ChecksumMismatch):
        botocore_messages(flip(GOOD, at))


def test_oversize_length_is_rejected_before_its_bytes_arrive() -> None:
    decoder = EventStreamDecoder()
    decoder.feed(with_prelude(MAX_PAYLOAD_BYTES + 17, 0))
    with pytest.raises(EventStreamError, match="exceeds the limit"):
        decoder.next_message()


def test_truncated_frame_waits_and_stays_pending() -> None:
    decoder = EventStreamDecoder()
    for start, end in ((0, 5), (5, 12), (12, len(GOOD) - 1)):
        decoder.feed(GOOD[start:end])
        assert decoder.next_message() is None
        assert decoder.pending
    decoder.feed(GOOD[-1:])
    assert decoder.next_message() is not None
    assert not decoder.pending


def test_a_message_past_the_event_bound_is_refused_from_its_prelude() -> None:
    decoder = EventStreamDecoder(max_event_bytes=4096)
    decoder.feed(GOOD + with_prelude(4097, 0))  # only the prelude of the big one arrived
    assert decoder.next_message() is not None  # the good one still comes out
    with pytest.raises(EventTooLargeError) as info:
        decoder.next_message()
    assert info.value.limit == 4096
    assert decoder.buffered <= 12
    with pytest.raises(EventStreamError):  # it stays broken
        decoder.next_message()


def test_a_message_at_the_event_bound_is_fine() -> None:
    one = frame({":event-type": "x"}, b"p" * 100)
    decoder = EventStreamDecoder(max_event_bytes=len(one))
    decoder.feed(one)
    assert decoder.next_message() == EventStreamMessage({":event-type": "x"}, b"p" * 100)
