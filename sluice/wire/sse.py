"""Server-sent events: an incremental decoder and the few encodings we write.

The decoder follows the WHATWG event-stream rules: lines end in LF, CRLF or CR (a CRLF
split across two reads is one line end), a line starting with ``:`` is a comment,
``data`` lines of one event are joined with LF, a blank line dispatches the event and
an event whose data buffer is empty is not dispatched. It works on bytes, so a UTF-8
character split across reads is never decoded half-way: a line is only cut at LF.
"""

from __future__ import annotations

from typing import Final

import msgspec

from sluice.wire.bounds import DEFAULT_MAX_EVENT_BYTES, EventTooLargeError

DONE_PAYLOAD: Final = b"[DONE]"
DONE_EVENT: Final = b"data: [DONE]\n\n"
KEEPALIVE_COMMENT: Final = b": keep-alive\n\n"
_BOM: Final = b"\xef\xbb\xbf"
_RETRY_DIGITS: Final = 15
"""A longer ``retry`` is ignored (and would run into Python's limit on digits)."""


class ServerSentEvent(msgspec.Struct, gc=False):
    """One dispatched event. ``data`` stays bytes: the JSON decoder reads it directly."""

    data: bytes
    event: str | None = None
    id: str | None = None
    retry: int | None = None

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", "replace")

    @property
    def is_done(self) -> bool:
        return self.data == DONE_PAYLOAD


class SSEDecoder:
    """Feed bytes as they arrive, get the events they complete.

    Linear in the bytes fed: an unfinished line is kept as its pieces and joined once,
    when its end arrives. What one event holds, its data so far and the line being
    read (any line: data, a comment, a field), is bounded by ``max_event_bytes``, the
    same however the bytes are split; past it :meth:`feed` (or :meth:`flush`) raises
    :class:`~sluice.wire.bounds.EventTooLargeError` carrying the events the same call
    completed before it, and nothing more is decoded after that.
    """

    __slots__ = (
        "_cr_pending",
        "_data",
        "_data_size",
        "_event",
        "_failed",
        "_id",
        "_line",
        "_line_size",
        "_max",
        "_retry",
        "_started",
    )

    def __init__(self, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self._max = max_event_bytes
        self._failed = False
        self._line: list[bytes] = []  # pieces of the unfinished last line
        self._line_size = 0
        self._cr_pending = False
        self._started = False
        self._data: list[bytes] = []
        self._data_size = 0
        self._event: str | None = None
        self._id: str | None = None
        self._retry: int | None = None

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        if self._failed:
            raise EventTooLargeError(self._max)
        if not chunk:
            return []
        events: list[ServerSentEvent] = []
        try:
            self._feed(chunk, events)
        except EventTooLargeError:
            self._failed = True
            self._line, self._line_size, self._data, self._data_size = [], 0, [], 0
            raise EventTooLargeError(self._max, events) from None
        return events

    def _feed(self, chunk: bytes, events: list[ServerSentEvent]) -> None:
        if self._cr_pending:
            self._cr_pending = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        if b"\r" in chunk:
            self._cr_pending = chunk.endswith(b"\r")
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if not self._started:
            chunk = self._strip_bom(chunk)
        find = chunk.find
        end = find(b"\n")
        if end < 0:
            self._keep(chunk)
            return
        if self._line:  # the end of a line begun in an earlier read
            self._keep(chunk[:end])
            line = b"".join(self._line)
            self._line, self._line_size = [], 0
            self._line_event(line, events)
            start = end + 1
            end = find(b"\n", start)
        else:
            start = 0
        while end >= 0:
            self._line_event(chunk[start:end], events)
            start = end + 1
            end = find(b"\n", start)
        if start < len(chunk):
            self._keep(chunk[start:])

    def flush(self) -> list[ServerSentEvent]:
        """End of stream: an unterminated last line still counts, an undispatched event
        does not (the format requires the blank line)."""
        if self._failed:
            raise EventTooLargeError(self._max)
        rest = b"".join(self._line)
        self._line, self._line_size = [], 0
        events: list[ServerSentEvent] = []
        if rest:
            self._line_event(rest, events)  # (within the bound: it was kept piece by piece)
        self._data, self._data_size = [], 0
        return events

    @property
    def pending(self) -> bool:
        """True when bytes of an unfinished event are buffered."""
        return bool(self._line or self._data)

    @property
    def buffered(self) -> int:
        """Bytes held for the unfinished line and event (never above the limit)."""
        return self._line_size + self._data_size

    def _strip_bom(self, chunk: bytes) -> bytes:
        """Before the first line: drop a UTF-8 BOM, even one split across reads."""
        head = b"".join(self._line) + chunk
        if len(head) < len(_BOM) and _BOM.startswith(head):
            return chunk  # kept as a line piece until the BOM is whole or ruled out
        self._started = True
        self._line, self._line_size = [], 0
        return head[len(_BOM) :] if head.startswith(_BOM) else head

    def _keep(self, piece: bytes) -> None:
        self._line_size += len(piece)
        if self._line_size + self._data_size > self._max:
            raise EventTooLargeError(self._max)
        self._line.append(piece)

    def _line_event(self, line: bytes, events: list[ServerSentEvent]) -> None:
        if len(line) + self._data_size > self._max:  # a whole line in one read, too
            raise EventTooLargeError(self._max)
        if not line:
            if self._data:
                data = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
                events.append(ServerSentEvent(data, self._event, self._id, self._retry))
                self._data, self._data_size = [], 0
            self._event = None
            self._retry = None
            return
        if line[:5] == b"data:":
            value = line[5:]
            if value[:1] == b" ":
                value = value[1:]
            self._data_line(value)
            return
        if line[:1] == b":":
            return
        name, sep, value = line.partition(b":")
        if sep and value[:1] == b" ":
            value = value[1:]
        if name == b"event":
            self._event = value.decode("utf-8", "replace")
        elif name == b"id":
            if b"\0" not in value:
                self._id = value.decode("utf-8", "replace")
        elif name == b"retry" and value.isdigit() and len(value) <= _RETRY_DIGITS:
            self._retry = int(value)
        elif name == b"data":  # "data" with no colon: an empty data line
            self._data_line(b"")

    def _data_line(self, value: bytes) -> None:
        self._data_size += len(value) + 1  # with the LF that joins it to the next
        if self._data_size > self._max:
            raise EventTooLargeError(self._max)
        self._data.append(value)


def data_event(payload: bytes) -> bytes:
    """Frame one payload as a single-line ``data:`` event."""
    return b"data: " + payload + b"\n\n"
