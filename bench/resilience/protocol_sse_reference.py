"""A reference SSE decoder for the hypothesis properties (``protocol_rechunk``): the
WHATWG event-stream rules, as ``sluice.wire.sse`` documents them, on a whole stream."""

from __future__ import annotations

from bench.resilience.protocol_streams import BOM


class TooLargeError(Exception):
    """The reference decoder's bound was passed."""


def reference_sse(
    data: bytes, bound: int
) -> tuple[list[tuple[bytes, str | None, str | None, int | None]], bool]:
    """The WHATWG event-stream rules as ``sluice.wire.sse`` documents them, on a whole
    stream: (events as (data, event, id, retry), whether the bound was passed). The
    bound: what one event holds, its data so far (each data line its value and the LF
    that joins it) and the line being read, must stay within ``max_event_bytes``."""
    if data.startswith(BOM):
        data = data[len(BOM) :]
    lines = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
    tail = lines.pop()  # unterminated last line (b"" when the stream ends in a line end)
    events: list[tuple[bytes, str | None, str | None, int | None]] = []
    buf: list[bytes] = []
    size = 0
    event: str | None = None
    last_id: str | None = None
    retry: int | None = None
    try:
        for n, line in enumerate([*lines, tail]):
            if len(line) + size > bound:  # the line being read and the event so far
                raise TooLargeError
            if not line:
                if n == len(lines):
                    break  # the stream ended on a line end
                if buf:
                    events.append((b"\n".join(buf), event, last_id, retry))
                buf, size, event, retry = [], 0, None, None
                continue
            if line.startswith(b":"):
                continue
            name, colon, value = line.partition(b":")
            if colon and value.startswith(b" "):
                value = value[1:]
            if name == b"data":
                size += len(value) + 1
                if size > bound:
                    raise TooLargeError
                buf.append(value)
            elif name == b"event":
                event = value.decode("utf-8", "replace")
            elif name == b"id" and b"\0" not in value:
                last_id = value.decode("utf-8", "replace")
            elif name == b"retry" and value.isdigit() and len(value) <= 15:
                retry = int(value)
    except TooLargeError:
        return events, True
    return events, False
