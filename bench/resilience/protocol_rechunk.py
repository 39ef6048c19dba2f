"""Hypothesis properties for the "malformed SSE and event streams" rows: random splits
of valid and hostile streams give identical transcripts, and the SSE decoder agrees
with the reference decoder of :mod:`.protocol_sse_reference`.

Each property runs under ``hypothesis`` with a fixed seed, no example database and no
deadline; a failure comes back shrunk, as a short description of its smallest example.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, given, seed, settings
from hypothesis import strategies as st

from bench.resilience.protocol_sse_reference import reference_sse
from bench.resilience.protocol_streams import (
    BEDROCK,
    BOM,
    FIXTURES,
    KINDS,
    SSE_KINDS,
    frames,
    run,
    sse_events,
)
from sluice.wire.bounds import DEFAULT_MAX_EVENT_BYTES, EventTooLargeError
from sluice.wire.eventstream import EventStreamDecoder, EventStreamError
from sluice.wire.sse import SSEDecoder

HOSTILE_BOUND = 256
_LINE_END = re.compile(rb"(\r\n|\r|\n)")


def _raws(folder: str) -> list[bytes]:
    return [p.read_bytes() for p in sorted((FIXTURES / folder).glob("*.raw"))]


SSE_RAWS = {kind: _raws(kind) for kind in SSE_KINDS}
BEDROCK_RAWS = _raws(BEDROCK)
BEDROCK_FRAMES = [f for raw in BEDROCK_RAWS for f in frames(raw)]
DATA_LINES = sorted(
    {
        line
        for raws in SSE_RAWS.values()
        for raw in raws
        for line in raw.replace(b"\r\n", b"\n").split(b"\n")
        if line.startswith(b"data:") and len(line) < HOSTILE_BOUND - 8
    }
)


def split_at(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c for c in cuts if 0 < c < len(data)})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


def _cuts(data: bytes) -> st.SearchStrategy[list[int]]:
    return st.lists(st.integers(0, max(0, len(data))), max_size=24)


# --- strategies ---------------------------------------------------------------------


@st.composite
def valid_streams(draw: st.DrawFn) -> tuple[str, bytes, list[int]]:
    """A recorded stream of any provider: SSE ones with one line-end style, keep-alive
    comments between events and maybe a BOM; Bedrock ones as recorded."""
    kind = draw(st.sampled_from(KINDS))
    if kind == BEDROCK:
        data = draw(st.sampled_from(BEDROCK_RAWS))
    else:
        events = sse_events(draw(st.sampled_from(SSE_RAWS[kind])))
        eol = draw(st.sampled_from([b"\n", b"\r\n", b"\r"]))
        out = [BOM] if draw(st.booleans()) else []
        for event in events:
            if draw(st.integers(0, 3)) == 0:
                out.append(b": keep-alive\n\n")
            out.append(event)
        data = b"".join(out).replace(b"\n", eol)
    return kind, data, draw(_cuts(data))


_NAMES = [b"data", b"event", b"id", b"retry", b"", b":", b" data", b"DATA", b"dat", b"x-y"]
_VALUES = st.one_of(
    st.binary(max_size=24),
    st.sampled_from(
        [b"[DONE]", b"{}", b'{"choices":[]}', b"\xff\xfe", b"\x00", BOM, b"\xc3", b"123", b"-1"]
    ),
    st.integers(HOSTILE_BOUND - 12, HOSTILE_BOUND + 12).map(lambda n: b"v" * n),
)
_LINES = st.one_of(
    st.tuples(
        st.sampled_from(_NAMES), st.sampled_from([b":", b": ", b"", b":  ", b":\t"]), _VALUES
    ).map(b"".join),
    st.sampled_from(DATA_LINES),
    st.binary(max_size=32),
)
_EOLS = st.sampled_from([b"\n", b"\r", b"\r\n", b"\n\n", b"\r\n\r\n", b"\r\r", b""])


def _clip_lines(data: bytes, limit: int) -> bytes:
    """Every line cut to ``limit`` bytes (a BOM in front does not count)."""
    head = BOM if data.startswith(BOM) else b""
    parts = _LINE_END.split(data[len(head) :])
    return head + b"".join(p if i % 2 else p[:limit] for i, p in enumerate(parts))


@st.composite
def hostile_sse(draw: st.DrawFn, *, clip: bool) -> tuple[str, bytes, list[int]]:
    """Lines of every field, garbage, lone CRs, NULs, invalid UTF-8, BOMs and values
    around the bound; ``clip``: every line kept within the bound."""
    kind = draw(st.sampled_from(SSE_KINDS))
    lines = draw(st.lists(st.tuples(_LINES, _EOLS), max_size=24))
    data = (BOM if draw(st.booleans()) else b"") + b"".join(a + b for a, b in lines)
    if clip:
        data = _clip_lines(data, HOSTILE_BOUND)
    return kind, data, draw(_cuts(data))


@st.composite
def hostile_eventstream(draw: st.DrawFn) -> tuple[str, bytes, list[int]]:
    """Recorded Bedrock frames, some damaged: a byte flipped, cut short, garbage between."""
    parts = list(draw(st.lists(st.sampled_from(BEDROCK_FRAMES), min_size=1, max_size=8)))
    for _ in range(draw(st.integers(0, 3))):
        i = draw(st.integers(0, len(parts) - 1))
        frame = parts[i]
        op = draw(st.integers(0, 3))
        if op == 0 and frame:
            at = draw(st.integers(0, len(frame) - 1))
            parts[i] = frame[:at] + bytes([frame[at] ^ draw(st.integers(1, 255))]) + frame[at + 1 :]
        elif op == 1:
            parts[i] = frame[: draw(st.integers(0, len(frame)))]
        elif op == 2:
            parts.insert(i, draw(st.binary(max_size=40)))
        else:
            parts.insert(i, frame)
    data = b"".join(parts)
    return BEDROCK, data, draw(_cuts(data))


# --- properties ---------------------------------------------------------------------


def _short(data: bytes) -> str:
    text = repr(data)
    return text if len(text) <= 160 else text[:120] + f"... ({len(data)} bytes)"


def same_transcript(bound: int) -> Callable[[tuple[str, bytes, list[int]]], None]:
    def check(case: tuple[str, bytes, list[int]]) -> None:
        kind, data, cuts = case
        whole = run(kind, bound, [data])
        split = run(kind, bound, split_at(data, cuts))
        problems = whole.problems + split.problems
        assert not problems, f"{kind}: {problems[0]} on {_short(data)}"
        assert whole.transcript == split.transcript, (
            f"{kind}: split at {sorted(set(cuts))[:8]} differs from whole, on {_short(data)}"
        )

    return check


def sse_matches_reference(case: tuple[str, bytes, list[int]]) -> None:
    _, data, cuts = case
    decoder = SSEDecoder(HOSTILE_BOUND)
    events: list[Any] = []
    too_large = False
    for piece in split_at(data, cuts):
        try:
            events += decoder.feed(piece)
        except EventTooLargeError as exc:
            events += exc.decoded
            too_large = True
            break
    if not too_large:
        events += decoder.flush()
    got = [(e.data, e.event, e.id, e.retry) for e in events]
    expected, expected_too_large = reference_sse(data, HOSTILE_BOUND)
    assert (got, too_large) == (expected, expected_too_large), (
        f"decoder {len(got)} events{' + too large' if too_large else ''}, reference "
        f"{len(expected)}{' + too large' if expected_too_large else ''}, on {_short(data)}"
    )


def sse_bounded(case: tuple[str, bytes, list[int]]) -> None:
    _, data, cuts = case
    decoder = SSEDecoder(HOSTILE_BOUND)
    for piece in split_at(data, cuts):
        try:
            decoder.feed(piece)
        except EventTooLargeError:
            return
        assert decoder.buffered <= HOSTILE_BOUND, (
            f"buffered {decoder.buffered} > bound {HOSTILE_BOUND}, on {_short(data)}"
        )


def eventstream_bounded(case: tuple[str, bytes, list[int]]) -> None:
    _, data, cuts = case
    decoder = EventStreamDecoder(HOSTILE_BOUND)
    for piece in split_at(data, cuts):
        decoder.feed(piece)
        try:
            while decoder.next_message() is not None:
                pass
        except (EventStreamError, EventTooLargeError):
            return
        assert decoder.buffered <= HOSTILE_BOUND + len(piece), f"buffered {decoder.buffered}"


@dataclass
class PropertyResult:
    name: str
    examples: int
    failure: str | None


def check_property(
    name: str,
    strategy: st.SearchStrategy[tuple[str, bytes, list[int]]],
    prop: Callable[[tuple[str, bytes, list[int]]], None],
    examples: int,
    random_seed: int,
    *,
    shrink: bool,
) -> PropertyResult:
    count = 0
    phases = [Phase.generate, Phase.shrink] if shrink else [Phase.generate]

    @seed(random_seed)
    @settings(
        max_examples=examples,
        database=None,
        deadline=None,
        derandomize=False,
        verbosity=Verbosity.quiet,
        suppress_health_check=list(HealthCheck),
        print_blob=False,
        phases=phases,
    )
    @given(strategy)
    def test(case: tuple[str, bytes, list[int]]) -> None:
        nonlocal count
        count += 1
        prop(case)

    try:
        test()
    except Exception as exc:  # the shrunk counterexample
        return PropertyResult(name, count, f"{type(exc).__name__}: {exc}"[:400])
    return PropertyResult(name, count, None)


def properties(examples: int, random_seed: int, *, shrink: bool) -> list[PropertyResult]:
    """Every property; ``shrink``: a failure is shrunk to its smallest example (seconds)."""
    return [
        check_property(
            "valid streams of every provider, any split",
            valid_streams(),
            same_transcript(DEFAULT_MAX_EVENT_BYTES),
            examples,
            random_seed,
            shrink=shrink,
        ),
        check_property(
            "hostile SSE, every line within the bound, any split",
            hostile_sse(clip=True),
            same_transcript(HOSTILE_BOUND),
            examples,
            random_seed,
            shrink=shrink,
        ),
        check_property(
            "hostile SSE, lines of any length, any split",
            hostile_sse(clip=False),
            same_transcript(HOSTILE_BOUND),
            examples,
            random_seed,
            shrink=shrink,
        ),
        check_property(
            "SSEDecoder = the reference decoder, any split",
            hostile_sse(clip=False),
            sse_matches_reference,
            examples,
            random_seed,
            shrink=shrink,
        ),
        check_property(
            "SSEDecoder buffered within its bound",
            hostile_sse(clip=True),
            sse_bounded,
            examples,
            random_seed,
            shrink=shrink,
        ),
        check_property(
            "damaged event streams, any split",
            hostile_eventstream(),
            same_transcript(HOSTILE_BOUND * 8),
            examples,
            random_seed,
            shrink=shrink,
        ),
        check_property(
            "EventStreamDecoder within one message plus the last read",
            hostile_eventstream(),
            eventstream_bounded,
            examples,
            random_seed,
            shrink=shrink,
        ),
    ]
