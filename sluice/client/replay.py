"""The replay harness: a recorded stream through the client's parser, faults injected.

Pure: bytes in, :class:`ReplayOutcome` out (``sluice replay`` and the tests read the
file). The seed's three faults give three distinct outcomes on a complete recording:
``split`` reassembles it exactly (``complete``), ``no-done`` is ``incomplete``,
``length`` is ``truncated``. The others: ``error`` replaces the end of the stream
(from the finish chunk) with an error event (``error``, partial text kept);
``comment`` puts a comment line before and inside every event; ``crlf`` ends every
line with CRLF. Both must change nothing.

``split`` replays every way of cutting the stream in two reads (so every event is
split at every byte position) plus one read per byte; ``consistent`` says all of
them gave the same result as reading the whole stream at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final, Literal, get_args

import msgspec
from msgspec import Struct

from sluice.client.accumulator import StreamAccumulator
from sluice.client.events import StreamResult
from sluice.wire.sse import ServerSentEvent, SSEDecoder

Fault = Literal["split", "no-done", "length", "error", "comment", "crlf"]
FAULTS: Final[tuple[str, ...]] = get_args(Fault)
INJECTED_ERROR: Final = (
    b'{"error":{"message":"fault injected by the replay harness",'
    b'"type":"upstream_error","code":"replay_fault"}}'
)
_COMMENT: Final = b": injected comment"


class ReplayOutcome(Struct, frozen=True):
    fault: str | None
    result: StreamResult
    variants: int
    consistent: bool


def replay_reads(reads: Iterable[bytes]) -> StreamResult:
    """Feed ``reads`` one after the other; every read at time 0, so timings are 0/None
    and results compare equal whatever the split."""
    acc = StreamAccumulator(0.0)
    for data in reads:
        acc.feed(data, 0.0)
    return acc.finish(0.0)


def replay(data: bytes, fault: Fault | None = None) -> ReplayOutcome:
    patterns = inject(data, fault)
    whole = replay_reads((b"".join(patterns[0]),))
    consistent = all(replay_reads(reads) == whole for reads in patterns)
    return ReplayOutcome(fault, whole, len(patterns), consistent)


def inject(data: bytes, fault: Fault | None) -> tuple[tuple[bytes, ...], ...]:
    """The read patterns that deliver ``data`` with ``fault`` applied."""
    if fault is None:
        return ((data,),)
    if fault == "split":
        halves = tuple((data[:at], data[at:]) for at in range(1, len(data)))
        return (*halves, tuple(data[at : at + 1] for at in range(len(data))))
    events = SSEDecoder().feed(data)
    if fault == "crlf":
        return ((frame(events, eol=b"\r\n"),),)
    if fault == "comment":
        return ((frame(events, comment=True),),)
    if fault == "no-done":
        events = [e for e in events if not e.is_done]
    elif fault == "length":
        events = [_finish_with_length(e) for e in events]
    elif fault == "error":
        events = _end_with_error(events)
    else:
        raise ValueError(f"unknown fault {fault!r}; one of {', '.join(FAULTS)}")
    return ((frame(events),),)


def frame(events: Sequence[ServerSentEvent], *, eol: bytes = b"\n", comment: bool = False) -> bytes:
    """Write ``events`` back as an event stream (multi-line data kept)."""
    out: list[bytes] = []
    for event in events:
        if comment:
            out.append(_COMMENT + eol)
        out.extend(b"data: " + line + eol for line in event.data.split(b"\n"))
        if comment:
            out.append(_COMMENT + eol)
        out.append(eol)
    return b"".join(out)


def _choices(event: ServerSentEvent) -> tuple[Any, list[dict[str, Any]]]:
    """The event's JSON and its choice objects (none for ``[DONE]`` or non-chunks)."""
    try:
        doc = msgspec.json.decode(event.data)
    except msgspec.DecodeError:
        return None, []
    choices = doc.get("choices") if isinstance(doc, dict) else None
    return doc, [c for c in choices if isinstance(c, dict)] if isinstance(choices, list) else []


def _finish_with_length(event: ServerSentEvent) -> ServerSentEvent:
    doc, choices = _choices(event)
    finishing = [c for c in choices if c.get("finish_reason")]
    for choice in finishing:
        choice["finish_reason"] = "length"
    return ServerSentEvent(msgspec.json.encode(doc)) if finishing else event


def _end_with_error(events: Sequence[ServerSentEvent]) -> list[ServerSentEvent]:
    """Everything before the first finish chunk (or ``[DONE]``), then the error event."""
    kept: list[ServerSentEvent] = []
    for event in events:
        if event.is_done or any(c.get("finish_reason") for c in _choices(event)[1]):
            break
        kept.append(event)
    return [*kept, ServerSentEvent(INJECTED_ERROR)]
