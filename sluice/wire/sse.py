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

DONE_PAYLOAD: Final = b"[DONE]"
DONE_EVENT: Final = b"data: [DONE]\n\n"
KEEPALIVE_COMMENT: Final = b": keep-alive\n\n"
_BOM: Final = b"\xef\xbb\xbf"


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
    """Feed bytes as they arrive, get the events they complete."""

    __slots__ = ("_buf", "_cr_pending", "_data", "_event", "_id", "_retry", "_started")

    def __init__(self) -> None:
        self._buf = b""
        self._cr_pending = False
        self._started = False
        self._data: list[bytes] = []
        self._event: str | None = None
        self._id: str | None = None
        self._retry: int | None = None

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        if not chunk:
            return []
        if self._cr_pending:
            self._cr_pending = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        if b"\r" in chunk:
            self._cr_pending = chunk.endswith(b"\r")
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        buf = self._buf + chunk if self._buf else chunk
        if not self._started:
            if len(buf) < len(_BOM) and _BOM.startswith(buf):
                self._buf = buf
                return []
            self._started = True
            if buf.startswith(_BOM):
                buf = buf[len(_BOM) :]
        events: list[ServerSentEvent] = []
        start = 0
        find = buf.find
        while True:
            end = find(b"\n", start)
            if end < 0:
                break
            self._line(buf[start:end], events)
            start = end + 1
        self._buf = buf[start:]
        return events

    def flush(self) -> list[ServerSentEvent]:
        """End of stream: an unterminated last line still counts, an undispatched event
        does not (the format requires the blank line)."""
        rest, self._buf = self._buf, b""
        events: list[ServerSentEvent] = []
        if rest:
            self._line(rest, events)
        self._data = []
        return events

    @property
    def pending(self) -> bool:
        """True when bytes of an unfinished event are buffered."""
        return bool(self._buf or self._data)

    def _line(self, line: bytes, events: list[ServerSentEvent]) -> None:
        if not line:
            if self._data:
                data = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
                events.append(ServerSentEvent(data, self._event, self._id, self._retry))
                self._data = []
            self._event = None
            self._retry = None
            return
        if line[:5] == b"data:":
            value = line[5:]
            self._data.append(value[1:] if value[:1] == b" " else value)
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
        elif name == b"retry" and value.isdigit():
            self._retry = int(value)
        elif name == b"data":  # "data" with no colon: an empty data line
            self._data.append(b"")


def data_event(payload: bytes) -> bytes:
    """Frame one payload as a single-line ``data:`` event."""
    return b"data: " + payload + b"\n\n"
