"""Bounds on untrusted wire input: how big one streamed event may grow, how deep JSON nests.

Both decoders (SSE and AWS event-stream) stop at :data:`DEFAULT_MAX_EVENT_BYTES` unless
told otherwise and raise :class:`EventTooLargeError`; the gateway turns that into the
mid-stream ``upstream_error`` / ``upstream_event_too_large``. JSON nesting is checked
before decoding (:func:`json_depth_exceeds`): msgspec, like every recursive decoder,
would otherwise hit the interpreter's recursion limit on a hostile body.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

DEFAULT_MAX_EVENT_BYTES: Final = 4 * 1024 * 1024
"""Longest line and largest event an upstream stream may send (a few MiB)."""
DEFAULT_MAX_JSON_DEPTH: Final = 64
"""Deepest nesting of arrays and objects a JSON body may have."""

_STRUCTURE = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)
"""A whole string (skipped as one match) or one bracket."""
_OPEN: Final = frozenset(b"[{")


class EventTooLargeError(ValueError):
    """A streamed line or event grew past its decoder's limit. ``decoded``: what the
    same feed completed before that (still to be handled); the decoder stays failed."""

    def __init__(self, limit: int, decoded: Sequence[object] = ()) -> None:
        super().__init__(f"a stream event exceeded {limit} bytes")
        self.limit = limit
        self.decoded = decoded


def json_depth_exceeds(body: bytes | bytearray, limit: int) -> bool:
    """True when arrays and objects in ``body`` nest deeper than ``limit``.

    Linear, and nearly free for ordinary bodies: with no more brackets than ``limit``
    in all, no nesting can exceed it; only then are brackets counted outside strings.
    Malformed JSON is the decoder's to report; this only bounds the depth it would reach.
    """
    if _brackets_at_most(body, limit):
        return False
    depth = 0
    for match in _STRUCTURE.finditer(body):
        first = body[match.start()]
        if first in _OPEN:
            depth += 1
            if depth > limit:
                return True
        elif first != 0x22:  # a closing bracket (0x22 is '"': a string)
            depth -= 1
    return False


def _brackets_at_most(body: bytes | bytearray, limit: int) -> bool:
    """No more than ``limit`` opening brackets in ``body``: found one by one (memchr,
    several times faster than counting a whole large body), stopping past ``limit``."""
    seen = 0
    for bracket in (b"[", b"{"):
        at = body.find(bracket)
        while at != -1:
            seen += 1
            if seen > limit:
                return False
            at = body.find(bracket, at + 1)
    return True
