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

A Messages recording (its events named, ``message_start`` first) gets the same faults
in its own terms for ``sluice replay serve``: ``no-done`` drops ``message_stop``,
``length`` makes the ``stop_reason`` ``max_tokens``, ``error`` replaces the end (from
``message_delta``) with an ``event: error``. The parser here reads chat streams only
(:func:`is_messages` tells which a recording is).
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
INJECTED_MESSAGES_ERROR: Final = (
    b'{"type":"error","error":{"type":"api_error",'
    b'"message":"fault injected by the replay harness"}}'
)
_COMMENT: Final = b": injected comment"
_MESSAGES_END: Final = frozenset(("message_delta", "message_stop"))


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
    messages = _named(events)
    if fault == "crlf":
        return ((frame(events, eol=b"\r\n"),),)
    if fault == "comment":
        return ((frame(events, comment=True),),)
    if fault == "no-done":
        events = [e for e in events if not (e.is_done or e.event == "message_stop")]
    elif fault == "length":
        events = [(_stop_with_max_tokens if messages else _finish_with_length)(e) for e in events]
    elif fault == "error":
        events = _end_with_error(events, messages)
    else:
        raise ValueError(f"unknown fault {fault!r}; one of {', '.join(FAULTS)}")
    return ((frame(events),),)


def frame(events: Sequence[ServerSentEvent], *, eol: bytes = b"\n", comment: bool = False) -> bytes:
    """Write ``events`` back as an event stream (multi-line data kept)."""
    out: list[bytes] = []
    for event in events:
        if comment:
            out.append(_COMMENT + eol)
        if event.event is not None:
            out.append(b"event: " + event.event.encode() + eol)
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


def is_messages(data: bytes) -> bool:
    """Whether a recording is a Messages stream (its events named) rather than chat."""
    return _named(SSEDecoder().feed(data))


def _named(events: Sequence[ServerSentEvent]) -> bool:
    return any(e.event == "message_start" for e in events)


def _stop_with_max_tokens(event: ServerSentEvent) -> ServerSentEvent:
    """A Messages ``message_delta`` that stops the answer at ``max_tokens`` instead."""
    if event.event != "message_delta":
        return event
    try:
        doc = msgspec.json.decode(event.data)
    except msgspec.DecodeError:
        return event
    if not isinstance(doc, dict) or not isinstance(doc.get("delta"), dict):
        return event
    doc["delta"] |= {"stop_reason": "max_tokens", "stop_sequence": None}
    return ServerSentEvent(msgspec.json.encode(doc), event=event.event)


def _end_with_error(events: Sequence[ServerSentEvent], messages: bool) -> list[ServerSentEvent]:
    """Everything before the first finish chunk or ``[DONE]`` (Messages: before
    ``message_delta``), then the error event."""
    kept: list[ServerSentEvent] = []
    for event in events:
        if messages and event.event in _MESSAGES_END:
            break
        if event.is_done or any(c.get("finish_reason") for c in _choices(event)[1]):
            break
        kept.append(event)
    if messages:
        return [*kept, ServerSentEvent(INJECTED_MESSAGES_ERROR, event="error")]
    return [*kept, ServerSentEvent(INJECTED_ERROR)]
