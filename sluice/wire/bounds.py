"""Bounds on untrusted wire input: how big one streamed event may grow, how deep JSON nests.

Both decoders (SSE and AWS event-stream) stop at :data:`DEFAULT_MAX_EVENT_BYTES` unless
told otherwise and raise :class:`EventTooLargeError`; the gateway turns that into the
mid-stream ``upstream_error`` / ``upstream_event_too_large``. A request body's JSON is
bounded before decoding (:func:`json_bounds_problem`): its nesting (msgspec, like every
recursive decoder, would otherwise hit the interpreter's recursion limit on a hostile
body) and its number of values (decoding holds the event loop, and the interpreter's
lock even in a thread, for as long as it takes: half a microsecond a value).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal

DEFAULT_MAX_EVENT_BYTES: Final = 4 * 1024 * 1024
"""Longest line and largest event an upstream stream may send (a few MiB)."""
DEFAULT_MAX_JSON_DEPTH: Final = 64
"""Deepest nesting of arrays and objects a JSON body may have."""
DEFAULT_MAX_JSON_VALUES: Final = 100_000
"""Most JSON values (arrays, objects and the values in them, counted as the commas and
opening brackets outside strings, plus one) a request body may hold: what bounds the
work of decoding one, whatever its size (about half a microsecond a value)."""
MAX_MESSAGES: Final = 20_000
"""Most messages (turns) one request may carry."""
MAX_BLOCKS: Final = 2_000
"""Most content blocks (parts) one message, or a system prompt, may carry."""
MAX_TOOLS: Final = 1_024
"""Most tools one request may offer."""


class EventTooLargeError(ValueError):
    """A streamed line or event grew past its decoder's limit. ``decoded``: what the
    same feed completed before that (still to be handled); the decoder stays failed."""

    def __init__(self, limit: int, decoded: Sequence[object] = ()) -> None:
        super().__init__(f"a stream event exceeded {limit} bytes")
        self.limit = limit
        self.decoded = decoded


def json_depth_exceeds(body: bytes | bytearray, limit: int) -> bool:
    """True when arrays and objects in ``body`` nest deeper than ``limit``."""
    return json_bounds_problem(body, limit, _UNBOUNDED) == "depth"


def json_bounds_problem(
    body: bytes | bytearray, max_depth: int, max_values: int = DEFAULT_MAX_JSON_VALUES
) -> Literal["depth", "values"] | None:
    """``"values"`` when ``body`` holds more than ``max_values`` JSON values (arrays,
    objects and every value in them), ``"depth"`` when they nest deeper than
    ``max_depth``, else None.

    Linear and done by the bytes' own methods (memchr speed): an ordinary body is
    cleared by counting its commas and brackets (an upper bound of its values: strings
    may hold some); only past the bounds are strings set aside, at most as many as
    ``max_values`` allows (a string is a value or a key, so there are at most two per
    value). Malformed JSON is the decoder's to report; this only bounds what it would
    build.
    """
    if _structure(body) < max_values and _brackets_at_most(body, max_depth):
        return None
    if body.count(b'"') - body.count(b'\\"') > 4 * max_values:
        return "values"  # more strings than the values allow (escaped quotes taken out)
    outside = _outside_strings(body, max_values)
    if outside is None:
        return "values"
    if _nests_deeper(outside.translate(None, _NOT_BRACKETS), max_depth):
        return "depth"
    return "values" if _structure(outside) >= max_values else None


_UNBOUNDED: Final = 2**62
_OPEN: Final = frozenset(b"[{")
_NOT_BRACKETS: Final = bytes(set(range(256)) - set(b"[]{}"))
_NOT_STRUCTURE: Final = bytes(set(range(256)) - set(b'[]{},:"'))


def _structure(body: bytes | bytearray) -> int:
    """Commas and opening brackets: at least the number of values less one (one more
    value than commas in each array or object, and the outermost)."""
    return body.count(b",") + body.count(b"[") + body.count(b"{")


def _outside_strings(body: bytes | bytearray, max_values: int) -> bytes | None:
    """The structure of ``body`` outside its strings (commas, colons, brackets); None
    when it holds more strings than ``max_values`` values can have.

    Every backslash in valid JSON begins a two-byte escape, so dropping ``\\\\`` and
    then ``\\"`` leaves exactly the quotes that open and close strings. Of the rest only
    structure and quotes are kept; a string with no structure inside is then ``""``,
    never next to another (a colon or a comma stands between two strings), and goes in
    one pass: what little is left is split on its quotes."""
    plain = body.replace(b"\\\\", b"").replace(b'\\"', b"") if b"\\" in body else body
    compact = plain.translate(None, _NOT_STRUCTURE).replace(b'""', b"")
    quotes = compact.count(b'"')
    if quotes > 4 * min(max_values, _UNBOUNDED):  # the quotes of two strings per value
        return None
    return b"".join(compact.split(b'"')[0::2]) if quotes else bytes(compact)


def _nests_deeper(brackets: bytes, limit: int) -> bool:
    """Over the brackets alone (strings already set aside)."""
    depth = 0
    for byte in brackets:
        if byte in _OPEN:
            depth += 1
            if depth > limit:
                return True
        else:
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
