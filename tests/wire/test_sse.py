from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sluice.wire.bounds import EventTooLargeError
from sluice.wire.sse import ServerSentEvent, SSEDecoder


def decode_all(*reads: bytes) -> list[ServerSentEvent]:
    decoder = SSEDecoder()
    events = []
    for data in reads:
        events += decoder.feed(data)
    return events + decoder.flush()


def split_at(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces, start = [], 0
    for point in points:
        pieces.append(data[start:point])
        start = point
    pieces.append(data[start:])
    return pieces


STREAM = (
    b": comment first\n"
    b'data: {"a": 1}\n\n'
    b"event: update\nid: 7\ndata: line one\ndata: line two\n\n"
    b"retry: 1500\ndata:no-space\n\n"
    b'data: {"emoji": "\xf0\x9f\x8c\x8a caf\xc3\xa9"}\n\n'
    b"data: [DONE]\n\n"
)
EXPECTED = [
    ServerSentEvent(b'{"a": 1}'),
    ServerSentEvent(b"line one\nline two", "update", "7"),
    ServerSentEvent(b"no-space", None, "7", 1500),
    ServerSentEvent('{"emoji": "🌊 café"}'.encode(), None, "7"),
    ServerSentEvent(b"[DONE]", None, "7"),
]


def test_decodes_fields_comments_and_multiline_data() -> None:
    assert decode_all(STREAM) == EXPECTED


def test_every_single_split_point_gives_the_same_events() -> None:
    for cut in range(len(STREAM) + 1):
        assert decode_all(STREAM[:cut], STREAM[cut:]) == EXPECTED, cut


def test_byte_by_byte() -> None:
    assert decode_all(*[STREAM[i : i + 1] for i in range(len(STREAM))]) == EXPECTED


@pytest.mark.parametrize("newline", [b"\r\n", b"\r", b"\n"], ids=["crlf", "cr", "lf"])
def test_line_endings(newline: bytes) -> None:
    stream = STREAM.replace(b"\n", newline)
    assert decode_all(stream) == EXPECTED
    for cut in range(len(stream) + 1):  # a CRLF split across reads is one line end
        assert decode_all(stream[:cut], stream[cut:]) == EXPECTED, cut


@given(
    st.lists(st.integers(min_value=0, max_value=10_000), max_size=12),
    st.sampled_from([b"\n", b"\r\n", b"\r"]),
)
def test_any_split_any_line_ending(cuts: list[int], newline: bytes) -> None:
    stream = STREAM.replace(b"\n", newline)
    assert decode_all(*split_at(stream, cuts)) == EXPECTED


def test_utf8_character_split_across_reads_is_not_mangled() -> None:
    data = 'data: {"t": "日本"}\n\n'.encode()
    cut = data.index("本".encode()) + 1  # inside the 3-byte character
    (event,) = decode_all(data[:cut], data[cut:])
    assert event.text == '{"t": "日本"}'


def test_comment_only_stream_dispatches_nothing() -> None:
    assert decode_all(b": keep-alive\n\n: keep-alive\n\n") == []


def test_empty_data_buffer_is_not_dispatched_but_empty_data_line_is() -> None:
    assert decode_all(b"event: x\n\n") == []
    assert decode_all(b"data\n\n") == [ServerSentEvent(b"")]
    assert decode_all(b"data:\ndata:\n\n") == [ServerSentEvent(b"\n")]


def test_leading_bom_is_skipped_even_when_split() -> None:
    data = b"\xef\xbb\xbfdata: x\n\n"
    for cut in range(len(data) + 1):
        assert decode_all(data[:cut], data[cut:]) == [ServerSentEvent(b"x")]


def test_unterminated_last_event_is_not_dispatched() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: complete\n\ndata: partial") == [ServerSentEvent(b"complete")]
    assert decoder.pending
    assert decoder.flush() == []


def test_id_with_nul_is_ignored_and_unknown_fields_skipped() -> None:
    assert decode_all(b"id: a\0b\nfoo: bar\ndata: x\n\n") == [ServerSentEvent(b"x")]


def test_an_endless_line_is_cut_at_the_bound_with_the_events_before_it() -> None:
    decoder = SSEDecoder(max_event_bytes=1024)
    assert decoder.feed(b"data: one\n\ndata: ") == [ServerSentEvent(b"one")]
    assert decoder.feed(b"x" * 1000) == []
    assert decoder.buffered == 1006
    with pytest.raises(EventTooLargeError) as info:
        decoder.feed(b"x" * 100)
    assert (info.value.limit, info.value.decoded) == (1024, [])
    with pytest.raises(EventTooLargeError):  # it stays failed
        decoder.feed(b"\n\n")


def test_events_completed_in_the_same_read_come_with_the_error() -> None:
    decoder = SSEDecoder(max_event_bytes=64)
    with pytest.raises(EventTooLargeError) as info:
        decoder.feed(b"data: a\n\ndata: b\n\ndata: " + b"y" * 100)
    assert info.value.decoded == [ServerSentEvent(b"a"), ServerSentEvent(b"b")]


def test_an_event_of_many_short_lines_is_bounded_too() -> None:
    decoder = SSEDecoder(max_event_bytes=1000)
    decoder.feed(b"data: 0123456789\n" * 50)  # 550 bytes of data so far
    assert decoder.buffered <= 1000
    with pytest.raises(EventTooLargeError):
        decoder.feed(b"data: 0123456789\n" * 50)
    lines = SSEDecoder(max_event_bytes=1000)
    with pytest.raises(EventTooLargeError):
        lines.feed(b"data\n" * 2000)  # empty data lines count their joining LF


def test_a_long_line_fed_in_small_reads_is_decoded_in_linear_time() -> None:
    """8 MiB in 1 KiB reads: joining the line once is fast; copying the buffer on every
    read (the old decoder) moved ~32 GB and ran into the test timeout."""
    decoder = SSEDecoder(max_event_bytes=16 * 1024 * 1024)
    piece = b"z" * 1024
    decoder.feed(b"data: ")
    for _ in range(8 * 1024):
        assert decoder.feed(piece) == []
    (event,) = decoder.feed(b"\n\n")
    assert len(event.data) == 8 * 1024 * 1024


@given(st.lists(st.integers(0, 4096), max_size=20), st.integers(16, 512))
def test_never_buffers_more_than_its_bound(cuts: list[int], bound: int) -> None:
    stream = (STREAM + b"data: " + b"w" * 600 + b"\n\n") * 4
    decoder = SSEDecoder(max_event_bytes=bound)
    for piece in split_at(stream, cuts):
        try:
            decoder.feed(piece)
        except EventTooLargeError:
            break
        assert decoder.buffered <= bound


def test_a_retry_of_thousands_of_digits_is_ignored_not_raised() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"retry: " + b"9" * 5000 + b"\ndata: x\n\n") == [ServerSentEvent(b"x")]


@pytest.mark.parametrize(
    "stream",
    [b": " + b"x" * 500 + b"\ndata: a\n\n", b"id: " + b"7" * 500 + b"\ndata: a\n\n"],
    ids=["comment", "field"],
)
def test_a_long_line_of_any_kind_is_refused_however_it_is_split(stream: bytes) -> None:
    for pieces in ([stream], [stream[i : i + 1] for i in range(len(stream))]):
        decoder = SSEDecoder(max_event_bytes=100)
        with pytest.raises(EventTooLargeError):
            for piece in pieces:
                decoder.feed(piece)


def test_the_line_being_read_and_the_event_so_far_share_the_bound() -> None:
    decoder = SSEDecoder(max_event_bytes=100)
    with pytest.raises(EventTooLargeError):
        decoder.feed(b"data: " + b"x" * 90 + b"\ndata: " + b"y" * 90)
    assert decoder.buffered <= 100
