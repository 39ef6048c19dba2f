"""AWS event-stream framing (``application/vnd.amazon.eventstream``): an incremental decoder.

A message is a 12-byte prelude (total length and headers length, big-endian uint32,
then the CRC32 of those 8 bytes), the headers, the payload, and the CRC32 of
everything before it. A header is a 1-byte name length, the UTF-8 name, a type byte
and a value: 0 true, 1 false, 2/3/4/5 signed 8/16/32/64-bit integers, 6 bytes and
7 string (each with a uint16 length), 8 a timestamp (int64 milliseconds since the
epoch), 9 a 16-byte UUID. Timestamps come back as ``int`` and UUIDs as ``bytes``,
as botocore returns them.

It works like h11: ``feed`` buffers bytes, ``next_message`` hands out whole messages
in order and raises :class:`EventStreamError` at the first damage (a CRC mismatch, a
length beyond the limits, a header that overruns, an unknown type, a duplicate
name). A stream that lost its framing cannot be resynchronized, so the decoder stays
failed after that.
"""

from __future__ import annotations

import struct
import zlib
from typing import Final

import msgspec

from sluice.wire.bounds import DEFAULT_MAX_EVENT_BYTES, EventTooLargeError

PRELUDE_BYTES: Final = 12
CRC_BYTES: Final = 4
MAX_HEADERS_BYTES: Final = 128 * 1024
MAX_PAYLOAD_BYTES: Final = 24 * 1024 * 1024
"""The limits botocore enforces; Bedrock's frames are a few hundred bytes. A whole
message is also bounded by the decoder's ``max_event_bytes``, checked from its prelude,
before its body is waited for."""

HeaderValue = bool | int | bytes | str

_PRELUDE = struct.Struct("!III")
_UINT16 = struct.Struct("!H")
_UINT32 = struct.Struct("!I")
_INTEGERS: Final = (struct.Struct("!b"), struct.Struct("!h"), struct.Struct("!i"))
_INT64 = struct.Struct("!q")
_UUID_BYTES: Final = 16


class EventStreamError(ValueError):
    """The bytes are not a well-formed event stream."""


class EventStreamMessage(msgspec.Struct, frozen=True, gc=False):
    headers: dict[str, HeaderValue]
    payload: bytes


def _crc32(data: bytes) -> int:
    return zlib.crc32(data) & 0xFFFFFFFF


def _header_value(kind: int, data: bytes, at: int) -> tuple[HeaderValue, int]:
    """The value of type ``kind`` starting at ``at``, and where the next header starts."""
    if kind == 0:
        return True, at
    if kind == 1:
        return False, at
    if 2 <= kind <= 4:
        fmt = _INTEGERS[kind - 2]
        end = at + fmt.size
        _need(data, end)
        return fmt.unpack_from(data, at)[0], end
    if kind in (5, 8):  # long, timestamp
        end = at + _INT64.size
        _need(data, end)
        return _INT64.unpack_from(data, at)[0], end
    if kind in (6, 7):  # bytes, string
        _need(data, at + _UINT16.size)
        start = at + _UINT16.size
        end = start + _UINT16.unpack_from(data, at)[0]
        _need(data, end)
        raw = data[start:end]
        return (raw if kind == 6 else _utf8(raw)), end
    if kind == 9:
        end = at + _UUID_BYTES
        _need(data, end)
        return data[at:end], end
    raise EventStreamError(f"unknown header value type {kind}")


def _need(data: bytes, end: int) -> None:
    if end > len(data):
        raise EventStreamError("a header runs past the end of the headers section")


def _utf8(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise EventStreamError("a header is not valid UTF-8") from None


def _decode_headers(data: bytes) -> dict[str, HeaderValue]:
    headers: dict[str, HeaderValue] = {}
    at = 0
    while at < len(data):
        name_end = at + 1 + data[at]
        _need(data, name_end + 1)
        name = _utf8(data[at + 1 : name_end])
        if name in headers:
            raise EventStreamError(f"duplicate header {name!r}")
        headers[name], at = _header_value(data[name_end], data, name_end + 1)
    return headers


class EventStreamDecoder:
    """Feed bytes in any split; take the messages they complete."""

    __slots__ = ("_buf", "_failed", "_max", "_total")

    def __init__(self, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self._max = max_event_bytes
        self._buf = bytearray()
        self._total = 0  # length of the message being received, once its prelude checked out
        self._failed = False

    def feed(self, data: bytes) -> None:
        self._buf += data

    @property
    def pending(self) -> bool:
        """True when bytes of an unfinished message are buffered."""
        return bool(self._buf)

    @property
    def buffered(self) -> int:
        """Bytes held: at most one message's worth plus the last read."""
        return len(self._buf)

    def next_message(self) -> EventStreamMessage | None:
        """The next whole message, or ``None`` until more bytes arrive."""
        if self._failed:
            raise EventStreamError("the event stream is already broken")
        try:
            return self._next()
        except (EventStreamError, EventTooLargeError):
            self._failed = True
            raise

    def _next(self) -> EventStreamMessage | None:
        buf = self._buf
        if not self._total:
            if len(buf) < PRELUDE_BYTES:
                return None
            self._total = self._prelude()
        total = self._total
        if len(buf) < total:
            return None
        frame = bytes(buf[:total])
        end = total - CRC_BYTES
        if _crc32(frame[:end]) != _UINT32.unpack_from(frame, end)[0]:
            raise EventStreamError("message CRC mismatch")
        headers_end = PRELUDE_BYTES + _UINT32.unpack_from(frame, 4)[0]
        headers = _decode_headers(frame[PRELUDE_BYTES:headers_end])
        del buf[:total]
        self._total = 0
        return EventStreamMessage(headers, frame[headers_end:end])

    def _prelude(self) -> int:
        total, headers, crc = _PRELUDE.unpack_from(self._buf)
        if _crc32(bytes(self._buf[:8])) != crc:
            raise EventStreamError("prelude CRC mismatch")
        if headers > MAX_HEADERS_BYTES:
            raise EventStreamError(f"headers of {headers} bytes exceed the limit")
        payload = total - headers - PRELUDE_BYTES - CRC_BYTES
        if payload < 0:
            raise EventStreamError(f"total length {total} is shorter than its parts")
        if payload > MAX_PAYLOAD_BYTES:
            raise EventStreamError(f"payload of {payload} bytes exceeds the limit")
        if total > self._max:  # (messages before it were handed out one by one)
            raise EventTooLargeError(self._max)
        return int(total)
